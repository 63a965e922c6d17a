"""The pick judged where it was not chosen (issue #43): a change tune recommends for a
collective is run again, beside today's setting, on seeds the search never ran and on
placements of the same job on other hosts, and the worst is reported.

A search picks among candidates on the seeds and the placement it ran; a pick that only won
the hash lottery of that placement (which flows collide on which spine) or of those seeds
would not hold on the user's next job.  So the pick and the current setting run on:

* :data:`HELD_OUT_SEEDS` seeds after the searched ones, at the searched placement;
* :data:`HELD_OUT_PLACEMENTS` placements of the job's shape drawn from the fabric (seeded, so
  a rerun draws the same): as many hosts as the job, each with the NICs of the job's rails at
  the job's speed, in a drawn ring order; never the searched placement itself,

each at the heaviest load point (the stated job), as full runs.  The pick *holds* when, in
every one of them, it meets each hard constraint that today's setting meets there and its
busbw is not more than :data:`~agent.twin.tune.judge.TIE_BAND` below today's.  When it does
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
from agent.twin.tune.results import RunMetrics
from agent.twin.tune.text import gbs

HELD_OUT_SEEDS = 2
HELD_OUT_PLACEMENTS = 2
_DRAWS_PER_PLACEMENT = 20  # tries at a placement not drawn yet before giving up
_PLACEMENT_SEED = "tune held-out placements"


@dataclass(frozen=True)
class Condition:
    """One held-out condition: a ``seed`` at ``hosts`` (None: the searched placement)."""

    label: str
    seed: int
    hosts: tuple[str, ...] | None = None


@dataclass(frozen=True)
class HeldOutRun:
    """The pick and today's setting under one condition, with the constraints each misses."""

    condition: Condition
    pick: RunMetrics
    current: RunMetrics
    pick_misses: tuple[str, ...]
    current_misses: tuple[str, ...]

    @property
    def ratio(self) -> float:
        """The pick's busbw over today's (1.0 when today's measured nothing)."""
        return self.pick.busbw_Bps / self.current.busbw_Bps if self.current.busbw_Bps else 1.0

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
                f"at {self.condition.label} its busbw {gbs(self.pick.busbw_Bps)} is "
                f"{(1 - self.ratio) * 100:.0f} % below today's {gbs(self.current.busbw_Bps)} "
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
        lowest = min(self.runs, key=lambda r: r.pick.busbw_Bps)
        said = [
            f"held out ({seeds} seeds and {len(self.runs) - seeds} placements the search did not "
            f"run): the pick's lowest busbw {gbs(lowest.pick.busbw_Bps)} at "
            f"{lowest.condition.label} (today's setting {gbs(lowest.current.busbw_Bps)} there)"
        ]
        if worst is not lowest:
            said.append(
                f"its least gain over today's at {worst.condition.label}: "
                f"{gbs(worst.pick.busbw_Bps)} against {gbs(worst.current.busbw_Bps)}"
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
                    "hosts": list(r.condition.hosts) if r.condition.hosts else None,
                    "busbw_Bps": r.pick.busbw_Bps,
                    "current_busbw_Bps": r.current.busbw_Bps,
                    "misses": list(r.pick_misses),
                    "current_misses": list(r.current_misses),
                }
                for r in self.runs
            ],
        }


def held_out_conditions(
    network: TwinNetwork, searched: tuple[str, ...], nics_per_host: int, seeds: tuple[int, ...]
) -> tuple[list[Condition], str]:
    """The seeds after ``seeds`` at the searched placement, then the drawn placements at the
    first of them; and why fewer placements than :data:`HELD_OUT_PLACEMENTS` ("" if none)."""
    fresh = [max(seeds) + k for k in range(1, HELD_OUT_SEEDS + 1)]
    conditions = [Condition(f"seed {s}", s) for s in fresh]
    placements = draw_placements(network, searched, nics_per_host, HELD_OUT_PLACEMENTS)
    for number, hosts in enumerate(placements, start=1):
        shown = _hosts_text(hosts, nics_per_host)
        conditions.append(
            Condition(f"placement {number} ({shown}), seed {fresh[0]}", fresh[0], hosts)
        )
    short = ""
    if len(placements) < HELD_OUT_PLACEMENTS:
        short = (
            f"{len(placements)} of {HELD_OUT_PLACEMENTS} placements: the fabric has no other "
            f"hosts for a job of {len(searched) // nics_per_host} hosts x {nics_per_host} NICs"
        )
    return conditions, short


def draw_placements(
    network: TwinNetwork, searched: tuple[str, ...], nics_per_host: int, count: int
) -> list[tuple[str, ...]]:
    """Up to ``count`` placements of the searched job's shape, none the searched one: as many
    hosts, drawn from those with a NIC on each of the job's rails at its speed, in a drawn
    order, each host's NICs in the job's rail order."""
    first = [network.hosts[e] for e in searched[:nics_per_host]]
    rails, speed = [nic.rail for nic in first], first[0].port.speed_bps
    eligible: dict[str, tuple[str, ...]] = {}
    for host, endpoints in nics_by_host(network).items():
        at = {
            network.hosts[e].rail: e for e in endpoints if network.hosts[e].port.speed_bps == speed
        }
        if all(rail in at for rail in rails):
            eligible[host] = tuple(at[rail] for rail in rails)
    hosts = len(searched) // nics_per_host
    names = sorted(eligible)
    if len(names) < hosts:
        return []
    rng = random.Random(_PLACEMENT_SEED)
    seen, drawn = {searched}, []
    for _ in range(count * _DRAWS_PER_PLACEMENT):
        placement = tuple(e for h in rng.sample(names, hosts) for e in eligible[h])
        if placement not in seen:
            seen.add(placement)
            drawn.append(placement)
            if len(drawn) == count:
                break
    return drawn


def _hosts_text(endpoints: tuple[str, ...], nics_per_host: int) -> str:
    """The placement's hosts, the first few of a long one."""
    hosts = [e.partition(":")[0] for e in endpoints[::nics_per_host]]
    shown = ", ".join(hosts[:6])
    return shown + (f" … {len(hosts)} hosts" if len(hosts) > 6 else "")
