"""What the platform tests share: a one-switch plan under a profile, and a connection that
answers from recorded outputs and records what it was sent.

The recorded connection stands in for devices the project has no lab for (SONiC, NVUE, NX-OS,
host NICs); the EOS platform is tested against lab switches over SSH.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from agent.device.platforms.base import ConfigRejected, Connection
from agent.intent.loader import load_fabric
from agent.intent.plan import DevicePlan, build_plan

ROOT = Path(__file__).resolve().parents[2]
PROFILES = sorted(p.stem for p in (ROOT / "playbooks" / "profiles").glob("*.yml"))
Ports = list[tuple[str, str, float]]


def single_device_plan(
    platform: str,
    ports: Ports,
    profile: str,
    *,
    role: str = "leaf",
    name: str = "sw1",
    username: str = "admin",
    overrides: str = "",
) -> DevicePlan:
    """The plan of a fabric holding one device with ``ports`` (name, speed, cable m)."""
    lines = [
        "name: golden",
        f"profile: {profile}",
        *([overrides] if overrides else []),
        "devices:",
        f"  - name: {name}",
        f"    platform: {platform}",
        f"    role: {role}",
        f"    host: {name}.example",
        f"    username: {username}",
        "    credentials: {password_env: ROCE_TEST_PASSWORD}",
        "    ports:",
        # mtu 9100: the goldens were reviewed at this MTU (it was the model's default until
        # issue #29 made it explicit)
        *(f"      - {{name: {n}, speed: {s}, cable_m: {c}, mtu: 9100}}" for n, s, c in ports),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        fabric = Path(tmp) / "fabric.yml"
        fabric.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return build_plan(load_fabric(fabric).intent).devices[0]


class RecordingConnection(Connection):
    """Records commands; answers from ``replies`` (first matching prefix). A command or
    configuration line starting with ``refuse`` gets the device's ``refusal_text``."""

    def __init__(
        self,
        device: str,
        replies: dict[str, str] | None = None,
        refuse: str | None = None,
        refusal_text: str = "% Invalid input",
    ) -> None:
        super().__init__(netmiko=None, device=device)
        self.replies = replies or {}
        self.refuse = refuse
        self.refusal_text = refusal_text
        self.sent: list[str] = []

    def show(self, command: str, read_timeout: float = 30.0) -> str:
        self.sent.append(command)
        if self.refuse and command.startswith(self.refuse):
            return self.refusal_text
        return next((out for prefix, out in self.replies.items() if command.startswith(prefix)), "")

    def send_lines(
        self, lines: list[str], read_timeout: float = 30.0, terminator: str = "#"
    ) -> str:
        for line in lines:
            self.sent.append(line)
            if self.refuse and line.strip().startswith(self.refuse):
                raise ConfigRejected(
                    f"{self.device}: refused {line!r}: {self.refusal_text.strip()}"
                )
        return ""
