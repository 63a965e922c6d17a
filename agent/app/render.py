"""``roce-agent render``: what each device would be given, offline.

The lines (EOS and NX-OS CLI, NVUE ``nv set`` commands), the patch (SONiC: an RFC 6902 JSON
patch for ``config apply-patch``) or the host commands (``mlnx_qos`` and sysfs writes) come
from each platform module's own :meth:`~agent.device.platforms.base.Platform.render`: the
full lossless configuration, as a device none of whose QoS settings match the intent would
get it. No device is connected to. ``diff`` reads the device first and shows only the
differences (``render_changes``), which needs SSH (docs/render.md).

What a rendering leaves to the NOS's (or the NIC's) own defaults is said under its header, in
its comment syntax (:func:`left_to_defaults`): EOS's render writes only the DSCPs whose
traffic class differs from EOS's default map, and no platform but SONiC writes the PFC
buffer sizes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from agent.app.output import echo_json
from agent.app.support import FABRIC, handle_errors
from agent.device.platforms import platform_for
from agent.device.platforms.arista_eos import DSCP_MAP_RE, eos_default_priority
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


# What a platform's render() never writes, so the NOS's (NIC's) default applies, and the
# pattern of a line that would write it: a test renders every platform and holds each note to
# its pattern (a note for a setting some line does write would be false).
UNSET: dict[str, tuple[tuple[str, str], ...]] = {
    "arista_eos": (
        ("the PFC buffer thresholds and headroom: no line sets them, EOS's own for the "
         "platform apply", r"(?i)buffer|headroom|xoff|xon"),
    ),
    "cisco_nxos": (
        ("the PFC pause buffer (pause buffer-size, pause-threshold, resume-threshold): no line "
         "sets it, NX-OS's own for the platform apply", r"buffer-size|pause-threshold|resume-"),
    ),
    "cumulus_nvue": (
        ("the PFC headroom and thresholds: NVUE sizes them from the cable-length set here",
         r"(?i)headroom|xoff|xon|buffer"),
    ),
    "linux_host": (
        ("the NIC's receive buffers (mlnx_qos --buffer_size, --prio2buffer): no line sets "
         "them, the NIC firmware's own apply", r"--buffer_size|--prio2buffer"),
    ),
}  # fmt: skip


@dataclass(frozen=True)
class Rendered:
    device: str
    platform: str
    role: str
    lines: list[str]
    defaults: list[str] = field(default_factory=list)  # left to the NOS's defaults, in words

    @property
    def form(self) -> str:
        return FORMS.get(self.platform, (self.platform, "#"))[0]

    def as_dict(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "device": self.device,
            "platform": self.platform,
            "role": self.role,
            "form": self.form,
            "left_to_defaults": self.defaults,
        }
        if self.platform == "sonic":
            # The patch itself, not its text: a tool can hand it to `config apply-patch`.
            entry["patch"] = json.loads("\n".join(self.lines)) if self.lines else []
        else:
            entry["lines"] = self.lines
        return entry


def render_device(device: DevicePlan) -> Rendered:
    """One device's full configuration from its platform module's ``render``, and what it
    leaves to the NOS's defaults."""
    try:
        lines = platform_for(device.platform).render(device)
    except AgentError as exc:
        raise AgentError(f"{device.name} ({device.platform}): cannot render: {exc}") from None
    defaults = left_to_defaults(device, lines)
    return Rendered(device.name, device.platform, device.role, lines, defaults)


def left_to_defaults(device: DevicePlan, lines: list[str]) -> list[str]:
    """What ``lines`` (the platform's rendering of ``device``) leave to the NOS's defaults,
    one phrase each: what the platform computes (:data:`COMPUTED`), then :data:`UNSET`."""
    computed = COMPUTED.get(device.platform)
    notes = computed(device, lines) if computed is not None else []
    return notes + [note for note, _ in UNSET.get(device.platform, ())]


def _eos_dscp_map(device: DevicePlan, lines: list[str]) -> list[str]:
    """The DSCPs no ``qos map dscp`` line names: EOS's default map (the class selector, DSCP
    d to traffic class d / 8) gives them what the intent wants, so the render leaves them."""
    written = {int(d) for line in lines if (m := DSCP_MAP_RE.fullmatch(line)) for d in
               m.group(1).split()}  # fmt: skip
    wanted = platform_for(device.platform).desired(device).dscp_to_priority
    left: dict[int, list[int]] = {}
    for dscp, priority in sorted(wanted.items()):
        if dscp not in written and priority == eos_default_priority(dscp):
            left.setdefault(priority, []).append(dscp)
    if not left:
        return []
    pairs = ", ".join(f"DSCP {_ranges(values)} to traffic-class {tc}" for tc, values in
                      sorted(left.items()))  # fmt: skip
    return [
        f"the DSCP map of {pairs}: EOS's default map (DSCP d to traffic-class d/8) already "
        "gives the intent's, so no line sets them"
    ]


def _ranges(values: list[int]) -> str:
    """``0-7, 26``: consecutive numbers as a range."""
    spans: list[list[int]] = []
    for value in values:
        if spans and value == spans[-1][-1] + 1:
            spans[-1].append(value)
        else:
            spans.append([value])
    return ", ".join(f"{s[0]}-{s[-1]}" if len(s) > 1 else str(s[0]) for s in spans)


# Notes a platform's rendering needs computed from the device (the rest are :data:`UNSET`).
COMPUTED: dict[str, Callable[[DevicePlan, list[str]], list[str]]] = {
    "arista_eos": _eos_dscp_map,
}


def unset_pattern(platform: str) -> list[re.Pattern[str]]:
    """The patterns of :data:`UNSET`'s notes for ``platform`` (a rendered line matching one
    would make its note false)."""
    return [re.compile(pattern) for _, pattern in UNSET.get(platform, ())]


def render_fabric(
    fabric: Path, patterns: tuple[str, ...] = (), roles: tuple[str, ...] = ()
) -> tuple[str, list[Rendered]]:
    """The fabric's name and each selected device's rendering, in fabric order."""
    plan = build_plan(load_fabric(fabric).intent)
    chosen = set(select_devices(((d.name, d.role) for d in plan.devices), patterns, roles))
    return plan.fabric, [render_device(d) for d in plan.devices if d.name in chosen]


def as_text(rendered: list[Rendered]) -> str:
    """Each device's lines under a comment header in its own syntax, then what they leave to
    the NOS's defaults (a comment line each); one blank line between devices."""
    blocks = []
    for item in rendered:
        comment = FORMS.get(item.platform, ("", "#"))[1]
        header = (
            f"{comment} {item.device} ({item.platform}, {item.role}): {item.form}, "
            f"{len(item.lines)} lines"
        )
        notes = [f"{comment} left to the defaults: {note}" for note in item.defaults]
        blocks.append("\n".join([header, *notes, *item.lines]))
    return printable("\n\n".join(blocks), keep_newlines=True) + "\n"


@click.command("render")
@examples(
    "roce-agent render fabric.yml --device leaf1",
    "roce-agent render fabric.yml --role leaf",
    "roce-agent render fabric.yml --device 'spine*' -o json",
    "roce-agent render pod-mixed.yml --device leaf3 -o json | jq '.devices[0].patch'",
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
    settings all differ from the intent would receive it; hosts: the NIC commands. Comment
    lines under each device's header say what it leaves to the NOS's defaults. Nothing is
    connected to: `roce-agent diff` reads the devices and shows only what differs.
    """
    name, rendered = render_fabric(fabric, devices, roles)
    if output == "json":
        document = {"fabric": name, "devices": [r.as_dict() for r in rendered]}
        echo_json(document)
    else:
        click.echo(as_text(rendered), nl=False)
