"""Talking to switches and hosts: normalized state and counters, one platform module per NOS,
SSH host keys, and the push path (diff, transactional apply, drift, audit)."""
