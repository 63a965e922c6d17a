"""Where the switch decides the ECN mark: enqueue against dequeue (profile ``ecn.marking``).

For each speed and N:1 incast (one switch, dcqcn-paper: Kmin 5 KB, Kmax 200 KB, Pmax 1 %), the
same run with the mark decided at enqueue (the depth a frame finds; the shipped profiles) and
at dequeue (the depth it leaves behind; the RDMA ns-3 of HPCC and htsim), for each seed: peak
and p99 queue at the bottleneck, CNPs received, PFC frames, lossless drops.

    python bench/ecn_marking.py [--duration-ms 2] [--seeds 1,2] [--senders 2,4,8,16]
        [--speeds 100G,400G]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # `python bench/ecn_marking.py` from a checkout
    sys.path.insert(0, str(REPO))

from agent.twin.network import load_network, star_fabric_yaml  # noqa: E402 -- after the sys.path insert above
from agent.twin.results import run_twin  # noqa: E402 -- after the sys.path insert above


def _row(folder: Path, speed: str, senders: int, seed: int, duration: float) -> list[str]:
    cells = [speed, f"{senders}:1", str(seed)]
    for marking in ("enqueue", "dequeue"):
        path = folder / f"{marking}.yml"
        path.write_text(
            star_fabric_yaml(senders + 1, speed, extra_overrides=f"ecn: {{marking: {marking}}}")
        )
        r = run_twin(load_network(path), "incast", senders=senders, duration_s=duration, seed=seed)
        cells.append(
            f"{r.queue_peak_bytes // 1000} / {r.queue_p99_bytes // 1000} KB, "
            f"{r.cnps_received} CNPs, {r.pfc_frames} PFC, {r.lossless_drops} lost"
        )
    return cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration-ms", type=float, default=2.0)
    parser.add_argument("--seeds", default="1,2")
    parser.add_argument("--senders", default="2,4,8,16")
    parser.add_argument("--speeds", default="100G,400G")
    args = parser.parse_args()
    duration = args.duration_ms / 1e3
    print(
        f"N:1 incast, one switch, dcqcn-paper, {args.duration_ms:g} ms simulated; peak / p99 queue"
    )
    print("| speed | incast | seed | enqueue | dequeue |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for speed in args.speeds.split(","):
            for senders in map(int, args.senders.split(",")):
                for seed in map(int, args.seeds.split(",")):
                    print("| " + " | ".join(_row(Path(tmp), speed, senders, seed, duration)) + " |")


if __name__ == "__main__":
    main()
