"""Wire probes: RoCEv2 traffic injection and capture analysis, PFC sniffing and storms."""
