"""The pick judged where it was not chosen (issue #43): a change tune recommends is run
again, beside today's setting, on seeds the search never ran and, for a collective, on
placements of the same job on other hosts, for a scenario (the queue objective) at sender
counts it did not run, and the worst is reported.

A search picks among candidates on the seeds and the placement it ran; a pick that only won
the hash lottery of that placement (which flows collide on which spine) or of those seeds
would not hold on the user's next job.  So the pick and the current setting run on:

* :data:`HELD_OUT_SEEDS` seeds after the searched ones, at the searched placement;
* :data:`HELD_OUT_PLACEMENTS` placements of the job's shape drawn from the fabric (seeded, so
  a rerun draws the same): as many hosts as the job, each with the NICs of the job's rails at
  the job's speed, in a drawn ring order; never the searched placement itself (jobs side by
  side drawn together, each from the hosts the jobs before it left),

each at the heaviest load point (the stated job), as full runs.  A scenario (``--objective
queue``) has no job to move: its held-out conditions are the fresh seeds at the stated N
senders and :data:`HELD_OUT_PLACEMENTS` sender counts no load point ran, nearest N first
(N + 1 and N - 1 where the hosts allow; :func:`held_out_counts`).  The pick *holds* when, in
every one of them, it meets each hard constraint that today's setting meets there and its
objective (busbw; jobs side by side: the slowest job's share of its bound) is not more than
:data:`~agent.twin.tune.objectives.TIE_BAND` below today's.  When it does
not hold and today's setting met every constraint in the search, the decision becomes "no
change" with the condition that refuted the pick (:func:`agent.twin.tune.decision.held_out`).
The records (:class:`~agent.twin.tune.results.HeldOut` and its runs) are in
:mod:`agent.twin.tune.results`, with the speed's other results.
"""

from __future__ import annotations

import random

from agent.twin.network import TwinNetwork
from agent.twin.placement import nics_by_host
from agent.twin.tune.results import Condition

HELD_OUT_SEEDS = 2
HELD_OUT_PLACEMENTS = 2
_DRAWS_PER_PLACEMENT = 20  # tries at a placement not drawn yet before giving up
_PLACEMENT_SEED = "tune held-out placements"


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


def held_out_counts(senders: int, searched: tuple[int, ...], most: int) -> list[int]:
    """Up to :data:`HELD_OUT_PLACEMENTS` sender counts from 2 to ``most`` that are not among
    the ``searched`` load points: N + 1, N - 1, then fewer, nearest N first."""
    nearest = [senders + 1, *range(senders - 1, 1, -1)]
    return [n for n in nearest if 2 <= n <= most and n not in searched][:HELD_OUT_PLACEMENTS]


def scenario_conditions(
    senders: int, searched: tuple[int, ...], most: int, seeds: tuple[int, ...]
) -> tuple[list[Condition], str]:
    """The seeds after ``seeds`` at N senders, then the held-out sender counts at the first
    of them; and why fewer counts ran than :data:`HELD_OUT_PLACEMENTS` ("" if none were short)."""
    fresh = [max(seeds) + k for k in range(1, HELD_OUT_SEEDS + 1)]
    conditions = [Condition(f"seed {s}", s) for s in fresh]
    counts = held_out_counts(senders, searched, most)
    conditions += [Condition(f"{n} senders, seed {fresh[0]}", fresh[0], senders=n) for n in counts]
    short = ""
    if len(counts) < HELD_OUT_PLACEMENTS:
        short = (
            f"{len(counts)} of {HELD_OUT_PLACEMENTS} sender counts: every other count from 2 to "
            f"{most} was a load point"
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
