"""The application layer: every command of ``roce-agent`` and the daemon.

The one place where ``agent``'s core, ``exporters`` and (lazily, for ``roce-agent lab``)
``lab`` meet. Nothing in the core imports this package; ``tests/unit/test_layers.py`` keeps
it that way.
"""
