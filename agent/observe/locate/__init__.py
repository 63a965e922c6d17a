"""``locate``: ``gather`` runs the traces, probes and switch reads (the I/O); ``rank`` joins
what they found into ranked suspects -- over ``topology``, the probe paths' ``evidence``, the
switches' ``counters``, ``tomography`` and ``ties`` -- and a ``verdict`` holds them (pure
functions, unit-tested on synthetic symptoms). ``followup`` probes tied groups apart;
``stats`` is the sequential test."""
