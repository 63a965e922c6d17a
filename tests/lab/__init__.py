"""Lab tests: real network namespaces, vswitches and management planes (marker ``lab``)."""
