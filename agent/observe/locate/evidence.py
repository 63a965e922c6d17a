"""What the probe paths show: each probe flow's result on its known path (and its hop
probes), the ways a path can be bad (loss, ICRC errors, latency) with the floors that
decide it, and how a directed link looks through the paths that cross it -- the terms in
which tomography and the tie-splitting weigh links."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agent.observe.locate.topology import DirectedLink, Topology

# A path is bad for loss when it lost at least this share of what it sent, and at least
# LOSS_MIN_PACKETS (one lost packet in a short run is not a pattern).
LOSS_FLOOR = 0.01
LOSS_MIN_PACKETS = 2
# Latency: a path is slow when its median one-way latency exceeds the fastest path of the
# same hop count by this much (absolute, and relative to that baseline). The floor stays
# well above a lab sender's Python scheduling jitter on a loaded machine.
LATENCY_FLOOR_MS = 5.0
LATENCY_RELATIVE = 0.5
# The sequential test that splits links on the same paths (agent.observe.locate.ties): the
# run's confidence, and the smallest loss rate it must find (agent.observe.locate.gather's
# own).
DEFAULT_CONFIDENCE = 0.95
DEFAULT_MIN_LOSS = 0.005

ALL_SYMPTOMS = frozenset({"loss", "icrc", "latency"})
LOSS = frozenset({"loss"})


@dataclass(frozen=True)
class HopProbe:
    """TTL-limited probes of one path that expire at one switch on the way (mtr's method):
    sent, answered with ICMP time exceeded, and answered with a quote of the probe that
    differs from what was sent (corrupted before that switch)."""

    sent: int
    answered: int
    corrupted: int = 0
    rtt_min_ms: float | None = None


@dataclass(frozen=True)
class PathResult:
    """One probe flow pinned to one path (its UDP source port) and what it saw."""

    src: str
    dst: str
    sport: int
    links: tuple[str, ...]  # directed links, the source host's first (agent.observe.probes.paths)
    sent: int
    received: int
    icrc_errors: int = 0
    latency_ms: float | None = None  # one-way, received in user space
    # hops[i]: probes that expire at the switch ``links[i]`` leads to (one per switch hop).
    hops: tuple[HopProbe | None, ...] = ()
    load: bool = False  # a flow of `locate --load`'s incast, not a probe
    # One-way from the kernel's receive stamp (agent.observe.probes.timestamps), None without;
    # and how long the receiving host held the frames before user space read them (p90).
    kernel_latency_ms: float | None = None
    host_delay_ms: float | None = None
    timestamp_source: str = "user"
    # The adaptive run's sequential test on this path (agent.observe.locate.stats.Sprt):
    # True lossy, False clean, None undecided or a fixed run (then LOSS_FLOOR decides).
    lossy: bool | None = None

    @property
    def lost(self) -> int:
        return max(0, self.sent - self.received)

    @property
    def vanished(self) -> int:
        """Lost without a trace: not the ones the receiving NIC dropped for a bad ICRC."""
        return max(0, self.lost - self.icrc_errors)

    @property
    def label(self) -> str:
        return f"{self.src}→{self.dst} (sport {self.sport}{', load' if self.load else ''})"


@dataclass(frozen=True)
class Symptom:
    """One way a path can be bad, and how much of it each path shows."""

    name: str
    amount: Callable[[PathResult], float]  # lost packets, ICRC errors, excess latency
    total: Callable[[PathResult], float]  # the denominator: sent packets, or 1 per path
    bad: Callable[[PathResult], bool]
    describe: str


def symptoms(paths: Sequence[PathResult]) -> list[Symptom]:
    """ICRC errors, loss and latency, the latency measured against the fastest of
    ``paths`` with the same hop count."""

    def lossy(p: PathResult) -> bool:
        if p.lossy is not None:
            # The test's decision holds at the run's confidence, down to --min-loss (below
            # the fixed floor: 0.5 % loss is lossy once enough probes show it).
            return p.lossy and p.vanished > 0
        return p.vanished >= LOSS_MIN_PACKETS and p.vanished >= LOSS_FLOOR * p.sent

    baseline: dict[int, float] = {}
    for p in paths:
        if (measured := latency(p)) is not None:
            hops = len(p.links)
            baseline[hops] = min(baseline.get(hops, measured), measured)

    def excess(p: PathResult) -> float:
        measured = latency(p)
        if measured is None:
            return 0.0
        return max(0.0, measured - baseline[len(p.links)])

    def slow(p: PathResult) -> bool:
        if latency(p) is None:
            return False
        base = baseline[len(p.links)]
        return excess(p) > max(LATENCY_FLOOR_MS, LATENCY_RELATIVE * base)

    return [
        Symptom(
            "icrc",
            lambda p: p.icrc_errors,
            lambda p: p.sent,
            lambda p: p.icrc_errors > 0,
            "arrived with a bad ICRC",
        ),
        Symptom("loss", lambda p: p.vanished, lambda p: p.sent, lossy, "lost"),
        Symptom("latency", excess, lambda p: 1.0, slow, "were slow"),
    ]


def latency(p: PathResult) -> float | None:
    """The path's one-way latency as close to the NIC as its receiver stamped it: the
    kernel's receive stamp leaves out the time the receiving host took to read the frame."""
    return p.kernel_latency_ms if p.kernel_latency_ms is not None else p.latency_ms


def rate(paths: Sequence[PathResult], symptom: Symptom) -> float:
    total = sum(symptom.total(p) for p in paths)
    return sum(symptom.amount(p) for p in paths) / total if total else 0.0


def format_rate(value: float, symptom: Symptom) -> str:
    return f"{value:.1f}" if symptom.name == "latency" else f"{value:.1%}"


@dataclass(frozen=True)
class SplitTest:
    """The sequential test that splits links on the same paths: the run's confidence, and
    the smallest loss rate it must find."""

    confidence: float = DEFAULT_CONFIDENCE
    min_loss: float = DEFAULT_MIN_LOSS


@dataclass(frozen=True)
class Weighing:
    """What one symptom's tomography weighs links on: the fabric, the paths no counter
    explained, and the test that splits links those paths cannot tell apart."""

    topology: Topology
    paths: Sequence[PathResult]
    symptom: Symptom
    split: SplitTest


@dataclass(frozen=True)
class Candidate:
    """A directed link as tomography weighs it: the symptom's rate on the paths through it
    and elsewhere, and the remaining bad paths it would explain."""

    name: str
    rate_in: float
    rate_out: float
    covered: list[PathResult]

    @classmethod
    def of(
        cls,
        name: str,
        paths: Sequence[PathResult],
        remaining: dict[str, PathResult],
        symptom: Symptom,
    ) -> Candidate:
        through = [p for p in paths if name in p.links]
        elsewhere = [p for p in paths if name not in p.links]
        covered = [p for p in remaining.values() if name in p.links]
        return cls(name, rate(through, symptom), rate(elsewhere, symptom), covered)

    @property
    def score(self) -> float:
        return len(self.covered) * (self.rate_in - self.rate_out)


def link_evidence(
    link: DirectedLink, paths: Sequence[PathResult], symptom: Symptom, best: Candidate
) -> list[str]:
    """Why ``link`` is suspected: its paths' rate against the rate elsewhere, the bad paths
    it explains, and, for a host's access link, that its NIC lies on the same paths."""
    through = [p for p in paths if link.name in p.links]
    bad_through = sum(1 for p in through if symptom.bad(p))
    unit = "" if symptom.name != "latency" else " ms"
    covered = best.covered
    evidence = [
        f"{bad_through} of {len(through)} paths through {link.name} {symptom.describe} "
        f"({format_rate(best.rate_in, symptom)}{unit}); paths elsewhere "
        f"{format_rate(best.rate_out, symptom)}{unit}",
        "paths: " + ", ".join(p.label for p in covered[:6]) + (" …" if len(covered) > 6 else ""),
    ]
    if link.tx_host or link.rx_host:
        host = link.tx[0] if link.tx_host else link.rx[0]
        evidence.append(
            f"{host}'s NIC lies on the same paths as this link; no switch counter moved, "
            "so the probes cannot tell the cable from the NIC"
        )
    return evidence
