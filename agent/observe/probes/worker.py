"""``python -m agent.observe.probes.worker ROLE JSON``: run one probe and print its JSON result.

The runner starts this on a fabric host — inside the host's network namespace in the lab,
over SSH on real hosts — so the probe code that runs there is the same everywhere.
"""

from __future__ import annotations

import json
import sys
from typing import Any

READY_LINE = "READY"


def _ready() -> None:
    print(READY_LINE, flush=True)


def run(role: str, spec: dict[str, Any]) -> dict[str, Any]:
    # Each role imports what it needs: ``inspect`` runs before every probe run on every host,
    # and must not pay for scapy.
    if role == "inspect":
        from agent.observe.probes.transport import inspect_interface

        ifname = spec.get("ifname")
        if not isinstance(ifname, str) or not ifname or "/" in ifname:
            raise ValueError(f"ifname: Expected: an interface name Actual: {ifname!r:.60}")
        return inspect_interface(ifname)
    if role == "send":
        from agent.observe.probes.sender import SendSpec, run_sender

        # READY: the socket is open; a sender with ``start_at`` then waits for that moment.
        return run_sender(SendSpec(**spec), ready=_ready)
    if role == "receive":
        from agent.observe.probes.receiver import ReceiveSpec, run_receiver

        if spec.get("senders") is not None:
            spec["senders"] = tuple(spec["senders"])
        # The line tells the runner the socket is open, so senders start only after it.
        return run_receiver(ReceiveSpec(**spec), ready=_ready)
    if role in ("sniff-pfc", "storm"):
        from agent.observe.probes.pause_frames import SniffSpec, StormSpec, run_sniffer, run_storm

        if role == "storm":
            spec["priorities"] = tuple(spec["priorities"])
            return run_storm(StormSpec(**spec))
        spec["interfaces"] = tuple(spec["interfaces"])
        return run_sniffer(SniffSpec(**spec))
    if role in ("trace", "hops"):
        from agent.observe.probes.hops import HopSpec, run_hops
        from agent.observe.probes.traceroute import TraceSpec, run_trace

        if role == "trace":
            return run_trace(TraceSpec.from_json(spec))
        return run_hops(HopSpec.from_json(spec))
    if role == "mesh-send":
        from agent.observe.probes.mesh import MeshSendSpec, run_mesh_sender

        return run_mesh_sender(MeshSendSpec.from_json(spec), ready=_ready)
    if role == "ring":
        from agent.observe.probes.ring import RingSpec, run_ring

        # READY: the socket is open; the rank then waits for the agreed start.
        return run_ring(RingSpec(**spec), ready=_ready)
    if role == "perftest":
        from agent.observe.perftest.worker import PerftestSpec, run_perftest

        return run_perftest(PerftestSpec(**spec), ready=_ready)
    raise ValueError(
        f"unknown probe role {role!r}; expected inspect, send, receive, sniff-pfc, storm, "
        "trace, hops, mesh-send, ring or perftest"
    )


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m agent.observe.probes.worker ROLE JSON", file=sys.stderr)
        return 2
    try:
        result = run(argv[1], json.loads(argv[2]))
    except (ValueError, TypeError, OSError, RuntimeError) as exc:
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
        return 2
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
