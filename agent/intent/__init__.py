"""What the fabric should be: the fabric file's models and loader, the cross-field rules, the
plan (desired state per device and port) and the formulas that size it.

Nothing here talks to a device. Submodules are imported by name; this package re-exports
nothing, so that a host-side worker importing ``agent.intent.tokens`` pays for no pydantic.
"""
