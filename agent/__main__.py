"""``python -m agent`` runs the CLI (same as the ``roce-agent`` script)."""

from agent.cli import main

main()
