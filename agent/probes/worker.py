"""``python -m agent.probes.worker ROLE JSON``: run one probe and print its JSON result.

The runner starts this on a fabric host — inside the host's network namespace in the lab,
over SSH on real hosts — so the probe code that runs there is the same everywhere.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from agent.probes.mesh import MeshSendSpec, run_mesh_sender
from agent.probes.paths import HopSpec, TraceSpec, run_hops, run_trace
from agent.probes.pfc import SniffSpec, StormSpec, run_sniffer, run_storm
from agent.probes.receiver import ReceiveSpec, run_receiver
from agent.probes.sender import SendSpec, run_sender

READY_LINE = "READY"


def run(role: str, spec: dict[str, Any]) -> dict[str, Any]:
    if role == "send":
        # READY: the socket is open; a sender with ``start_at`` then waits for that moment.
        return run_sender(SendSpec(**spec), ready=lambda: print(READY_LINE, flush=True))
    if role == "receive":
        if spec.get("senders") is not None:
            spec["senders"] = tuple(spec["senders"])
        # The line tells the runner the socket is open, so senders start only after it.
        return run_receiver(ReceiveSpec(**spec), ready=lambda: print(READY_LINE, flush=True))
    if role == "sniff-pfc":
        spec["interfaces"] = tuple(spec["interfaces"])
        return run_sniffer(SniffSpec(**spec))
    if role == "storm":
        spec["priorities"] = tuple(spec["priorities"])
        return run_storm(StormSpec(**spec))
    if role == "trace":
        return run_trace(TraceSpec.from_json(spec))
    if role == "hops":
        return run_hops(HopSpec.from_json(spec))
    if role == "mesh-send":
        return run_mesh_sender(
            MeshSendSpec.from_json(spec), ready=lambda: print(READY_LINE, flush=True)
        )
    raise ValueError(
        f"unknown probe role {role!r}; expected send, receive, sniff-pfc, storm, trace, hops "
        "or mesh-send"
    )


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m agent.probes.worker ROLE JSON", file=sys.stderr)
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
