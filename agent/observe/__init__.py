"""Finding out how the fabric is: collection, checks by ID, wire probes, perftest acceptance,
host NIC counters and locate (from symptoms to a culprit). Reads devices, never changes them."""
