"""Cross-field rules of the intent, each with a stable ID.

Field types catch a bad value; these catch a bad combination — a profile whose every field
is valid but whose RoCE traffic would still be dropped. Each rule yields problems located
at the field a user has to change, with an "Expected: … Actual: …" message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from agent.errors import Problem
from agent.intent.model import FabricIntent
from agent.intent.plan import (
    Plan,
    build_plan,
    dscp_map,
    ecn_for_port,
    pfc_priorities,
    trim_plan,
)
from agent.intent.portnames import check_port_name
from agent.intent.units import format_size, format_speed

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class Violation:
    """What is wrong and where; ``also`` is a second place the fix may go (the other end of a
    link), whose FILE:LINE:COL the message then names as well."""

    loc: Loc
    expected: str
    actual: str
    also: Loc | None = None

    def message(self, also_at: str | None = None) -> str:
        where = f" (other end at {also_at})" if also_at else ""
        return f"Expected: {self.expected} Actual: {self.actual}{where}"


@dataclass(frozen=True)
class Rule:
    rule_id: str
    summary: str
    check: Callable[[FabricIntent, Plan], Iterator[Violation]]


RULES: list[Rule] = []


def rule(
    rule_id: str, summary: str
) -> Callable[
    [Callable[[FabricIntent, Plan], Iterator[Violation]]],
    Callable[[FabricIntent, Plan], Iterator[Violation]],
]:
    def register(
        check: Callable[[FabricIntent, Plan], Iterator[Violation]],
    ) -> Callable[[FabricIntent, Plan], Iterator[Violation]]:
        RULES.append(Rule(rule_id, summary, check))
        return check

    return register


@rule("IR001", "every lossless priority has PFC on")
def _lossless_has_pfc(intent: FabricIntent, plan: Plan) -> Iterator[Violation]:
    profile = intent.profile
    if profile.mode == "lossless" and profile.roce.priority not in profile.pfc.priorities:
        yield Violation(
            ("profile", "pfc", "priorities"),
            f"PFC on the RoCE priority {profile.roce.priority} (mode lossless)",
            f"PFC priorities {profile.pfc.priorities}",
        )


@rule("IR002", "the RoCE and CNP DSCPs map to their own priorities")
def _roce_dscp_lossless(intent: FabricIntent, plan: Plan) -> Iterator[Violation]:
    profile = intent.profile
    for priority, dscps in profile.dscp_map.items():
        for name, klass in (("RoCE", profile.roce), ("CNP", profile.cnp)):
            if klass.dscp in dscps and priority != klass.priority:
                yield Violation(
                    ("profile", "dscp_map", priority),
                    f"{name} DSCP {klass.dscp} → priority {klass.priority}",
                    f"dscp_map also sends DSCP {klass.dscp} to priority {priority}",
                )


@rule("IR003", "the CNP priority is not lossless")
def _cnp_not_lossless(intent: FabricIntent, plan: Plan) -> Iterator[Violation]:
    profile = intent.profile
    if profile.cnp.priority in pfc_priorities(profile):
        yield Violation(
            ("profile", "pfc", "priorities"),
            "CNP priority outside the PFC priorities (CNPs must never be paused)",
            f"CNP priority {profile.cnp.priority} is in PFC priorities {profile.pfc.priorities}",
        )


@rule("IR004", "the CNP priority is scheduled strict")
def _cnp_strict(intent: FabricIntent, plan: Plan) -> Iterator[Violation]:
    profile = intent.profile
    if profile.cnp.priority not in profile.ets.strict:
        yield Violation(
            ("profile", "ets", "strict"),
            f"CNP priority {profile.cnp.priority} in ets.strict",
            f"ets.strict {profile.ets.strict}",
        )


@rule("IR005", "ECN marks before PFC pauses (ECN max < pause threshold)")
def _ecn_before_pfc(intent: FabricIntent, plan: Plan) -> Iterator[Violation]:
    profile = intent.profile
    roce = profile.roce.priority
    for device in plan.devices:
        for port in device.ports:
            headroom = port.headroom.get(roce)
            ecn = next((e for e in port.ecn if e.queue == roce), None)
            if headroom and ecn and ecn.max_bytes >= headroom.pause_threshold:
                explicit = profile.buffers.pause_threshold != "auto"
                yield Violation(
                    ("profile", "buffers", "pause_threshold")
                    if explicit
                    else ("profile", "ecn", "queues", roce, "max_threshold"),
                    f"ECN max threshold below the PFC pause threshold "
                    f"{format_size(headroom.pause_threshold)} on {device.name}:{port.name}",
                    f"ECN max threshold {format_size(ecn.max_bytes)}",
                )
                return  # one port proves the profile wrong; the fix is the same everywhere


@rule("IR006", "ECN min threshold < max threshold")
def _ecn_min_below_max(intent: FabricIntent, plan: Plan) -> Iterator[Violation]:
    seen: set[int] = set()
    for device in intent.devices:
        if device.role == "host":
            continue
        for port in device.ports:
            for ecn in ecn_for_port(intent.profile, port):
                if ecn.min_bytes >= ecn.max_bytes and ecn.queue not in seen:
                    seen.add(ecn.queue)
                    yield Violation(
                        ("profile", "ecn", "queues", ecn.queue, "min_threshold"),
                        f"min threshold below max threshold on queue {ecn.queue}",
                        f"min {format_size(ecn.min_bytes)} >= max {format_size(ecn.max_bytes)}"
                        f" (at {format_speed(port.speed)} on {device.name}:{port.name})",
                    )


@rule("IR008", "watchdog restoration time >= detection time")
def _watchdog_times(intent: FabricIntent, plan: Plan) -> Iterator[Violation]:
    watchdog = intent.profile.pfc.watchdog
    if watchdog.restoration_ms < watchdog.detection_ms:
        yield Violation(
            ("profile", "pfc", "watchdog", "restoration_ms"),
            f"restoration_ms >= detection_ms ({watchdog.detection_ms})",
            f"restoration_ms {watchdog.restoration_ms}",
        )


def _ports(intent: FabricIntent) -> dict[tuple[str, str], tuple[int, int]]:
    return {
        (device.name, port.name): (d, p)
        for d, device in enumerate(intent.devices)
        for p, port in enumerate(device.ports)
    }


def _show(setting: str, value: float) -> str:
    if setting == "speed":
        return format_speed(int(value))
    if setting == "cable_m":
        return f"{value:g} m"
    return str(value)


# Both ends of one cable: the same speed and MTU, or frames are dropped (a larger MTU on
# one end) or the link does not come up; the same length, or the end that believes the
# shorter cable sizes its PFC headroom too small (agent.intent.sizing: xoff grows with the
# cable's round trip), and lossless traffic is dropped under pause.
LINK_SETTINGS = ("speed", "mtu", "cable_m")


def _from(sources: dict[str, str], setting: str) -> str:
    """Where a resolved value came from, for a message: `` from its port (F:L:C)``,
    `` from port_defaults of spine1 (F:L:C)``; nothing for an intent built in code."""
    source = sources.get(setting)
    if not source:
        return ""
    return f" from {source}" if source.endswith(")") else f" from its port ({source})"


@rule("IR009", "both ends of a link agree on speed, MTU and cable length")
def _link_ends_agree(intent: FabricIntent, plan: Plan) -> Iterator[Violation]:
    """Decided on resolved values (port, range, port_defaults, defaults.ports, derived ends:
    agent.intent.expand), so a default on one end against a value on the other is caught."""
    index = _ports(intent)
    for d, device in enumerate(intent.devices):
        for p, port in enumerate(device.ports):
            if not port.peer:
                continue
            peer_device, _, peer_port = port.peer.partition(":")
            where = index.get((peer_device, peer_port))
            if where is None or (peer_device, peer_port) < (device.name, port.name):
                continue  # missing peers are IR010; report each link once
            other = intent.devices[where[0]].ports[where[1]]
            mine_from = plan.devices[d].ports[p].sources
            theirs_from = plan.devices[where[0]].ports[where[1]].sources
            for setting in LINK_SETTINGS:
                mine, theirs = getattr(port, setting), getattr(other, setting)
                if mine == theirs:
                    continue
                known = setting in mine_from and setting in theirs_from
                yield Violation(
                    ("devices", d, "ports", p, setting),
                    f"{setting} equal on both ends of the link: {port.peer} has "
                    f"{_show(setting, theirs)}{_from(theirs_from, setting)}",
                    f"{device.name}:{port.name} has {_show(setting, mine)}"
                    f"{_from(mine_from, setting)}",
                    # each value names its place already when the loader recorded it
                    also=None if known else ("devices", where[0], "ports", where[1], setting),
                )


@rule("IR010", "every peer exists")
def _peer_exists(intent: FabricIntent, plan: Plan) -> Iterator[Violation]:
    index = _ports(intent)
    names = {device.name for device in intent.devices}
    for d, device in enumerate(intent.devices):
        for p, port in enumerate(device.ports):
            if not port.peer:
                continue
            peer_device, _, peer_port = port.peer.partition(":")
            if peer_device not in names:
                yield Violation(
                    ("devices", d, "ports", p, "peer"),
                    "a peer device defined in devices",
                    f"no device named {peer_device!r}",
                )
            elif (peer_device, peer_port) not in index:
                yield Violation(
                    ("devices", d, "ports", p, "peer"),
                    f"a port {peer_port!r} on {peer_device}",
                    f"{peer_device} has no port {peer_port!r}",
                )


@rule("IR011", "links are declared on both ends, pointing at each other")
def _peer_symmetric(intent: FabricIntent, plan: Plan) -> Iterator[Violation]:
    index = _ports(intent)
    for d, device in enumerate(intent.devices):
        for p, port in enumerate(device.ports):
            if not port.peer:
                continue
            peer_device, _, peer_port = port.peer.partition(":")
            where = index.get((peer_device, peer_port))
            if where is None:
                continue
            back = intent.devices[where[0]].ports[where[1]].peer
            if back != f"{device.name}:{port.name}":
                yield Violation(
                    ("devices", d, "ports", p, "peer"),
                    f"{port.peer} to have peer {device.name}:{port.name}",
                    f"{port.peer} has peer {back}",
                )


@rule("IR012", "names and addresses are unique")
def _unique(intent: FabricIntent, plan: Plan) -> Iterator[Violation]:
    first_device: dict[str, int] = {}
    mgmt: dict[tuple[str, int], str] = {}
    addresses: dict[str, str] = {}
    macs: dict[str, str] = {}
    for d, device in enumerate(intent.devices):
        if device.name in first_device:
            yield Violation(
                ("devices", d, "name"),
                "a device name used once",
                f"{device.name!r} also names devices[{first_device[device.name]}]",
            )
        first_device.setdefault(device.name, d)
        if device.host is not None:
            key = (device.host, device.port)
            if key in mgmt:
                yield Violation(
                    ("devices", d, "host"),
                    "one device per management address and port",
                    f"{device.host}:{device.port} is also {mgmt[key]}",
                )
            mgmt.setdefault(key, device.name)
        port_names: set[str] = set()
        for p, port in enumerate(device.ports):
            if port.name in port_names:
                yield Violation(
                    ("devices", d, "ports", p, "name"),
                    f"a port name used once on {device.name}",
                    f"{port.name!r} is defined twice",
                )
            port_names.add(port.name)
            owner = f"{device.name}:{port.name}"
            if port.ipv4 is not None:
                ip = str(port.ipv4.ip)
                if ip in addresses:
                    yield Violation(
                        ("devices", d, "ports", p, "ipv4"),
                        "a unique data-plane address",
                        f"{ip} is also on {addresses[ip]}",
                    )
                addresses.setdefault(ip, owner)
            if port.mac is not None:
                if port.mac in macs:
                    yield Violation(
                        ("devices", d, "ports", p, "mac"),
                        "a unique MAC address",
                        f"{port.mac} is also on {macs[port.mac]}",
                    )
                macs.setdefault(port.mac, owner)


@rule("IR013", "ETS weights cover the non-strict queues and add up to 100 %")
def _ets_weights(intent: FabricIntent, plan: Plan) -> Iterator[Violation]:
    ets = intent.profile.ets
    both = sorted(set(ets.strict) & set(ets.weights))
    if both:
        yield Violation(
            ("profile", "ets", "weights"),
            "a queue either strict or weighted",
            f"queues {both} are in both ets.strict and ets.weights",
        )
    total = sum(ets.weights.values())
    if ets.weights and total != 100:
        yield Violation(("profile", "ets", "weights"), "weights adding up to 100", f"sum {total}")
    roce = intent.profile.roce.priority
    if roce not in ets.weights and roce not in ets.strict:
        yield Violation(
            ("profile", "ets", "weights"),
            f"a bandwidth share for the RoCE priority {roce}",
            f"weights for priorities {sorted(ets.weights)}",
        )


@rule("IR014", "RoCE and CNP use different DSCPs and priorities")
def _roce_cnp_distinct(intent: FabricIntent, plan: Plan) -> Iterator[Violation]:
    profile = intent.profile
    if profile.roce.dscp == profile.cnp.dscp:
        yield Violation(
            ("profile", "cnp", "dscp"),
            f"a CNP DSCP other than the RoCE DSCP {profile.roce.dscp}",
            f"cnp.dscp {profile.cnp.dscp}",
        )
    if profile.roce.priority == profile.cnp.priority:
        yield Violation(
            ("profile", "cnp", "priority"),
            f"a CNP priority other than the RoCE priority {profile.roce.priority}",
            f"cnp.priority {profile.cnp.priority}",
        )


@rule("IR015", "explicit PFC headroom is at least the computed minimum")
def _headroom_minimum(intent: FabricIntent, plan: Plan) -> Iterator[Violation]:
    if intent.profile.buffers.xoff == "auto":
        return
    for device in plan.devices:
        for port in device.ports:
            for headroom in port.headroom.values():
                if headroom.xoff < headroom.minimum_xoff:
                    yield Violation(
                        ("profile", "buffers", "xoff"),
                        f"xoff >= {headroom.minimum_xoff} bytes for {port.speed} and "
                        f"{port.cable_m} m of cable on {device.name}:{port.name}",
                        f"xoff {headroom.xoff}",
                    )
                    return


@rule("IR016", "buffer size holds xon + xoff")
def _size_holds(intent: FabricIntent, plan: Plan) -> Iterator[Violation]:
    if intent.profile.buffers.size == "auto":
        return
    for device in plan.devices:
        for port in device.ports:
            for headroom in port.headroom.values():
                if headroom.size < headroom.xon + headroom.xoff:
                    yield Violation(
                        ("profile", "buffers", "size"),
                        f"size >= xon + xoff = {headroom.xon + headroom.xoff} on "
                        f"{device.name}:{port.name}",
                        f"size {headroom.size}",
                    )
                    return


@rule("IR017", "host NIC settings agree with the switches")
def _nic_consistent(intent: FabricIntent, plan: Plan) -> Iterator[Violation]:
    profile = intent.profile
    nic = profile.nic
    if nic.pfc_priorities is not None and sorted(nic.pfc_priorities) != pfc_priorities(profile):
        yield Violation(
            ("profile", "nic", "pfc_priorities"),
            f"the switch PFC priorities {pfc_priorities(profile)}",
            f"{sorted(nic.pfc_priorities)}",
        )
    if nic.dcqcn.cnp_dscp is not None and nic.dcqcn.cnp_dscp != profile.cnp.dscp:
        yield Violation(
            ("profile", "nic", "dcqcn", "cnp_dscp"),
            f"the CNP DSCP {profile.cnp.dscp}",
            f"cnp_dscp {nic.dcqcn.cnp_dscp}",
        )
    if nic.dcqcn.cnp_802p_prio is not None and nic.dcqcn.cnp_802p_prio != profile.cnp.priority:
        yield Violation(
            ("profile", "nic", "dcqcn", "cnp_802p_prio"),
            f"the CNP priority {profile.cnp.priority}",
            f"cnp_802p_prio {nic.dcqcn.cnp_802p_prio}",
        )
    if nic.trust != profile.trust:
        yield Violation(
            ("profile", "nic", "trust"),
            f"trust {profile.trust} as on the switches",
            f"trust {nic.trust}",
        )


@rule("IR018", "ECN, when on, is configured on the RoCE queue")
def _ecn_on_roce_queue(intent: FabricIntent, plan: Plan) -> Iterator[Violation]:
    profile = intent.profile
    if profile.ecn.enabled and profile.roce.priority not in profile.ecn.queues:
        yield Violation(
            ("profile", "ecn", "queues"),
            f"an ECN entry for the RoCE queue {profile.roce.priority}",
            f"ECN queues {sorted(profile.ecn.queues)}",
        )


@rule("IR019", "RoCE traffic has a congestion signal: PFC, ECN or both")
def _some_congestion_control(intent: FabricIntent, plan: Plan) -> Iterator[Violation]:
    profile = intent.profile
    if profile.mode == "lossy" and not profile.ecn.enabled:
        yield Violation(
            ("profile", "ecn", "enabled"),
            "ECN on in lossy mode (without PFC, ECN is the only signal)",
            "mode lossy, ecn.enabled false",
        )


# Where packet trimming is configurable, and where the agent found it is not (docs/trimming.md
# cites each). A platform not listed here (a host) is not a switch and trims nothing.
TRIMMING_PLATFORMS = {
    "sonic": "SWITCH_TRIMMING (sonic-net/SONiC packet-trimming HLD)",
    "cumulus_nvue": "nv set system forwarding packet-trim (Cumulus Linux 5.14+, Spectrum-4/5)",
}
NOT_TRIMMING = {
    "arista_eos": "EOS's published configuration guides have no packet trimming",
    "cisco_nxos": "NX-OS's published configuration guides have no packet trimming",
}
# Cumulus Linux, "Packet Trimming": "a value between 256 and 1024; the value must be a
# multiple of 4".
NVUE_TRIM_SIZES = range(256, 1025, 4)


@rule("IR022", "a lossy-trim RoCE class only on switches whose NOS trims packets")
def _trimming_platforms(intent: FabricIntent, plan: Plan) -> Iterator[Violation]:
    if intent.profile.mode != "lossy-trim":
        return
    can = "; ".join(f"{name}: {how}" for name, how in TRIMMING_PLATFORMS.items())
    for d, device in enumerate(intent.devices):
        why = NOT_TRIMMING.get(device.platform)
        if why is not None:
            yield Violation(("devices", d, "platform"), f"a platform that trims ({can})", why)


@rule("IR023", "trimmed frames ride a class of their own: strict, mapped, not RoCE's")
def _trim_class(intent: FabricIntent, plan: Plan) -> Iterator[Violation]:
    profile = intent.profile
    trim = trim_plan(profile)
    if trim is None:
        return
    if trim.priority == profile.roce.priority:
        yield Violation(("profile", "trim", "priority"), "a priority other than RoCE's "
                        "(a trimmed frame must not wait behind the queue that trimmed it)",
                        f"priority {trim.priority}, the RoCE class's")  # fmt: skip
    elif trim.priority not in profile.ets.strict:
        yield Violation(("profile", "trim", "priority"),
                        f"a strict queue (ets.strict {sorted(profile.ets.strict)}), so the "
                        "loss is reported at once", f"priority {trim.priority}")  # fmt: skip
    mapped = dscp_map(profile).get(trim.dscp, 0)
    if mapped != trim.priority:
        yield Violation(("profile", "trim", "dscp"),
                        f"DSCP {trim.dscp} sent to priority {trim.priority} by this profile "
                        "(roce, cnp or dscp_map), so the next hop queues it there too",
                        f"the profile sends DSCP {trim.dscp} to priority {mapped}")  # fmt: skip


@rule("IR024", "the trim size is one every trimming switch of the fabric takes")
def _trim_size(intent: FabricIntent, plan: Plan) -> Iterator[Violation]:
    profile = intent.profile
    size = profile.trim.size_bytes
    if profile.mode != "lossy-trim" or size in NVUE_TRIM_SIZES:
        return
    if any(device.platform == "cumulus_nvue" for device in intent.devices):
        yield Violation(("profile", "trim", "size_bytes"),
                        "256-1024 bytes in steps of 4 (Cumulus Linux packet-trim size)",
                        f"{size}")  # fmt: skip


@rule("IR021", "port names follow the device's platform naming (Ethernet1/1, swp1, ...)")
def _port_names(intent: FabricIntent, plan: Plan) -> Iterator[Violation]:
    for d, device in enumerate(intent.devices):
        for p, port in enumerate(device.ports):
            expected = check_port_name(device.platform, port.name)
            if expected is not None:
                yield Violation(("devices", d, "ports", p, "name"), expected, repr(port.name))


def rule_problems(
    intent: FabricIntent, locate: Callable[[Loc, str, str], Problem], plan: Plan | None = None
) -> list[Problem]:
    """Run every rule; a problem per violation, in rule order (``plan``: the intent's, when
    the caller has it already)."""
    if plan is None:
        plan = build_plan(intent)
    problems = []
    for registered in RULES:
        for violation in registered.check(intent, plan):
            also_at = None
            if violation.also is not None:
                other = locate(violation.also, "", registered.rule_id).position
                also_at = str(other) if other is not None else None
            message = violation.message(also_at)
            problems.append(locate(violation.loc, message, registered.rule_id))
    return problems


# Rules the models enforce while validating (a field or model validator raises "IRnnn
# Expected: …"; the loader splits the ID off): they run before the plan exists, so they are
# not in RULES, but `check` enforces them all the same and `roce-agent rules` lists them.
MODEL_RULES: dict[str, str] = {
    "IR007": "ECN max mark probability 1-100 % (agent.intent.model.EcnQueue)",
    "IR020": "platform linux_host exactly for role host (agent.intent.model.Device)",
}


def rules_by_id() -> dict[str, str]:
    """Every rule ``check`` enforces, by ID: RULES and MODEL_RULES (``roce-agent rules``,
    the docs' reference)."""
    every = {r.rule_id: r.summary for r in RULES} | MODEL_RULES
    return dict(sorted(every.items()))
