"""``roce-agent render``: what each device would be given, offline.

The lines (EOS and NX-OS CLI, NVUE ``nv set`` commands), the patch (SONiC: an RFC 6902 JSON
patch for ``config apply-patch``) or the host commands (``mlnx_qos`` and sysfs writes) come
from each platform module's own :meth:`~agent.device.platforms.base.Platform.render`: the
full lossless configuration, as a device none of whose QoS settings match the intent would
get it. No device is connected to. ``diff`` reads the device first and shows only the
differences (``render_changes``), which needs SSH (docs/render.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from agent.app.output import echo_json
from agent.app.support import FABRIC, handle_errors
from agent.device.platforms import platform_for
from agent.errors import AgentError, printable
from agent.intent.loader import load_fabric
from agent.intent.plan import DevicePlan, build_plan
from common.conventions import device_options, examples, output_option, select_devices

# What a platform's render() returns, in words, and how a comment line starts in it (the
# text output's header is a comment of the device's own syntax where it has one).
FORMS: dict[str, tuple[str, str]] = {
    # EOS: configuration commands in a configure session (https://www.arista.com/en/um-eos/
    # eos-configure-session "Configure Session"); "!" starts a comment in EOS and NX-OS CLI.
    "arista_eos": ("EOS configuration lines", "!"),
    # NX-OS: configuration commands (Cisco Nexus 9000 NX-OS QoS Configuration Guide).
    "cisco_nxos": ("NX-OS configuration lines", "!"),
    # Cumulus Linux 5.x NVUE: `nv set` commands, one per line (NVIDIA Cumulus Linux user
    # guide, "NVIDIA User Experience - NVUE" > "NVUE CLI").
    "cumulus_nvue": ("NVUE nv set commands", "#"),
    # SONiC: a JSON patch (RFC 6902) for `config apply-patch` (sonic-utilities Command
    # Reference, "config apply-patch"). JSON has no comments: the header is plain text.
    "sonic": ("SONiC JSON patch (config apply-patch)", "#"),
    # Linux RDMA hosts: mlnx_qos commands and sysfs writes for the NIC's DCQCN.
    "linux_host": ("host NIC commands (mlnx_qos, sysfs)", "#"),
}


@dataclass(frozen=True)
class Rendered:
    device: str
    platform: str
    role: str
    lines: list[str]

    @property
    def form(self) -> str:
        return FORMS.get(self.platform, (self.platform, "#"))[0]

    def as_dict(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "device": self.device,
            "platform": self.platform,
            "role": self.role,
            "form": self.form,
        }
        if self.platform == "sonic":
            # The patch itself, not its text: a tool can hand it to `config apply-patch`.
            entry["patch"] = json.loads("\n".join(self.lines)) if self.lines else []
        else:
            entry["lines"] = self.lines
        return entry


def render_device(device: DevicePlan) -> Rendered:
    """One device's full configuration from its platform module's ``render``."""
    try:
        lines = platform_for(device.platform).render(device)
    except AgentError as exc:
        raise AgentError(f"{device.name} ({device.platform}): cannot render: {exc}") from None
    return Rendered(device.name, device.platform, device.role, lines)


def render_fabric(
    fabric: Path, patterns: tuple[str, ...] = (), roles: tuple[str, ...] = ()
) -> tuple[str, list[Rendered]]:
    """The fabric's name and each selected device's rendering, in fabric order."""
    plan = build_plan(load_fabric(fabric).intent)
    chosen = set(select_devices(((d.name, d.role) for d in plan.devices), patterns, roles))
    return plan.fabric, [render_device(d) for d in plan.devices if d.name in chosen]


def as_text(rendered: list[Rendered]) -> str:
    """Each device's lines under a comment header in its own syntax; one blank line between."""
    blocks = []
    for item in rendered:
        comment = FORMS.get(item.platform, ("", "#"))[1]
        header = (
            f"{comment} {item.device} ({item.platform}, {item.role}): {item.form}, "
            f"{len(item.lines)} lines"
        )
        blocks.append("\n".join([header, *item.lines]))
    return printable("\n\n".join(blocks), keep_newlines=True) + "\n"


@click.command("render")
@examples(
    "roce-agent render fabric.yml --device leaf1",
    "roce-agent render fabric.yml --role leaf",
    "roce-agent render fabric.yml --device 'spine*' -o json",
    "roce-agent render fabric.yml --device sonic-leaf1 -o json | jq '.devices[0].patch'",
)
@FABRIC
@device_options
@output_option("text", "json", default="text")
@handle_errors
def render_command(
    fabric: Path, devices: tuple[str, ...], roles: tuple[str, ...], output: str
) -> None:
    """Print the exact lines (or SONiC patch) each device of FABRIC would be given, offline.

    The full lossless configuration from each platform's own renderer, as a device whose QoS
    settings all differ from the intent would receive it; hosts: the NIC commands. Nothing
    is connected to: `roce-agent diff` reads the devices and shows only what differs.
    """
    name, rendered = render_fabric(fabric, devices, roles)
    if output == "json":
        document = {"fabric": name, "devices": [r.as_dict() for r in rendered]}
        echo_json(document)
    else:
        click.echo(as_text(rendered), nl=False)
