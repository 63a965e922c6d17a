"""What one switch's gNMI sample costs the exporter to fold, per NOS shape: the same samples
folded by one long-lived subscriber (every path worked out once, then kept) against a fresh
subscriber per sample (every path worked out again, which is what each sample cost before
subscribers kept their paths), measured in the same run.

The samples are the fleet bench's (``bench/gnmi_fleet.py``): 64-port SONiC ``COUNTERS_DB``
(two JSON_IETF tables a sample) and Cumulus Linux ``/qos`` (one leaf per update, 3 584 a
sample). CPU time of this process (``time.process_time``), best of ``--repeats`` rounds of
``--samples`` samples each.

    .venv/bin/python bench/gnmi_fold.py [--ports 64] [--samples 50] [--repeats 5]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gnmi_fleet import NvueSamples, sonic_samples  # this script's folder, on sys.path

from agent.device.gnmi import profile_for
from agent.device.gnmi.stream import Endpoint, Subscriber

SECOND_NS = 10**9
START_NS = time.time_ns()


def responses(shape: str, ports: int, count: int) -> list[list[Any]]:
    from pygnmi.spec.v080 import gnmi_pb2

    nvue = NvueSamples(ports) if shape == "nvue" else None
    samples = []
    for cell in range(count):
        stamp = START_NS + cell * SECOND_NS
        raw = nvue.samples(cell, stamp) if nvue else sonic_samples(ports, cell, stamp)
        samples.append([gnmi_pb2.SubscribeResponse.FromString(message) for message in raw])
    return samples


def fold(shape: str, samples: list[list[Any]], kept: bool) -> float:
    """CPU seconds to fold every sample but the first; ``kept`` False: a new subscriber per
    sample."""
    profile = profile_for("sonic" if shape == "sonic" else "cumulus_nvue")
    assert profile is not None
    endpoint = Endpoint("leaf1", "127.0.0.1:1", "u", "p")
    clock = {"now": START_NS / SECOND_NS}

    def subscriber() -> Subscriber:
        return Subscriber(endpoint, profile, 1.0, lambda c, n: None, clock=lambda: clock["now"])

    async def main() -> float:
        one = subscriber()
        for response in samples[0]:  # the paths' first sight, not timed in either mode
            one.apply(response)
        one.cancel()
        started = time.process_time()
        for index, sample in enumerate(samples[1:], start=1):
            clock["now"] = START_NS / SECOND_NS + index
            current = one if kept else subscriber()
            for response in sample:
                current.apply(response)
            current.cancel()
        return time.process_time() - started

    return asyncio.run(main())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ports", type=int, default=64)
    parser.add_argument("--samples", type=int, default=51)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    for option, least in (("ports", 1), ("samples", 2), ("repeats", 1)):
        if getattr(args, option) < least:
            parser.error(f"--{option}: at least {least}, not {getattr(args, option)}")
    print(f"{args.ports} ports, {args.samples} samples a round, best of {args.repeats} rounds")
    print(f"{'shape':6} {'updates':>8} {'kept ms':>8} {'fresh ms':>9} {'fresh/kept':>10}")
    for shape in ("sonic", "nvue"):
        samples = responses(shape, args.ports, args.samples)
        updates = sum(len(r.update.update) for r in samples[0])
        kept = min(fold(shape, samples, True) for _ in range(args.repeats))
        fresh = min(fold(shape, samples, False) for _ in range(args.repeats))
        timed = args.samples - 1
        per_kept, per_fresh = kept / timed * 1e3, fresh / timed * 1e3
        print(f"{shape:6} {updates:>8} {per_kept:>8.2f} {per_fresh:>9.2f} {fresh / kept:>9.2f}x")
    print(
        "ms: CPU per 64-port sample, its updates folded into one switch's counter builder "
        "(the snapshot published from it not included)"
    )


if __name__ == "__main__":
    main()
