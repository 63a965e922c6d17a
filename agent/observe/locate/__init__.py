"""``locate``: ``gather`` runs the traces, probes and switch reads; ``rank`` joins what they
found into ranked suspects (pure functions, unit-tested on synthetic symptoms)."""
