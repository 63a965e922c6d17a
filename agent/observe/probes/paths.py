"""Which switches and ports a RoCEv2 probe crosses: traceroute with the probe's own 5-tuple,
mapped onto the fabric.

ECMP switches hash the 5-tuple, and RoCEv2 keeps its entropy in the UDP source port, so the
path of a probe is learnt the way operators learn it on real fabrics: UDP packets with the
probe's addresses, source port, UDP destination port 4791 and a BTH, sent with IP TTL 1, 2,
... from the source host; each switch that drops one for its TTL answers with ICMP time
exceeded from the port the packet arrived on (RFC 792; RFC 1812 §4.3.2.4 lets a router pick
that address, and the lab switch does). The answering address names (switch, ingress port)
through the fabric intent's port addresses.

Two halves: :func:`agent.observe.probes.traceroute.run_trace` runs on the source host and
reports which address answered which TTL; this module runs on the agent: :func:`trace` and
:func:`discover` start it on the hosts and map the answers onto the fabric as
:class:`Path` objects, and :func:`pingmesh_pairs` picks the host pairs to trace. The hop
probes of a traced path are :mod:`agent.observe.probes.hops`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, Unpack

from agent.device.fanout import results_or_raise, run_each
from agent.errors import AgentError
from agent.observe.probes.packets import ROCE_UDP_PORT
from agent.observe.probes.traceroute import DEFAULT_RATE_PPS, DEFAULT_WAIT_S, TraceSpec

if TYPE_CHECKING:
    from agent.intent.model import FabricIntent
    from agent.observe.probes.runner import Runner

BASE_SPORT = 49152  # the first source port of the pairwise probes (scenarios.BASE_SPORT)
UNKNOWN = "?"
WORKER_MARGIN_S = 15.0  # interpreter start (lab) or SSH login, on a loaded host


class PathError(AgentError):
    """A trace that cannot run (unknown host, bad parameters) or returned nonsense."""


@dataclass(frozen=True)
class Hop:
    """A switch a probe crossed and the port it arrived on (the address that answered).

    ``egress`` is the port it left by toward the next hop, from the intent (the next hop's
    ingress port's peer; for the last hop, the port toward the destination); None when the
    next hop is unknown.
    """

    switch: str
    port: str
    ip: str
    egress: str | None = None

    @property
    def known(self) -> bool:
        return self.switch != UNKNOWN


@dataclass(frozen=True)
class Path:
    """The hops of one probe from host ``src`` to host ``dst`` with UDP source port ``sport``.

    A hop that did not answer (ICMP rate-limited, or the probe dropped silently) is None;
    ``complete`` says the trace reached the last switch before ``dst`` (or ``dst`` itself).
    """

    src: str
    dst: str
    sport: int
    hops: tuple[Hop | None, ...]
    complete: bool = True

    def links(self) -> tuple[str, ...]:
        """Directed links as ``lab fault`` names them: ``h1>leaf1``, ``leaf1:PORT>spine1``
        (PORT: leaf1's egress port), ..., ``leaf2:PORT>h3``; ``?`` where a hop is unknown.
        The last link (to ``dst``) only when the path is complete."""
        names = []
        prev, prev_port = self.src, None
        for hop in self.hops:
            node = hop.switch if hop is not None else UNKNOWN
            names.append(f"{prev}:{prev_port}>{node}" if prev_port else f"{prev}>{node}")
            prev, prev_port = node, hop.egress if hop is not None else None
        if self.complete and self.hops:
            names.append(f"{prev}:{prev_port}>{self.dst}" if prev_port else f"{prev}>{self.dst}")
        return tuple(names)

    @property
    def full(self) -> bool:
        """Complete and every hop answered and known."""
        return self.complete and all(h is not None and h.known for h in self.hops)

    def hop_key(self) -> tuple[tuple[str, str] | None, ...]:
        """The hop sequence (switch, ingress port) that tells paths apart."""
        return tuple((h.switch, h.port) if h is not None else None for h in self.hops)

    def covers(self, other: Path) -> bool:
        """Whether this path agrees with ``other`` wherever ``other`` has a known hop."""
        if len(other.hops) > len(self.hops) or (
            other.complete and len(other.hops) != len(self.hops)
        ):
            return False
        return all(
            b is None or not b.known or (a is not None and (a.switch, a.port) == (b.switch, b.port))
            for a, b in zip(self.hops, other.hops, strict=False)
        )


class _Fabric:
    """The intent's addresses and cabling, for mapping answers onto switches and ports."""

    def __init__(self, intent: FabricIntent) -> None:
        self.intent = intent
        self.port_of: dict[str, tuple[str, str]] = {}
        self.peer: dict[tuple[str, str], tuple[str, str]] = {}
        self.roles = {d.name: d.role for d in intent.devices}
        for device in intent.devices:
            for port in device.ports:
                if port.ipv4 is not None and device.role != "host":
                    self.port_of[str(port.ipv4.ip)] = (device.name, port.name)
                if port.peer is not None:
                    peer_device, _, peer_port = port.peer.partition(":")
                    self.peer[(device.name, port.name)] = (peer_device, peer_port)

    def last_switch_ports(self, host: str) -> dict[str, str]:
        """{switch: its port toward ``host``} for each switch ``host`` is cabled to."""
        device = self.intent.device(host)
        out: dict[str, str] = {}
        for port in device.ports if device is not None else ():
            peer = self.peer.get((host, port.name))
            if peer is not None and self.roles.get(peer[0]) not in (None, "host"):
                out.setdefault(peer[0], peer[1])
        return out

    def stop_addresses(self, host: str) -> tuple[str, ...]:
        """Every port address of the switches ``host`` hangs off: any of them answering
        means the next hop is ``host``."""
        switches = set(self.last_switch_ports(host))
        return tuple(sorted(ip for ip, (dev, _) in self.port_of.items() if dev in switches))

    def path(self, src: str, dst: str, probe: Any) -> Path:
        """The Path of one row of the worker's result; PathError if the row is not one."""
        try:
            return self._path(src, dst, probe)
        except (KeyError, TypeError, ValueError, AttributeError):
            raise PathError(
                f"trace {src} -> {dst}: Expected: a probe result with dst_ip, sport, hops, "
                f"reached Actual: {probe!r:.200}"
            ) from None

    def _path(self, src: str, dst: str, probe: dict[str, Any]) -> Path:
        hops: list[Hop | None] = []
        dst_ip = probe["dst_ip"]
        for answer in probe["hops"]:
            if answer is None:
                hops.append(None)
            elif answer["ip"] == dst_ip:
                continue  # the destination host itself said port unreachable: not a hop
            else:
                switch, port = self.port_of.get(answer["ip"], (UNKNOWN, UNKNOWN))
                hops.append(Hop(switch, port, answer["ip"]))
        complete = bool(probe["reached"])
        toward_dst = self.last_switch_ports(dst)
        for index, hop in enumerate(hops):
            if hop is None or not hop.known:
                continue
            egress = None
            following = hops[index + 1] if index + 1 < len(hops) else None
            if following is not None and following.known:
                peer = self.peer.get((following.switch, following.port))
                if peer is not None and peer[0] == hop.switch:
                    egress = peer[1]
            elif index == len(hops) - 1 and complete:
                egress = toward_dst.get(hop.switch)
            if egress is not None:
                hops[index] = Hop(hop.switch, hop.port, hop.ip, egress)
        return Path(src, dst, int(probe["sport"]), tuple(hops), complete)


def host_ip(intent: FabricIntent, name: str) -> str:
    """The probe address of host ``name``; PathError when it has none."""
    from agent.observe.probes.scenarios import ScenarioError, endpoint

    try:
        return endpoint(intent, name).ip
    except ScenarioError as exc:
        raise PathError(str(exc)) from None


Tracer = Callable[[str, Sequence[tuple[str, int]]], list[Path]]


class TraceOptions(TypedDict, total=False):
    """How :func:`trace_many` traces: the DSCP (default: the profile's RoCE DSCP), the
    highest TTL (8), tries per TTL (2), the wait for each TTL's answers and the pace of the
    sends, the source host's runner (default: its namespace or SSH), and the UDP port."""

    dscp: int | None
    max_ttl: int
    tries: int
    wait_s: float
    rate_pps: int
    runner: Runner | None
    udp_port: int


def trace_many(
    intent: FabricIntent,
    src: str,
    probes: Sequence[tuple[str, int]],
    **options: Unpack[TraceOptions],
) -> list[Path]:
    """Trace (destination host, source port) probes from host ``src`` in one worker run, to
    UDP ``udp_port`` (the run's: the destination port is part of what ECMP hashes)."""
    from agent.observe.probes.scenarios import ScenarioError, endpoint

    try:
        source = endpoint(intent, src)
    except ScenarioError as exc:
        raise PathError(str(exc)) from None
    fabric = _Fabric(intent)
    dst_ips = {dst: host_ip(intent, dst) for dst, _ in probes}
    if src in dst_ips:
        raise PathError(f"trace {src} -> {src}: source and destination are the same host")
    spec = _trace_spec(fabric, src, [(dst_ips[dst], dst, sport) for dst, sport in probes], options)
    answers = run_worker(options.get("runner") or source.runner, "trace", spec).get("probes")
    if not isinstance(answers, list) or len(answers) != len(probes):
        raise PathError(
            f"trace from {src}: Expected: {len(probes)} probe results Actual: {answers!r:.200}"
        )
    return [fabric.path(src, dst, a) for (dst, _), a in zip(probes, answers, strict=True)]


class WorkerSpec(Protocol):
    """A spec a host's probe worker runs (a trace's, the hop probes')."""

    def as_json(self) -> dict[str, Any]: ...

    def budget_s(self) -> float: ...


def run_worker(runner: Runner, role: str, spec: WorkerSpec) -> dict[str, Any]:
    """The result of the worker ``role`` run with ``spec`` on ``runner``, waited for as long
    as the spec's budget and a worker's start; PathError when it failed."""
    from agent.observe.probes.runner import ProbeError

    handle = runner.start(role, spec.as_json())
    try:
        return handle.result(timeout=spec.budget_s() + WORKER_MARGIN_S)
    except ProbeError as exc:
        raise PathError(str(exc)) from None


def _trace_spec(
    fabric: _Fabric, src: str, probes: Sequence[tuple[str, str, int]], options: TraceOptions
) -> TraceSpec:
    """The worker's spec for ``probes`` (destination IPv4, destination host, source port);
    PathError naming the setting that is out of range."""
    dscp = options.get("dscp")
    try:
        return TraceSpec(
            probes=tuple((ip, sport) for ip, _, sport in probes),
            dscp=fabric.intent.profile.roce.dscp if dscp is None else dscp,
            max_ttl=options.get("max_ttl", 8),
            tries=options.get("tries", 2),
            wait_s=options.get("wait_s", DEFAULT_WAIT_S),
            rate_pps=options.get("rate_pps", DEFAULT_RATE_PPS),
            stop_at={ip: fabric.stop_addresses(dst) for ip, dst, _ in probes},
            udp_port=options.get("udp_port", ROCE_UDP_PORT),
        )
    except ValueError as exc:
        raise PathError(f"trace from {src}: {exc}") from None


def trace(
    intent: FabricIntent, src: str, dst: str, sport: int, **options: Unpack[TraceOptions]
) -> Path:
    """The path of the RoCEv2 probe ``src`` -> ``dst`` with UDP source port ``sport``."""
    return trace_many(intent, src, [(dst, sport)], **options)[0]


@dataclass
class _Discovery:
    """One host pair's discovery: the source ports tried, the distinct paths found."""

    pair: tuple[str, str]
    tried: int = 0
    streak: int = 0
    done: bool = False
    full: dict[tuple[Any, ...], Path] = field(default_factory=dict)
    partial: list[Path] = field(default_factory=list)

    def take(self, path: Path, max_sports: int, patience: int) -> None:
        """Account the next source port's path (in source-port order)."""
        self.tried += 1
        if path.full and path.hop_key() not in self.full:
            self.full[path.hop_key()] = path
            self.streak = 0
        else:
            # A partial answer (a silent hop) is no evidence of a new path.
            if not path.full:
                self.partial.append(path)
            self.streak += 1
        if self.streak >= patience or self.tried >= max_sports:
            self.done = True

    def paths(self) -> list[Path]:
        """Distinct full paths, plus partial ones no full path explains (deduplicated)."""
        out = list(self.full.values())
        for path in self.partial:
            if not any(known.covers(path) for known in out):
                out.append(path)
        return out


class DiscoverOptions(TypedDict, total=False):
    """How :func:`discover` looks for paths: source ports per pair at the most
    (``max_sports``, 16), ports in a row without a new path before it stops (``patience``,
    4), each host's runner, a tracer that replaces the tracing (tests), and the UDP port."""

    max_sports: int
    patience: int
    runner: Callable[[str], Runner] | None
    tracer: Tracer | None
    udp_port: int


def discover(
    intent: FabricIntent,
    pairs: Iterable[tuple[str, str]],
    **options: Unpack[DiscoverOptions],
) -> dict[tuple[str, str], list[Path]]:
    """The ECMP paths between each (source, destination) host pair.

    Source ports ``BASE_SPORT``, ``BASE_SPORT + 1``, ... are traced per pair until
    ``patience`` ports in a row bring no new path or ``max_sports`` were tried; one Path per
    distinct hop sequence, in the order found (its ``sport`` is the first port that took it).
    The result is the same as tracing one port at a time; the ports go out in rounds, one
    worker run per source host and round, all source hosts at once. ``runner(host)`` gives
    the runner of a host (default: its namespace or SSH); ``tracer(src, [(dst, sport)])``
    replaces the tracing itself (tests).
    """
    max_sports, patience = options.get("max_sports", 16), options.get("patience", 4)
    states = _discovery_states(intent, pairs, max_sports, patience)
    chosen = options.get("tracer") or _host_tracer(intent, options)
    first_round = True
    while any(not s.done for s in states.values()):
        batch = 2 * patience if first_round else patience
        first_round = False
        plan = _round_plan(states.values(), batch, max_sports)
        results = _trace_round(chosen, plan)
        for src, items in plan.items():
            for (state, _), path in zip(items, results[src], strict=True):
                if not state.done:
                    state.take(path, max_sports, patience)
    return {pair: state.paths() for pair, state in states.items()}


def _host_tracer(intent: FabricIntent, options: DiscoverOptions) -> Tracer:
    """Tracing on the hosts themselves, each with its runner."""
    runner, udp_port = options.get("runner"), options.get("udp_port", ROCE_UDP_PORT)

    def tracer(src: str, probes: Sequence[tuple[str, int]]) -> list[Path]:
        return trace_many(
            intent, src, probes, runner=runner(src) if runner else None, udp_port=udp_port
        )

    return tracer


def _discovery_states(
    intent: FabricIntent, pairs: Iterable[tuple[str, str]], max_sports: int, patience: int
) -> dict[tuple[str, str], _Discovery]:
    """One discovery per distinct pair, once the settings and every host are known good."""
    if not 1 <= max_sports <= 4096:
        raise PathError(f"max_sports: Expected: 1..4096 Actual: {max_sports}")
    if not 1 <= patience <= max_sports:
        raise PathError(f"patience: Expected: 1..max_sports ({max_sports}) Actual: {patience}")
    states: dict[tuple[str, str], _Discovery] = {}
    for src, dst in pairs:
        if src == dst:
            raise PathError(f"pair {src} -> {dst}: source and destination are the same host")
        for host in (src, dst):
            host_ip(intent, host)
        states.setdefault((src, dst), _Discovery((src, dst)))
    return states


RoundPlan = dict[str, list[tuple[_Discovery, int]]]  # source host -> (discovery, sport)


def _round_plan(states: Iterable[_Discovery], batch: int, max_sports: int) -> RoundPlan:
    """The next ``batch`` source ports of every unfinished pair, by source host."""
    plan: RoundPlan = {}
    for state in states:
        if state.done:
            continue
        for offset in range(min(batch, max_sports - state.tried)):
            plan.setdefault(state.pair[0], []).append((state, BASE_SPORT + state.tried + offset))
    return plan


def _trace_round(tracer: Tracer, plan: RoundPlan) -> dict[str, list[Path]]:
    """One round's traces, one tracer run per source host, all source hosts at once."""
    probes = {src: (src, [(s.pair[1], sport) for s, sport in items]) for src, items in plan.items()}
    traced = results_or_raise(run_each(probes, lambda job: tracer(*job), parallelism=None))
    for src, items in plan.items():
        if len(traced[src]) != len(items):
            raise PathError(
                f"tracer for {src}: Expected: {len(items)} paths Actual: {len(traced[src])}"
            )
    return traced


def pingmesh_pairs(intent: FabricIntent) -> list[tuple[str, str]]:
    """Pingmesh-style pairs: every ordered pair of hosts under one leaf (ToR-local), and for
    each pair of leaves one host of each, both directions (cross-ToR); the host picked for
    a leaf rotates with the leaf pairs, so the cross-ToR probes do not all start on one NIC.
    Rates per host are bounded by the caller."""
    fabric = _Fabric(intent)
    by_leaf: dict[str, list[str]] = {}
    for device in intent.devices:
        if device.role != "host":
            continue
        port = next((p for p in device.ports if p.ipv4 is not None), None)
        peer = fabric.peer.get((device.name, port.name)) if port is not None else None
        if peer is not None and fabric.roles.get(peer[0]) not in (None, "host"):
            by_leaf.setdefault(peer[0], []).append(device.name)
    leaves = sorted(by_leaf)
    pairs = [(a, b) for leaf in leaves for a in by_leaf[leaf] for b in by_leaf[leaf] if a != b]
    for index, (left, right) in enumerate(
        (a, b) for i, a in enumerate(leaves) for b in leaves[i + 1 :]
    ):
        x = by_leaf[left][index % len(by_leaf[left])]
        y = by_leaf[right][index % len(by_leaf[right])]
        pairs += [(x, y), (y, x)]
    return pairs
