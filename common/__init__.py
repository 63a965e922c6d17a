"""What ``agent`` and ``lab`` share that is not the lossless model: errors that name
FILE:LINE:COL and the one bounded YAML loader with source positions.

Imports nothing from ``agent``, ``lab``, ``exporters`` or ``lossless``.
"""
