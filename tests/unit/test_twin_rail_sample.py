"""A run of some rails of a rail-aligned job (``CollectiveSpec.sample_rails``, tune's
screening): where no link carries two rails (``placement.rails_share_no_link``), the sampled
rails' connections finish at exactly the ticks they finish at in the whole job; where links
are shared the check says so; a sample that cannot be a rail's closed system is refused.

Checked on seeded random rail-optimised pods (hosts, rails, groups, spines, sizes drawn).
"""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from agent.twin import collectives as C
from agent.twin.network import TwinError, TwinNetwork
from agent.twin.placement import rails_share_no_link
from tests.unit.rail_pods import HEADER, load_pod, rail_pod

Key = tuple[str, str, int]  # a connection by its first QP: source, destination, ECMP hash


def _done_ticks(
    monkeypatch: pytest.MonkeyPatch, network: TwinNetwork, spec: C.CollectiveSpec, seed: int
) -> tuple[dict[Key, int | None], C.CollectiveReport]:
    """Each connection's last-byte tick, by its first QP, and the report."""
    seen: dict[Key, int | None] = {}
    report = C._report

    def keep(engine: Any, job: C.CollectiveJob, *rest: Any) -> C.CollectiveReport:
        for conn in job.conns:
            qp = engine.flows[conn.flows[0]]
            seen[(qp.src, qp.dst, qp.hash)] = conn.done_tick
        return report(engine, job, *rest)

    monkeypatch.setattr(C, "_report", keep)
    out = C.run_collective(network, spec, seed=seed)
    monkeypatch.setattr(C, "_report", report)
    return seen, out


@pytest.mark.parametrize("seed", [2, 7, 19, 41])
def test_a_sampled_rail_finishes_as_it_does_in_the_whole_job(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    hosts, rails, groups = rng.randint(2, 4), rng.choice([2, 4]), rng.randint(2, 3)
    network = load_pod(tmp_path, rail_pod(hosts, rails, groups, spines=rng.randint(1, 3)))
    workload = rng.choice(["allreduce", "allgather", "reducescatter", "alltoall", "sendrecv"])
    spec = C.CollectiveSpec(workload, 0, rng.choice([1, 3, 8]) << 20,  # type: ignore[arg-type]
                            qps_per_connection=rng.choice([1, 2]))  # fmt: skip
    assert rails_share_no_link(network, spec)
    sample = rng.randint(1, rails - 1)
    whole, _ = _done_ticks(monkeypatch, network, spec, seed)
    part, report = _done_ticks(monkeypatch, network, replace(spec, sample_rails=sample), seed)
    assert part and set(part) < set(whole)
    assert part == {index: whole[index] for index in part}, (workload, hosts, rails, groups)
    assert report.completed and report.delivered_fraction == 1.0
    assert f"of {rails} ran" in report.notes[0]


def _shared_pod(hosts: int) -> str:
    """Two leaves, every NIC of a host on its own leaf: the rails share the leaves' uplinks."""
    text = HEADER.format(name="shared", speed="400G")
    text += (
        "  - {name: spine1, role: spine, platform: arista_eos, host: 10.0.0.1, "
        'ports: [{name: Ethernet1-2, peer: "leaf{n}:Ethernet100", cable_m: 30}]}\n'
    )
    for leaf in (1, 2):
        ports = ", ".join(
            f'{{name: Ethernet{2 * h + nic + 1}, peer: "gpu{(leaf - 1) * hosts + h + 1}:eth{nic}"}}'
            for h in range(hosts)
            for nic in (0, 1)
        )
        text += (
            f"  - {{name: leaf{leaf}, role: leaf, platform: arista_eos, host: 10.0.1.{leaf}, "
            f"ports: [{ports}]}}\n"
        )
    for h in range(1, 2 * hosts + 1):
        text += f"  - {{name: gpu{h}, role: host, platform: linux_host, host: 10.0.2.{h}}}\n"
    return text


def test_rails_on_one_leaf_share_its_uplinks(tmp_path: Path) -> None:
    network = load_pod(tmp_path, _shared_pod(2))
    spec = C.CollectiveSpec("allreduce", 0, 1 << 20)
    assert C.place_ranks(network, spec).rails == 2
    assert not rails_share_no_link(network, spec)


def test_one_nic_hosts_and_cross_rail_jobs_have_no_rail_to_sample(tmp_path: Path) -> None:
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    one_nic = load_pod(tmp_path / "one", rail_pod(3, 1, 2))
    assert not rails_share_no_link(one_nic, C.CollectiveSpec("allreduce", 0, 1 << 20))
    pod = load_pod(tmp_path / "two", rail_pod(2, 2, 2))
    crossing = C.CollectiveSpec("alltoall", 0, 1 << 20, pxn=False)
    assert not rails_share_no_link(pod, crossing)
    with pytest.raises(TwinError, match="crosses rails"):
        C.run_collective(pod, replace(crossing, sample_rails=1))
    with pytest.raises(TwinError, match="sample_rails: Expected: 1 to the job's 2 rail"):
        C.run_collective(pod, C.CollectiveSpec("allreduce", 0, 1 << 20, sample_rails=3))
