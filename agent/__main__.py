"""``python -m agent`` runs the CLI (same as the ``roce-agent`` script)."""

from agent.app.cli import main

main()
