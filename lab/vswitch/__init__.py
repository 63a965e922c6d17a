"""``lab.vswitch``: a user-space software switch for the virtual lossless fabric.

Its data plane really does what a RoCE fabric needs and what the kernel cannot do on veths:
IPv4 forwarding with ECMP, DSCP -> traffic class, per-port per-class shaped egress queues
(strict priority + DWRR), WRED/ECN marking, tail drop, PFC generation from per-ingress
buffer accounting, honouring received PFC, and the PFC watchdog -- all visible on the wire
and in counters -- and it behaves like a router where operators look: carrier loss takes a
port oper-down (ECMP local repair), an expired TTL is answered with ICMP time exceeded.  The
management plane talks to it only through the control socket; so does the lab's fault
injection (``set_faults``: loss, FCS/ICRC corruption, misclassification, ignored PFC, delay),
which the management plane never sees.

Modules: ``config`` (pydantic contract), ``packet`` (raw frame parsing/building),
``forwarding`` (routes, ECMP, neighbors), ``counters``, ``control`` (socket server),
``client``, ``rawsock`` (AF_PACKET ports) and ``dataplane`` (the single-threaded loop); run
with ``python -m lab.vswitch``.  The rules themselves -- queues and scheduler, WRED/ECN, PFC
accounting and timers, the watchdog -- are the shared model :mod:`lossless`, which the data
plane drives on wall time.
"""

from lab.vswitch.client import VswitchClient, VswitchError
from lab.vswitch.config import ConfigError, SwitchConfig, load_config

__all__ = ["ConfigError", "SwitchConfig", "VswitchClient", "VswitchError", "load_config"]
