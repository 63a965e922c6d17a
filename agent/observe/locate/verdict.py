"""What locate concludes: the suspects (a link, port, switch, host NIC or host) with their
evidence and rank, the verdict that lists them, and the records of tied groups -- what the
members of one share (:class:`Tie`) and what the probes that may split it found
(:class:`FollowUpResult`). Records only; the ranking is :mod:`agent.observe.locate.rank`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from agent.observe.locate.evidence import ALL_SYMPTOMS
from agent.observe.locate.stats import Decision

SuspectKind = Literal["link", "port", "switch", "host-nic", "host"]
DECISION_WORDS = {"h0": "clean", "h1": "lossy", None: "undecided"}


@dataclass
class Suspect:
    """One element locate suspects: what it is, how sure, why, and what it explains."""

    kind: SuspectKind
    element: str
    confidence: float
    evidence: list[str]
    explains: set[str] = field(default_factory=set)  # directed links whose symptoms it explains
    paths: int = 0  # bad paths it explains
    # A switch port sending RoCE from a lossy queue: the culprit is the ingress of that switch
    # the traffic came in by, found from the paths (rank's _resolve_ingress).
    ingress_of: tuple[str, str] | None = None
    # "Does not honour pause": the cable's two directions -- the pause goes one way, the
    # frames in flight come the other (rank's _slow_links).
    pause_over: frozenset[str] = frozenset()
    # The path symptoms it accounts for (a drop counter explains loss, not latency).
    symptoms: frozenset[str] = field(default_factory=lambda: ALL_SYMPTOMS)
    found_by: str | None = None  # the path symptom tomography found it by (None: a counter)
    rank: int = 0  # 1 is first; the members of a tied group share one (set by the ranking)
    # Links the probes could not tell this one from (a tied group), and the probes that
    # would split them on a real fabric.
    tied_with: list[str] = field(default_factory=list)
    split_by: list[str] = field(default_factory=list)
    tie: Tie | None = None  # what the tied group's members share (kept when it is split)

    def as_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "kind": self.kind,
            "element": self.element,
            "confidence": round(self.confidence, 2),
            "evidence": self.evidence,
            "paths_explained": self.paths,
            "tied_with": self.tied_with,
            "split_by": self.split_by,
        }


@dataclass
class Verdict:
    """The suspects ranked, the paths probed and the bad ones no suspect explains."""

    suspects: list[Suspect]
    paths: int
    bad_paths: int
    unexplained: list[str]  # bad paths no suspect accounts for
    notes: list[str] = field(default_factory=list)
    # The targeted probes run to split tied groups (agent.observe.locate.followup).
    follow_ups: list[FollowUpResult] = field(default_factory=list)

    @property
    def fault_found(self) -> bool:
        return bool(self.suspects)

    @property
    def first(self) -> Suspect | None:
        """The suspect ranked first on its own; None when there is none or rank 1 is a tied
        group (a tie is never first: naming one of its members would be a coin flip)."""
        if not self.suspects or self.suspects[0].tied_with:
            return None
        return self.suspects[0]

    @property
    def tied(self) -> bool:
        """Whether some suspects remain a tied group the probes could not split."""
        return any(s.tied_with for s in self.suspects)

    def as_dict(self) -> dict[str, Any]:
        ranked = [
            {**s.as_dict(), "rank": s.rank or i} for i, s in enumerate(self.suspects, start=1)
        ]
        return {
            "fault_found": self.fault_found,
            "summary": summary(self),
            "suspects": ranked,
            "tied": self.tied,
            "follow_ups": [r.as_dict() for r in self.follow_ups],
            "paths": self.paths,
            "bad_paths": self.bad_paths,
            "unexplained_paths": self.unexplained,
            "notes": self.notes,
        }


def summary(verdict: Verdict) -> str:
    if not verdict.suspects:
        return (
            f"no fault found ({verdict.paths} paths probed, none bad, no counter or setting "
            "pointing at one)"
        )
    first = verdict.first
    if first is None:
        top = verdict.suspects[0]
        group = [top.element, *top.tied_with]
        return (
            f"tied: {top.kind} {' or '.join(sorted(group))} (confidence {top.confidence:.2f}): "
            "the probes could not tell them apart"
        )
    return f"{first.kind} {first.element} (confidence {first.confidence:.2f})"


@dataclass(frozen=True)
class FollowUpResult:
    """Probes of one tied group that cross the same members of it (``crosses``), pooled:
    how many were sent (answered, for corruption), how many of them lost (corrupted), and
    the sequential test's decision on that rate: "h0" clean, "h1" lossy, None undecided."""

    group: tuple[str, ...]
    crosses: frozenset[str]
    probes: tuple[str, ...]  # which probes: "h1→h3 (sport 49153) TTL 2, expiring at spine2"
    sent: int
    lost: int
    decision: Decision | None
    symptom: str = "loss"
    note: str | None = None  # why the probing stopped short (a host that could not probe)

    def describe(self) -> str:
        crossing = ", ".join(sorted(self.crosses)) or "none of them"
        verb = "corrupted" if self.symptom == "icrc" else "lost"
        if not self.sent and self.decision == "h0":
            return f"crossing {crossing}: {self.probes[0]} (clean)"
        rate = f" ({self.lost / self.sent:.1%})" if self.sent else ""
        return (
            f"crossing {crossing}: {self.lost} of {self.sent} {verb}{rate}, "
            f"{DECISION_WORDS[self.decision]}"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "group": list(self.group),
            "crosses": sorted(self.crosses),
            "symptom": self.symptom,
            "probes": list(self.probes),
            "sent": self.sent,
            "lost": self.lost,
            "decision": DECISION_WORDS[self.decision],
            **({"note": self.note} if self.note else {}),
        }


@dataclass(frozen=True)
class Tie:
    """What the members of a tied group share: all of them (``group``, sorted), the symptom,
    the test's hypotheses -- H1: at least ``p1``, the group's own rate on its paths (the
    lower end of its interval, at least ``min_loss``); H0: at most ``p0`` -- and the hop
    evidence so far (the run's hop probes, then any follow-ups)."""

    group: tuple[str, ...]
    symptom: str
    p0: float
    p1: float
    confidence: float
    base: float  # the group's purity x coverage: confidence before the 0.9/0.6 factor
    evidence: tuple[FollowUpResult, ...] = ()
