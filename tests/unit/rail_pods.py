"""Rail-optimised GPU pods as fabric files, for the twin's multi-NIC tests."""

from __future__ import annotations

from pathlib import Path

from hypothesis import strategies as st

from agent.twin.network import TwinNetwork, load_network

HEADER = """\
name: {name}
profile: nvidia-default
defaults:
  username: netops
  credentials: {{password_env: FABRIC_PW}}
  ports: {{speed: {speed}, mtu: 9214, cable_m: 3}}
devices:
"""


def rail_pod(
    hosts: int,
    rails: int,
    groups: int = 1,
    spines: int = 2,
    speed: str = "400G",
    rdma_device: str | None = None,
) -> str:
    """``groups`` groups of ``hosts`` hosts with ``rails`` NICs each; NIC r of every host of a
    group on the group's leaf r; every leaf up to every spine. ``rdma_device`` (a pattern,
    ``mlx5_{i}``) names the RDMA device behind each host's eth0..."""
    leaves = groups * rails
    text = HEADER.format(name=f"pod-{hosts}x{rails}x{groups}", speed=speed)
    for s in range(1, spines + 1):
        text += (
            f"  - {{name: spine{s}, role: spine, platform: arista_eos, host: 10.0.0.{s},"
            f' ports: [{{name: Ethernet1-{leaves}, peer: "leaf{{n}}:Ethernet{100 + s}",'
            " cable_m: 30}]}\n"
        )
    for g in range(groups):
        for r in range(rails):
            leaf = g * rails + r + 1
            first = g * hosts + 1
            text += (
                f"  - {{name: leaf{leaf}, role: leaf, platform: arista_eos, "
                f"host: 10.0.1.{leaf}, ports: [{{name: Ethernet1-{hosts}, "
                f'peer: "gpu{{n+{first - 1}}}:eth{r}"}}]}}\n'
            )
    for h in range(1, groups * hosts + 1):
        ports = (
            f', ports: [{{name: eth0-{rails - 1}, rdma_device: "{rdma_device}"}}]'
            if rdma_device
            else ""
        )
        text += f"  - {{name: gpu{h}, role: host, platform: linux_host, host: 10.0.2.{h}{ports}}}\n"
    return text


def load_pod(folder: Path, text: str) -> TwinNetwork:
    """The twin's network of fabric ``text``, written to ``folder``/pod.yml."""
    path = folder / "pod.yml"
    path.write_text(text)
    return load_network(path)


def pod_shapes(
    max_hosts: int, max_rails: int = 4, max_groups: int = 2
) -> st.SearchStrategy[tuple[int, int, int]]:
    """(hosts per group, rails, groups) of a :func:`rail_pod`, drawn: 2 hosts at least."""
    return st.tuples(
        st.integers(2, max_hosts), st.integers(1, max_rails), st.integers(1, max_groups)
    )
