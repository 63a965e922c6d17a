"""``roce-agent probe perftest``: perftest on the fabric's RDMA hosts, judged with the NIC and
switch counters around it.

Scenarios (hosts are those whose ports declare an ``rdma_device``):

- ``pairwise``: every pair of hosts once, the first sending to the second, in rounds of
  disjoint pairs (the circle method of a round-robin tournament), so no host is in two pairs
  at once and each pair has its ports to itself;
- ``bidirectional``: the same pairs with ``-b``;
- ``incast``: N clients into one host at once, one server per client on the receiver
  (``base_tcp_port`` + i), started together (one GO to all clients once all are ready).

Per run: the switches are read before and after (counters and link health, one SSH session
each, :func:`agent.observe.locate.gather.read_switches`); each perftest side runs through the probe
runner (:mod:`agent.observe.perftest.worker`, over SSH on real hosts), which reads its NIC before
and
after; the agent parses perftest's output and judges it (:mod:`agent.observe.perftest.acceptance`).
When a link fails or a NIC saw loss, :func:`name_causes` says where, from the switch ports on
the pair's shortest paths: FCS or input errors on a link, drops in a queue, PFC pauses, or no
switch counter at all (a link dropping silently: ``roce-agent locate`` ranks those).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict, TypeVar, Unpack

from agent.device.fanout import results_or_raise, run_each
from agent.device.push import Pusher
from agent.errors import AgentError, printable
from agent.intent.model import Device, FabricIntent, PerftestPolicy, Port
from agent.observe.checks.base import DeviceData
from agent.observe.hostnic import NicCounters, PortPause
from agent.observe.locate.counters import PortSymptoms, switch_symptoms
from agent.observe.locate.gather import read_switches as read_fabric_switches
from agent.observe.locate.topology import Topology
from agent.observe.perftest.acceptance import evaluate
from agent.observe.perftest.command import COMMAND_FIELDS, command_from_policy, tcp_port_for
from agent.observe.perftest.gid import tclass_for
from agent.observe.perftest.inputs import (
    LOSS_COUNTERS,
    AcceptanceInput,
    LinkRun,
    NicDelta,
    SwitchDelta,
    SwitchPort,
    nic_delta,
)
from agent.observe.perftest.output import PerftestOutputError, PerftestRun, parse_run
from agent.observe.perftest.verdict import Verdict
from agent.observe.probes.runner import NetnsRunner, ProbeError, ProbeHandle, Runner, SshRunner
from common.phases import Phases

Scenario = Literal["pairwise", "incast", "bidirectional"]
RESULT_GRACE_S = 90.0  # beyond -D: connect, drain, report exchange, an SSH session
# A side is ready after an SSH login, an interpreter start, the NIC read and, for a server,
# perftest's set-up (QPs, registered memory) until it listens: seconds on a real host with
# large buffers, more in a lab VM without KVM whose one CPU starts two servers.
READY_TIMEOUT_S = 60.0


class PerftestError(AgentError):
    """A perftest run that cannot start: unknown host, no RDMA port, bad pairs."""


@dataclass(frozen=True)
class RdmaEnd:
    """One host's RDMA port as the fabric file declares it, and how to run on the host."""

    host: str
    port: Port
    rdma_device: str
    ib_port: int
    runner: Runner

    @property
    def ip(self) -> str | None:
        return str(self.port.ipv4.ip) if self.port.ipv4 is not None else None

    @property
    def rdma_port(self) -> str:
        return f"{self.rdma_device}/{self.ib_port}"

    @property
    def access(self) -> SwitchPort | None:
        if self.port.peer is None:
            return None
        device, _, interface = self.port.peer.partition(":")
        return SwitchPort(device, interface)


def rdma_hosts(intent: FabricIntent) -> list[Device]:
    """The hosts with at least one port that declares an RDMA device, in file order."""
    return [d for d in intent.devices if d.role == "host" and d.rdma_ports()]


def rdma_end(intent: FabricIntent, name: str) -> RdmaEnd:
    device = intent.device(name)
    if device is None or device.role != "host":
        hosts = ", ".join(d.name for d in rdma_hosts(intent)) or "none"
        raise PerftestError(
            f"no host named {name!r} in fabric {intent.name} (hosts with an rdma_device: {hosts})"
        )
    ports = device.rdma_ports()
    if not ports:
        raise PerftestError(
            f"host {name}: Expected: a port with rdma_device (perftest needs an RDMA NIC) "
            "Actual: none declared"
        )
    port = ports[0]
    named = port.rdma_name_and_port
    assert named is not None
    if port.ipv4 is None:
        raise PerftestError(f"host {name} port {port.name}: Expected: an ipv4 Actual: none")
    runner: Runner = (
        NetnsRunner(name, device.netns) if device.netns is not None else SshRunner(device)
    )
    return RdmaEnd(name, port, named[0], named[1], runner)


def round_robin(hosts: Sequence[str]) -> list[list[tuple[str, str]]]:
    """Every unordered pair once, as rounds of disjoint pairs (circle method: one host stays,
    the others rotate; an odd count gets a bye each round)."""
    players: list[str | None] = list(hosts) + ([None] if len(hosts) % 2 else [])
    count = len(players)
    rounds = []
    for _ in range(count - 1):
        pairs = []
        for i in range(count // 2):
            a, b = players[i], players[count - 1 - i]
            if a is not None and b is not None:
                pairs.append((a, b) if hosts.index(a) < hosts.index(b) else (b, a))
        rounds.append(sorted(pairs, key=lambda p: (hosts.index(p[0]), hosts.index(p[1]))))
        players = [players[0], players[-1], *players[1:-1]]
    return [r for r in rounds if r]


def in_rounds(pairs: Sequence[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """Given pairs, greedily grouped so that no host is in two pairs of one round."""
    rounds: list[list[tuple[str, str]]] = []
    for pair in pairs:
        for round_ in rounds:
            if not {h for p in round_ for h in p} & set(pair):
                round_.append(pair)
                break
        else:
            rounds.append([pair])
    return rounds


# --------------------------------------------------------------------------- one run


@dataclass
class SideResult:
    """What one perftest side sent back, parsed (``run``) or why not (``error``)."""

    host: str
    side: str
    raw: dict[str, Any] = field(default_factory=dict)
    run: PerftestRun | None = None
    error: str | None = None

    def as_json(self) -> dict[str, Any]:
        raw = self.raw
        return {
            "host": self.host,
            "side": self.side,
            "argv": raw.get("argv"),
            "gid_index": raw.get("gid_index"),
            "returncode": raw.get("returncode"),
            "elapsed_s": raw.get("elapsed_s"),
            "started_at": raw.get("started_at"),
            "error": self.error,
            "stdout_tail": printable(str(raw.get("stdout", ""))[-2000:]),
        }


@dataclass
class PairResult:
    client: str
    server: str
    round: int
    client_side: SideResult
    server_side: SideResult


def _parse(side: SideResult) -> None:
    raw = side.raw
    if side.error is not None:
        return
    if raw.get("run_error"):
        side.error = str(raw["run_error"])
    try:
        side.run = parse_run(
            str(raw.get("stdout", "")), str(raw.get("stderr", "")), raw.get("json") or None
        )
    except PerftestOutputError as exc:
        side.error = side.error or f"{side.host} ({side.side}): {exc}"


def _result(handle: ProbeHandle, side: SideResult, timeout: float) -> None:
    try:
        side.raw = handle.result(timeout=timeout)
    except ProbeError as exc:
        side.error = f"{side.host} ({side.side}): {exc}"
    except Exception as exc:  # a dropped SSH session: this side failed, the others stand
        side.error = f"{side.host} ({side.side}): {type(exc).__name__}: {exc}"
    _parse(side)


def _spec(
    intent: FabricIntent,
    policy: PerftestPolicy,
    ends: tuple[RdmaEnd, RdmaEnd],
    index: int,
    bidirectional: bool,
) -> dict[str, Any]:
    """The worker's spec for the side ``ends[0]`` of the pair, whose peer is ``ends[1]``."""
    end, peer = ends
    command = command_from_policy(
        policy,
        device=end.rdma_device,
        gid_index=0,  # the worker looks the real one up on its host (COMMAND_FIELDS omit it)
        tcp_port=tcp_port_for(policy, index),
        ib_port=end.ib_port,
        tclass=tclass_for(intent.profile.roce.dscp, intent.profile.ecn.enabled),
        bidirectional=bidirectional,
        line_rate_bps=min(end.port.speed, peer.port.speed),
        time_dilation=intent.emulation.time_dilation,
    )
    spec = {name: getattr(command, name) for name in COMMAND_FIELDS}
    return {**spec, "netdev": end.port.name, "ipv4": end.ip}


Job = tuple[RdmaEnd, dict[str, Any], SideResult]  # where a side runs, its spec, its result
Side = TypeVar("Side")


def run_round(
    intent: FabricIntent,
    policy: PerftestPolicy,
    pairs: Sequence[tuple[RdmaEnd, RdmaEnd]],
    number: int,
    bidirectional: bool,
) -> list[PairResult]:
    """One round. Every side's worker starts at once (an SSH login and an interpreter start
    each: side by side, not one after the other); clients then wait for GO. Once every server
    listens and every client is ready, one GO starts the clients together."""
    results = [
        PairResult(c.host, s.host, number, SideResult(c.host, "client"),
                   SideResult(s.host, "server"))
        for c, s in pairs
    ]  # fmt: skip
    jobs: list[Job] = []
    for index, ((client, server), result) in enumerate(zip(pairs, results, strict=True)):
        spec = _spec(intent, policy, (server, client), index, bidirectional)
        jobs.append((server, {**spec, "side": "server"}, result.server_side))
        spec = _spec(intent, policy, (client, server), index, bidirectional)
        client_spec = {**spec, "side": "client", "server_address": server.ip, "wait_for_go": True}
        jobs.append((client, client_spec, result.client_side))
    duration = int(jobs[0][1]["duration_s"])

    handles, problems = _start_sides(jobs)
    if problems:
        for handle, _ in handles:
            handle.kill()
        for result in results:
            result.client_side.error = f"did not start: {'; '.join(problems)}"
        return results
    for handle, side in handles:  # together: an incast's senders start as a collective's do
        if side.side == "client":
            handle.go()
    timeout = duration + RESULT_GRACE_S
    collected = run_each(
        _by_position(handles), lambda item: _result(*item, timeout), parallelism=None
    )
    results_or_raise(collected)
    return results


def _by_position(items: Sequence[Side]) -> dict[str, Side]:
    """A round's sides keyed by position, not host: one host can be several sides of a
    round (an incast's receiver runs a server per client)."""
    return {str(index): item for index, item in enumerate(items)}


def _start(job: Job) -> ProbeHandle:
    end, spec, _ = job
    handle = end.runner.start("perftest", spec)
    # a server: listening; a client: its counters read, waiting for GO
    handle.wait_ready(timeout=READY_TIMEOUT_S)
    return handle


def _start_sides(jobs: Sequence[Job]) -> tuple[list[tuple[ProbeHandle, SideResult]], list[str]]:
    """Every side's worker at once (an SSH login and an interpreter start each): the handles
    of those that became ready, and why each other one did not (every one, not the first:
    the caller stops every started side, whatever failed)."""
    handles: list[tuple[ProbeHandle, SideResult]] = []
    problems: list[str] = []
    started = run_each(_by_position(jobs), _start, parallelism=None)
    for (_, _, side), outcome in zip(jobs, started.values(), strict=True):
        if not isinstance(outcome, Exception):
            handles.append((outcome, side))
        elif isinstance(outcome, ProbeError):
            problems.append(str(outcome))
        else:
            problems.append(f"{side.host}: {type(outcome).__name__}: {outcome}")
    return handles, problems


# --------------------------------------------------------------------------- the report


@dataclass
class PerftestReport:
    scenario: Scenario
    verdict: Verdict
    rounds: list[list[tuple[str, str]]]
    pairs: list[PairResult]
    causes: list[str]
    notes: list[str]
    duration_s: float
    switches_read: list[str]
    phases: dict[str, float] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.verdict.passed

    def as_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "passed": self.passed,
            "verdict": self.verdict.as_json(),
            "causes": self.causes,
            "notes": self.notes,
            "rounds": [[list(p) for p in r] for r in self.rounds],
            "runs": [
                {
                    "client": p.client,
                    "server": p.server,
                    "round": p.round,
                    "client_side": p.client_side.as_json(),
                    "server_side": p.server_side.as_json(),
                }
                for p in self.pairs
            ],
            "switches_read": self.switches_read,
            "duration_s": round(self.duration_s, 1),
            "phases_s": self.phases,
        }


def _nic_counters(raw: dict[str, Any], device: str, port: int, netdev: str) -> NicCounters:
    hw = {(device, str(port)): {str(k): int(v) for k, v in dict(raw.get("hw") or {}).items()}}
    pause = raw.get("pause")
    reading = (
        None
        if pause is None
        else PortPause(rx_frames=tuple(pause["rx"]), tx_frames=tuple(pause["tx"]))
    )
    return NicCounters(hw=hw, pause={netdev: reading})


def nic_deltas(ends: dict[str, RdmaEnd], pairs: Sequence[PairResult]) -> list[NicDelta]:
    """Per host, its NIC from its first reading to its last one in the run."""
    first: dict[str, dict[str, Any]] = {}
    last: dict[str, dict[str, Any]] = {}
    for pair in sorted(pairs, key=lambda p: p.round):
        for side in (pair.client_side, pair.server_side):
            if "nic_before" in side.raw and "nic_after" in side.raw:
                first.setdefault(side.host, side.raw["nic_before"])
                last[side.host] = side.raw["nic_after"]
    deltas = []
    for host, before in first.items():
        end = ends[host]
        read = [_nic_counters(r, end.rdma_device, end.ib_port, end.port.name)
                for r in (before, last[host])]  # fmt: skip
        deltas.append(
            nic_delta(host, end.rdma_port, read[0], read[1], netdev=end.port.name,
                      access=end.access)
        )  # fmt: skip
    return deltas


class PerftestOptions(TypedDict, total=False):
    """What :func:`run_perftest` runs: the (client, server) pairs (default: every host
    pair, round robin), an incast's receiver and senders, the duration (default: the
    policy's) and whether the switches are read around it (yes)."""

    pairs: Sequence[tuple[str, str]] | None
    to: str | None
    senders: Sequence[str] | None
    duration_s: float | None
    read_switches: bool


def run_perftest(
    intent: FabricIntent, scenario: Scenario, **options: Unpack[PerftestOptions]
) -> PerftestReport:
    """Run ``scenario`` on the fabric's RDMA hosts and judge it (module docstring)."""
    started = time.monotonic()
    policy = intent.validation.perftest
    duration_s = options.get("duration_s")
    if duration_s is not None:
        policy = policy.model_copy(update={"duration_s": duration_s})
    rounds = _plan_rounds(
        intent, scenario, options.get("pairs"), options.get("to"), options.get("senders")
    )
    run = _Perftesting(intent, scenario, policy, _rdma_ends(intent, scenario, rounds))
    before = run.read_before(options.get("read_switches", True))
    results = run.rounds(rounds)
    after = run.read_after()
    switch_deltas, symptoms, notes = run.compare(before, after)
    verdict, nics = run.judge(rounds, results, switch_deltas)
    causes = name_causes(intent, verdict, results, nics, symptoms)
    return PerftestReport(
        scenario, verdict, rounds, results, causes, notes + run.start_skew(results),
        time.monotonic() - started, sorted(d.device for d in switch_deltas),
        {k: round(v, 1) for k, v in run.phases.durations.items()},
    )  # fmt: skip


def _plan_rounds(
    intent: FabricIntent,
    scenario: Scenario,
    pairs: Sequence[tuple[str, str]] | None,
    to: str | None,
    senders: Sequence[str] | None,
) -> list[list[tuple[str, str]]]:
    """The scenario's (client, server) pairs, in rounds that run one after the other."""
    names = [d.name for d in rdma_hosts(intent)]
    if scenario != "incast":
        return in_rounds(list(pairs)) if pairs else round_robin(names)
    receiver = to or (names[-1] if names else None)
    sources = list(senders or [n for n in names if n != receiver])
    if receiver is None or not sources or receiver in sources:
        raise PerftestError(
            "incast: Expected: one receiver and at least one other sender among the RDMA "
            f"hosts Actual: to {receiver}, from {', '.join(sources) or 'none'}"
        )
    return [[(s, receiver) for s in sources]]


def _rdma_ends(
    intent: FabricIntent, scenario: Scenario, rounds: Sequence[Sequence[tuple[str, str]]]
) -> dict[str, RdmaEnd]:
    """The RDMA end of every host the rounds name, once they name two or more known hosts
    and no pair names one host twice."""
    wanted = {h for r in rounds for p in r for h in p}
    _check_hosts(intent, scenario, wanted)
    ends = {name: rdma_end(intent, name) for name in sorted(wanted)}
    for client, server in (pair for round_ in rounds for pair in round_):
        if client == server:
            raise PerftestError(f"pair {client}:{server}: Expected: two hosts")
    return ends


def _check_hosts(intent: FabricIntent, scenario: Scenario, wanted: set[str]) -> None:
    if len(wanted) < 2:
        raise PerftestError(
            f"perftest {scenario}: Expected: two or more hosts with an rdma_device "
            f"Actual: {', '.join(sorted(wanted)) or 'none'}"
        )
    unknown = sorted(n for n in wanted if (d := intent.device(n)) is None or d.role != "host")
    if unknown:
        hosts = ", ".join(d.name for d in rdma_hosts(intent)) or "none"
        raise PerftestError(
            f"no host named {', '.join(map(repr, unknown))} in fabric {intent.name} "
            f"(hosts with an rdma_device: {hosts})"
        )


class _Perftesting:
    """One perftest run: the hosts' RDMA ends, the switches read around it, and where its
    time went."""

    def __init__(
        self,
        intent: FabricIntent,
        scenario: Scenario,
        policy: PerftestPolicy,
        ends: dict[str, RdmaEnd],
    ) -> None:
        self.intent = intent
        self.scenario = scenario
        self.policy = policy
        self.ends = ends
        self.switches = [d for d in intent.devices if d.role != "host"]
        self.pusher: Pusher | None = None
        self.phases = Phases()

    def read_before(self, wanted: bool) -> dict[str, DeviceData]:
        """The switches' counters and link health before the run (``wanted``, and the
        fabric has switches): the run then reads them again after it."""
        if not wanted or not self.switches:
            return {}
        with self.phases("read switches before"):
            self.pusher = Pusher.for_intent(self.intent)
            return read_fabric_switches(self.pusher, self.switches, len(self.switches))

    def read_after(self) -> dict[str, DeviceData]:
        if self.pusher is None:
            return {}
        with self.phases("read switches after"):
            return read_fabric_switches(self.pusher, self.switches, len(self.switches))

    def rounds(self, rounds: Sequence[Sequence[tuple[str, str]]]) -> list[PairResult]:
        results: list[PairResult] = []
        bidirectional = self.scenario == "bidirectional"
        for number, round_ in enumerate(rounds, 1):
            with self.phases(f"round {number}"):
                ends_of_round = [(self.ends[c], self.ends[s]) for c, s in round_]
                results += run_round(self.intent, self.policy, ends_of_round, number, bidirectional)
        return results

    def compare(
        self, before: dict[str, DeviceData], after: dict[str, DeviceData]
    ) -> tuple[list[SwitchDelta], list[PortSymptoms], list[str]]:
        """Per switch read twice: its counters' deltas and what moved on its ports; a note
        for each switch whose counters could not be read."""
        notes: list[str] = []
        switch_deltas = []
        symptoms: list[PortSymptoms] = []
        profile = self.intent.profile
        for device in self.switches:
            first, last = before.get(device.name), after.get(device.name)
            if first is None or last is None:
                continue
            if first.counters is None or last.counters is None:
                notes.append(f"{device.name} not read: {last.error or first.error}")
                continue
            switch_deltas.append(SwitchDelta(first.counters, last.counters))
            symptoms += switch_symptoms(first, last, profile)
        return switch_deltas, symptoms, notes

    def start_skew(self, results: Sequence[PairResult]) -> list[str]:
        """A note when an incast's senders did not start together."""
        starts = [
            p.client_side.raw["started_at"] for p in results if "started_at" in p.client_side.raw
        ]
        if self.scenario == "incast" and len(starts) > 1 and max(starts) - min(starts) > 0.5:
            return [f"the senders started {max(starts) - min(starts):.1f} s apart"]
        return []

    def link_run(self, pair: PairResult) -> LinkRun:
        client, server = self.ends[pair.client], self.ends[pair.server]
        return LinkRun(
            client=pair.client,
            server=pair.server,
            line_rate_bps=min(client.port.speed, server.port.speed),
            client_run=pair.client_side.run,
            server_run=pair.server_side.run,
            error=pair.client_side.error if pair.client_side.run is None else None,
            client_port=client.rdma_port,
            server_port=server.rdma_port,
        )

    def judge(
        self,
        rounds: Sequence[Sequence[tuple[str, str]]],
        results: Sequence[PairResult],
        switch_deltas: Sequence[SwitchDelta],
    ) -> tuple[Verdict, list[NicDelta]]:
        """The verdict on the runs, the NICs and the switches; the NICs' deltas it used."""
        nics = nic_deltas(self.ends, results)
        incast = self.scenario == "incast"
        inputs = AcceptanceInput(
            scenario=self.scenario,
            links=tuple(self.link_run(p) for p in results),
            lossless_priorities=tuple(self.intent.profile.pfc.priorities),
            roce_priority=self.intent.profile.roce.priority,
            policy=self.policy,
            nics=tuple(nics),
            switches=tuple(switch_deltas),
            receiver_line_rate_bps=self.ends[rounds[0][0][1]].port.speed if incast else None,
        )
        return evaluate(inputs), nics


# --------------------------------------------------------------------------- causes


def path_ports(topology: Topology, a: str, b: str) -> set[tuple[str, str]]:
    """The switch ports on any shortest path between hosts ``a`` and ``b`` (both access
    ports, and both ends of every switch-to-switch link such a path can take: ECMP spreads
    the pair's QPs over all of them)."""
    access: dict[str, tuple[str, str]] = {}
    edges: dict[str, list[tuple[str, str, str]]] = {}  # switch -> (port, peer, peer port)
    for link in topology.links.values():
        if link.tx_host:
            access.setdefault(link.tx[0], link.rx)
        elif not link.rx_host:
            edges.setdefault(link.tx[0], []).append((link.tx[1], *link.rx))
    if a not in access or b not in access:
        return set()
    start, goal = access[a][0], access[b][0]
    ports = {access[a], access[b]}
    dist_a, dist_b = _distances(edges, start), _distances(edges, goal)
    if goal not in dist_a:
        return ports
    shortest = dist_a[goal]
    for switch, out in edges.items():
        for own_port, peer, peer_port in out:
            if dist_a.get(switch, -9) + 1 + dist_b.get(peer, -9) == shortest:
                ports |= {(switch, own_port), (peer, peer_port)}
    return ports


def _distances(edges: dict[str, list[tuple[str, str, str]]], start: str) -> dict[str, int]:
    distance = {start: 0}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for _, peer, _ in edges.get(node, []):
            if peer not in distance:
                distance[peer] = distance[node] + 1
                queue.append(peer)
    return distance


def _loss_signs(nics: Iterable[NicDelta], host: str) -> list[str]:
    """The NIC counters of ``host`` that say packets were lost. A retransmission alone
    (rxe's completer_retry_err) is not one: it rises on a clean run too, when perftest tears
    its QPs down; it is shown next to real signs."""
    signs = []
    for nic in nics:
        if nic.host != host:
            continue
        found = [
            f"{nic.host} {nic.rdma_port} {name} +{nic.counters[name]}"
            for name in LOSS_COUNTERS
            if nic.counters.get(name)
        ]
        if found and nic.counters.get("completer_retry_err"):
            found.append(
                f"{nic.host} {nic.rdma_port} retransmitted "
                f"(completer_retry_err +{nic.counters['completer_retry_err']})"
            )
        signs += found
    return signs


def _port_evidence(topology: Topology, s: PortSymptoms) -> list[str]:
    where = f"{s.device}:{s.port}"
    link = topology.into(s.device, s.port)
    arriving = f" (frames arriving over {link.name})" if link is not None else ""
    found = []
    if s.up is False:
        found.append(f"{where} is down")
    if s.fcs_errors:
        found.append(f"{where} received {s.fcs_errors} frames with FCS errors{arriving}")
    if s.in_errors and s.in_errors != s.fcs_errors:
        found.append(f"{where} counted {s.in_errors} input errors{arriving}")
    if s.lossless_drops:
        detail = f", {s.headroom_drops} beyond the PFC headroom" if s.headroom_drops else ""
        found.append(f"{where} dropped {s.lossless_drops} lossless frames{detail}")
    if s.lossy_drops and s.lossy_tx == 0 and s.lossless_tx == 0:
        found.append(f"{where} dropped {s.lossy_drops} frames in a lossy queue")
    return found


def name_causes(
    intent: FabricIntent,
    verdict: Verdict,
    pairs: Sequence[PairResult],
    nics: Sequence[NicDelta],
    symptoms: Sequence[PortSymptoms],
) -> list[str]:
    """For every pair that failed or whose NICs saw loss: what the counters say happened on
    its paths, most specific first. Empty when every link passed without a sign of loss."""
    topology = Topology.from_intent(intent)
    by_port = {(s.device, s.port): s for s in symptoms}
    failed = {(row.client, row.server) for row in verdict.links if row.status == "fail"}
    causes = []
    for pair in pairs:
        key = (pair.client, pair.server)
        signs = _loss_signs(nics, pair.client) + _loss_signs(nics, pair.server)
        if key not in failed and not signs:
            continue
        on_path = [by_port[p] for p in sorted(path_ports(topology, *key)) if p in by_port]
        evidence = [e for s in on_path for e in _port_evidence(topology, s)]
        paused = sum(s.pfc_tx for s in on_path)
        causes.append(f"{pair.client}→{pair.server}: " + _cause(pair, evidence, signs, paused))
    return causes


def _cause(pair: PairResult, evidence: list[str], signs: list[str], paused: int) -> str:
    """What happened to one pair, from the most specific sign: a switch port's counters on
    its paths, loss the NICs saw and no switch did, pause, or the hosts themselves."""
    if evidence:
        seen = f" — the NICs saw it: {', '.join(signs)}" if signs else ""
        return "; ".join(evidence) + seen
    if signs:
        return (
            f"packets were lost on the way ({', '.join(signs)}) but no switch port on the "
            "pair's paths counted an error or a drop: a link or optic that drops silently; "
            "`roce-agent locate` ranks the links"
        )
    if paused:
        return (
            f"no loss; the switches on its paths sent {paused} PFC pause frames: the pair was "
            "held back by congestion downstream"
        )
    if pair.client_side.error or pair.server_side.error:
        return f"perftest did not measure: {pair.client_side.error or pair.server_side.error}"
    return (
        "no loss, no drop and no pause on its paths: the hosts themselves (CPU, PCIe, NIC "
        "firmware or settings) hold the rate"
    )
