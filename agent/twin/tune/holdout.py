"""The pick judged where it was not chosen (issue #43): a change tune recommends for a
collective is run again, beside today's setting, on seeds the search never ran and on
placements of the same job on other hosts, and the worst is reported.

A search picks among candidates on the seeds and the placement it ran; a pick that only won
the hash lottery of that placement (which flows collide on which spine) or of those seeds
would not hold on the user's next job.  So the pick and the current setting run on:

* :data:`HELD_OUT_SEEDS` seeds after the searched ones, at the searched placement;
* :data:`HELD_OUT_PLACEMENTS` placements of the job's shape drawn from the fabric (seeded, so
  a rerun draws the same): as many hosts as the job, each with the NICs of the job's rails at
  the job's speed, in a drawn ring order; never the searched placement itself (jobs side by
  side drawn together, each from the hosts the jobs before it left),

each at the heaviest load point (the stated job), as full runs.  The pick *holds* when, in
every one of them, it meets each hard constraint that today's setting meets there and its
objective (busbw; jobs side by side: the slowest job's share of its bound) is not more than
:data:`~agent.twin.tune.judge.TIE_BAND` below today's.  When it does
not hold and today's setting met every constraint in the search, the decision becomes "no
change" with the condition that refuted the pick (:func:`agent.twin.tune.decision.held_out`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from agent.twin.network import TwinNetwork
from agent.twin.placement import nics_by_host
from agent.twin.tune.judge import TIE_BAND
from agent.twin.tune.objectives import ObjectiveSpec
from agent.twin.tune.results import RunMetrics

HELD_OUT_SEEDS = 2
HELD_OUT_PLACEMENTS = 2
_DRAWS_PER_PLACEMENT = 20  # tries at a placement not drawn yet before giving up
_PLACEMENT_SEED = "tune held-out placements"


@dataclass(frozen=True)
class Condition:
    """One held-out condition: a ``seed`` at ``hosts``, each job's placement in the job
    file's order (None: the searched placement)."""

    label: str
    seed: int
    hosts: tuple[tuple[str, ...], ...] | None = None  # each job's NICs; None: as searched


@dataclass(frozen=True)
class HeldOutRun:
    """The pick and today's setting under one condition, with the constraints each misses."""

    condition: Condition
    pick: RunMetrics
    current: RunMetrics
    pick_misses: tuple[str, ...]
    current_misses: tuple[str, ...]
    objective: ObjectiveSpec = field(default_factory=lambda: ObjectiveSpec("collective"))

    def value(self, run: RunMetrics) -> float:
        """The objective's metric of ``run`` (busbw; jobs side by side: the slowest's share)."""
        return float(getattr(run, self.objective.metric))

    def text(self, run: RunMetrics) -> str:
        return self.objective.value_text(self.value(run))

    @property
    def ratio(self) -> float:
        """The pick's metric over today's (1.0 when today's measured nothing)."""
        today = self.value(self.current)
        return self.value(self.pick) / today if today else 1.0

    def refutes(self) -> str:
        """Why this run refutes the pick ("" when it does not)."""
        new = [m for m in self.pick_misses if not self.current_misses]
        if new:
            return (
                f"at {self.condition.label} it misses {new[0]}, where today's setting meets "
                "every constraint"
            )
        if self.ratio < 1 - TIE_BAND:
            return (
                f"at {self.condition.label} its {self.text(self.pick)} is "
                f"{(1 - self.ratio) * 100:.0f} % below today's {self.text(self.current)} "
                f"(more than {TIE_BAND:.0%})"
            )
        return ""


@dataclass
class HeldOut:
    """The held-out runs of a pick; ``short`` says why fewer placements ran than asked."""

    runs: list[HeldOutRun] = field(default_factory=list)
    short: str = ""

    @property
    def refuted(self) -> str:
        """The first condition that refutes the pick ("" when it holds in all)."""
        return next((why for run in self.runs if (why := run.refutes())), "")

    @property
    def worst(self) -> HeldOutRun | None:
        """The run where the pick fared worst against today's setting."""
        return min(self.runs, key=lambda r: (not r.pick_misses, r.ratio), default=None)

    def __str__(self) -> str:
        worst = self.worst
        if worst is None:
            return f"held out: nothing ran ({self.short})" if self.short else "held out: none"
        seeds = sum(r.condition.hosts is None for r in self.runs)
        lowest = min(self.runs, key=lambda r: r.value(r.pick))
        said = [
            f"held out ({seeds} seeds and {len(self.runs) - seeds} placements the search did not "
            f"run): the pick's lowest, {lowest.text(lowest.pick)}, at {lowest.condition.label} "
            f"(today's setting {lowest.text(lowest.current)} there)"
        ]
        if worst is not lowest:
            said.append(
                f"its least gain over today's at {worst.condition.label}: "
                f"{worst.text(worst.pick)} against {worst.text(worst.current)}"
            )
        said.append("the pick did not hold" if self.refuted else "the pick holds in every one")
        if self.short:
            said.append(self.short)
        return "; ".join(said)

    def to_json(self) -> dict[str, Any]:
        return {
            "holds": not self.refuted,
            "refuted": self.refuted or None,
            "note": self.short or None,
            "runs": [
                {
                    "condition": r.condition.label,
                    "seed": r.condition.seed,
                    "hosts": [list(h) for h in r.condition.hosts] if r.condition.hosts else None,
                    "busbw_Bps": r.pick.busbw_Bps,
                    "current_busbw_Bps": r.current.busbw_Bps,
                    "bound_fraction": r.pick.bound_fraction,
                    "current_bound_fraction": r.current.bound_fraction,
                    "misses": list(r.pick_misses),
                    "current_misses": list(r.current_misses),
                }
                for r in self.runs
            ],
        }


Shape = tuple[tuple[str, ...], int]
"""A job as the search placed it: its NICs (host by host, rail order) and NICs per host."""


def held_out_conditions(
    network: TwinNetwork, jobs: list[Shape], seeds: tuple[int, ...]
) -> tuple[list[Condition], str]:
    """The seeds after ``seeds`` at the searched placement, then the drawn placements of the
    ``jobs`` (each job's in :attr:`Condition.hosts`, in order) at the first of them; and why
    fewer placements than :data:`HELD_OUT_PLACEMENTS` ran ("" if none were short)."""
    fresh = [max(seeds) + k for k in range(1, HELD_OUT_SEEDS + 1)]
    conditions = [Condition(f"seed {s}", s) for s in fresh]
    drawn = draw_placements(network, jobs, HELD_OUT_PLACEMENTS)
    for number, placement in enumerate(drawn, start=1):
        shown = "; ".join(
            _hosts_text(hosts, n) for hosts, (_, n) in zip(placement, jobs, strict=True)
        )
        conditions.append(
            Condition(f"placement {number} ({shown}), seed {fresh[0]}", fresh[0], placement)
        )
    short = ""
    if len(drawn) < HELD_OUT_PLACEMENTS:
        shapes = " and ".join(f"{len(nics) // n} hosts x {n} NICs" for nics, n in jobs)
        short = (
            f"{len(drawn)} of {HELD_OUT_PLACEMENTS} placements: the fabric has no other "
            f"hosts for {'jobs' if len(jobs) > 1 else 'a job'} of {shapes}"
        )
    return conditions, short


def draw_placements(
    network: TwinNetwork, jobs: list[Shape], count: int
) -> list[tuple[tuple[str, ...], ...]]:
    """Up to ``count`` placements of the searched jobs' shapes, none the searched one: per
    job as many hosts as it has, drawn from those with a NIC on each of its rails at its speed
    and not drawn for an earlier job, in a drawn order, each host's NICs in the job's rail
    order."""
    eligible = [_eligible(network, nics, n) for nics, n in jobs]
    rng = random.Random(_PLACEMENT_SEED)
    searched = tuple(nics for nics, _ in jobs)
    seen, drawn = {searched}, []
    for _ in range(count * _DRAWS_PER_PLACEMENT):
        placement = _draw(rng, eligible, [len(nics) // n for nics, n in jobs])
        if placement is not None and placement not in seen:
            seen.add(placement)
            drawn.append(placement)
            if len(drawn) == count:
                break
    return drawn


def _eligible(
    network: TwinNetwork, searched: tuple[str, ...], nics_per_host: int
) -> dict[str, tuple[str, ...]]:
    """The hosts with a NIC on each of the job's rails at its speed: host -> those NICs."""
    first = [network.hosts[e] for e in searched[:nics_per_host]]
    rails, speed = [nic.rail for nic in first], first[0].port.speed_bps
    eligible: dict[str, tuple[str, ...]] = {}
    for host, endpoints in nics_by_host(network).items():
        at = {
            network.hosts[e].rail: e for e in endpoints if network.hosts[e].port.speed_bps == speed
        }
        if all(rail in at for rail in rails):
            eligible[host] = tuple(at[rail] for rail in rails)
    return eligible


def _draw(
    rng: random.Random, eligible: list[dict[str, tuple[str, ...]]], hosts: list[int]
) -> tuple[tuple[str, ...], ...] | None:
    """One joint draw: each job's hosts from what the earlier jobs left (None: too few)."""
    taken: set[str] = set()
    placement = []
    for mine, count in zip(eligible, hosts, strict=True):
        names = sorted(set(mine) - taken)
        if len(names) < count:
            return None
        chosen = rng.sample(names, count)
        taken.update(chosen)
        placement.append(tuple(e for h in chosen for e in mine[h]))
    return tuple(placement)


def _hosts_text(endpoints: tuple[str, ...], nics_per_host: int) -> str:
    """The placement's hosts, the first few of a long one."""
    hosts = [e.partition(":")[0] for e in endpoints[::nics_per_host]]
    shown = ", ".join(hosts[:6])
    return shown + (f" … {len(hosts)} hosts" if len(hosts) > 6 else "")
