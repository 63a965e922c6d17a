"""Fabric files for the twin's tests: one switch, N hosts (agent.twin.network.star_fabric_yaml)."""

from __future__ import annotations

from pathlib import Path

from agent.twin.network import TwinNetwork, load_network, star_fabric_yaml

ROOT = Path(__file__).resolve().parents[2]
POD_400G = ROOT / "playbooks" / "fabrics" / "pod-400g.yml"
LAB_LEAFSPINE = ROOT / "playbooks" / "fabrics" / "lab-leafspine.yml"


def star(
    tmp: Path,
    hosts: int,
    speed: str,
    profile: str = "dcqcn-paper",
    overrides: str = "",
    dcqcn: dict[str, int] | None = None,
    mtu: int = 4096,
) -> TwinNetwork:
    path = tmp / f"star-{hosts}-{speed}-{profile}-{abs(hash((overrides, str(dcqcn))))}.yml"
    path.write_text(
        star_fabric_yaml(
            hosts, speed, profile=profile, extra_overrides=overrides, dcqcn=dcqcn, mtu=mtu
        )
    )
    return load_network(path)
