"""Where tune puts a collective's ranks (agent.twin.tune.runs.collective_hosts): alternating over
the first two leaves with hosts at the speed, so that every ring hop crosses the spines, and over
the next leaves in fabric order when two hold fewer hosts than ranks (issue #43: a held-out
fabric of two hosts per leaf made `tune` with its defaults exit 2, its 8 ranks refused on the 4
hosts of two leaves)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.twin.network import TwinNetwork, load_network
from agent.twin.tune.runs import collective_hosts

SPEED = 100_000_000_000


def leaf_spine(folder: Path, hosts_per_leaf: list[int]) -> TwinNetwork:
    """Two spines, a leaf per entry with that many 100G hosts (the compact fabric form)."""
    lines = [
        "name: t",
        "profile: nvidia-default",
        "defaults:",
        "  username: netops",
        "  credentials: {password_env: FABRIC_PW}",
        "  ports: {speed: 100G, mtu: 9100, cable_m: 3}",
        "devices:",
        "  - {name: spine1, role: spine, platform: arista_eos, host: 10.0.0.1}",
        "  - {name: spine2, role: spine, platform: arista_eos, host: 10.0.0.2}",
    ]
    for leaf, count in enumerate(hosts_per_leaf, start=1):
        lines += [
            f"  - name: leaf{leaf}",
            "    role: leaf",
            "    platform: arista_eos",
            f"    host: 10.0.1.{leaf}",
            "    ports:",
            f'      - {{name: Ethernet31-32, peer: "spine{{i+1}}:Ethernet{leaf}"}}',
        ]
        lines += [
            f"  - {{name: h{leaf}x{k}, role: host, platform: linux_host, host: 10.1.{leaf}.{k}, "
            f'ports: [{{name: eth0, peer: "leaf{leaf}:Ethernet{k}"}}]}}'
            for k in range(1, count + 1)
        ]
    path = folder / "fabric.yml"
    path.write_text("\n".join(lines) + "\n")
    return load_network(path)


def test_two_hosts_per_leaf_give_eight_ranks_over_four_leaves(tmp_path: Path) -> None:
    network = leaf_spine(tmp_path, [2, 2, 2, 2])
    assert collective_hosts(network, SPEED, 8) == (
        "h1x1", "h2x1", "h3x1", "h4x1", "h1x2", "h2x2", "h3x2", "h4x2",
    )  # fmt: skip


def test_where_two_leaves_hold_the_ranks_they_alternate_over_those_two(tmp_path: Path) -> None:
    network = leaf_spine(tmp_path, [4, 4, 4])
    assert collective_hosts(network, SPEED, 8) == (
        "h1x1", "h2x1", "h1x2", "h2x2", "h1x3", "h2x3", "h1x4", "h2x4",
    )  # fmt: skip


@settings(max_examples=40, deadline=None)
@given(
    hosts_per_leaf=st.lists(st.integers(1, 4), min_size=1, max_size=6),
    wanted=st.integers(2, 24),
)
def test_the_ranks_are_distinct_hosts_and_cross_the_spines(
    hosts_per_leaf: list[int], wanted: int
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        network = leaf_spine(Path(folder), hosts_per_leaf)
    ranks = min(wanted, sum(hosts_per_leaf))
    placed = collective_hosts(network, SPEED, ranks)
    assert len(placed) == ranks and len(set(placed)) == ranks
    leaves = [network.hosts[h].leaf for h in placed]
    if len(hosts_per_leaf) >= 2 and ranks >= 2:
        assert len(set(leaves)) >= 2  # some ring hops cross the spines
        # the leaves used are the first ones in fabric order, as few as hold the ranks (two at
        # least)
        used = len(set(leaves))
        assert sorted(set(leaves)) == sorted(f"leaf{n}" for n in range(1, used + 1))
        assert used == 2 or sum(hosts_per_leaf[: used - 1]) < ranks
    else:
        assert set(leaves) == {"leaf1"}
