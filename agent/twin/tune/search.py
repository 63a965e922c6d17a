"""``roce-agent tune``'s search: ECN x DCQCN x QPs per connection jointly, per link speed.

For each host-facing link speed of the fabric, candidates (:mod:`agent.twin.tune.space`) are
run in the twin on a workload at that speed (:mod:`agent.twin.tune.runs`) and judged against
hard constraints (:mod:`agent.twin.tune.judge`); the feasible one with the best objective is
decided (:mod:`agent.twin.tune.decision`: a change, no change, or none) and explained
(:mod:`agent.twin.tune.explain`).

Search method (:func:`plan_method`): the full grid when candidates x seeds x load points is at
most :data:`FULL_GRID_MAX_RUNS` runs; otherwise successive halving (Jamieson & Talwalkar,
AISTATS 2016; Li et al., "Hyperband", JMLR 2018): every candidate runs short (a quarter of the
duration, the heaviest load point, the first seed), the best third (:data:`HALVING_ETA`, at least
:data:`HALVING_MIN_SURVIVORS`) run at half the duration at every load point, and the best third
of those run the full duration at every load point and seed -- only those can be recommended
(a collective's rungs are a sixteenth, a quarter and all of its size, the best quarter kept).
The fabric's current setting always runs every rung (it is the reference).  Why halving and not
optuna's TPE: halving is deterministic without a sampler seed, needs no dependency, and every
rung is one batch that the process pool (``--jobs``) or a Dask cluster (``--executor``,
:mod:`agent.twin.tune.runners`) runs in parallel, where TPE is sequential by nature (each
suggestion waits for the previous results) and models a smooth response that a feasibility
cliff (Jain, utilisation) is not.  The number of runs and the method are in the output and the
JSON.

Load points: the scenario (or collective) at three sizes, N, N // 2 + 1 and max(2, N // 4)
senders (ranks for a collective): a setting that serves 8 senders can starve 2 (one flow's rate
increase outruns the other's, Jain 0.5) and the other way round (issue #26: a corner that was
fine at 8 starved six of seven flows at 7).  The middle point is there because two were not
enough: on the 40G star a search at 4 and 2 senders recommended a setting at 98 % utilisation
at both that gave 84-90 % at 3 (the property test, tests/unit/test_tune_search.py, found it).
N <= 2 is one point, N = 3 two.

Edges (:meth:`_Search._widen`): a recommendation on the lowest or highest searched level of an
axis says so, and the axis gets one more level in that direction (min and the DCQCN axes by
the grid's own step, QPs x 2); the new point (the recommendation with that axis moved; with
several axes, also all of them moved at once) runs at full fidelity and the recommendation is
re-chosen -- at most :data:`MAX_WIDENINGS` times.  With nothing feasible the search widens
around the closest candidate.  Axes that cannot widen say why (probability is 1-100 %, max is
capped below the pause threshold, min floors at two frames).

One set per fabric: the intent has one ECN setting per queue for every port and one DCQCN
setting for every NIC, so the override carries the recommendation of the fabric's dominant
speed (most host-facing ports; ties: the faster).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, NamedTuple, Unpack

from agent.intent.model import FabricIntent
from agent.intent.plan import Plan, build_plan
from agent.intent.units import format_speed
from agent.twin.network import TwinError, TwinNetwork, build_network, roce_frame_bytes
from agent.twin.placement import (
    CollectiveSpec,
    place_ranks,
    rails_share_no_link,
    resolve_algorithm,
)
from agent.twin.tune.decision import decide, held_out, indistinguishable, no_load
from agent.twin.tune.explain import explain, user_summary
from agent.twin.tune.fabric import candidate_intent, current_ecn, host_headroom, host_speeds
from agent.twin.tune.holdout import held_out_conditions, scenario_conditions
from agent.twin.tune.judge import evaluate, ranked
from agent.twin.tune.notes import AfterWidening, EdgeNote, PauseMove, StillAtEdge
from agent.twin.tune.objectives import (
    COLLECTIVE_MAX_RANKS,
    MAX_TUNE_RANKS,
    Objectives,
    ObjectiveSpec,
    TunedJob,
)
from agent.twin.tune.options import (
    TuneOptions,
    TuneSettings,
    check_objective,
    check_options,
    check_speeds,
    tunable_speeds,
)
from agent.twin.tune.results import (
    Condition,
    HeldOut,
    HeldOutRun,
    Rung,
    RunMetrics,
    SpeedResult,
    Stage,
    Trial,
    TuneResult,
)
from agent.twin.tune.runs import Job, collective_hosts
from agent.twin.tune.space import (
    ETH_OVERHEAD,
    Candidate,
    Edge,
    End,
    Space,
    build_space,
    ecn_room,
    space_candidates,
)
from agent.twin.tune.text import mib
from agent.twin.workloads import MAX_SENDERS

# Search method: the full grid up to this many runs (about a minute of engine time at 400 G on
# this machine's measured 0.3-0.6 s per 5 ms run); successive halving above it.
FULL_GRID_MAX_RUNS = 160
HALVING_ETA = 3
# The collective's rungs: a sixteenth, a quarter and all of the size, the best quarter kept
# (its short runs already show the ECMP collisions and the rate recovery that decide busbw).
COLLECTIVE_RUNG_FRACTIONS = (1 / 16, 1 / 4, 1.0)
COLLECTIVE_ETA = 4
HALVING_MIN_SURVIVORS = 4
MAX_WIDENINGS = 2


class Fidelity(NamedTuple):
    """How a rung runs its candidates: ``fraction`` of the duration (of the size for a
    collective); the first ``sample_rails`` rails of a job alone (0: every rail); ``merge``:
    its runs replace only the earlier runs at the same load points."""

    fraction: float
    sample_rails: int = 0
    merge: bool = False


def load_points(n: int) -> tuple[int, ...]:
    """The load points a candidate must pass: N, N // 2 + 1 and max(2, N // 4) senders (or
    ranks), most first (module docstring: Load points)."""
    return (n,) if n <= 2 else tuple(sorted({n, n // 2 + 1, max(2, n // 4)}, reverse=True))


def plan_method(candidates: int, seeds: int, points: int, method: str = "auto") -> str:
    """ "grid" when candidates x seeds x load points <= FULL_GRID_MAX_RUNS, else "halving"."""
    if method != "auto":
        return method
    return "grid" if candidates * seeds * points <= FULL_GRID_MAX_RUNS else "halving"


def rung_plan(
    method: str, points: Sequence[int], seeds: Sequence[int], collective: bool = False
) -> list[tuple[float, tuple[tuple[int, int], ...]]]:
    """(fraction of the duration -- of the size for a collective --, (load point, seed)
    pairs) per rung; the last is the full evaluation every recommendable candidate gets."""
    full = tuple((n, s) for n in points for s in seeds)
    if method == "grid":
        return [(1.0, full)]
    first, second, _ = COLLECTIVE_RUNG_FRACTIONS if collective else (0.25, 0.5, 1.0)
    return [
        (first, ((points[0], seeds[0]),)),
        (second, tuple((n, seeds[0]) for n in points)),
        (1.0, full),
    ]


def tune(intent: FabricIntent, **options: Unpack[TuneOptions]) -> TuneResult:
    """Tune every host-facing speed (or ``speeds``); see the module docstring, and
    :class:`~agent.twin.tune.options.TuneOptions` for what may be asked."""
    settings = TuneSettings(**options)
    check_options(settings)
    started = time.perf_counter()
    plan = build_plan(intent)
    present = host_speeds(build_network(intent, plan))
    check_speeds(settings.speeds, present)
    notes: list[str] = []
    job = settings.objective.job
    if job is not None:
        chosen = [job.speed_bps]  # the job's NICs', found when it was placed
    else:
        chosen = sorted(set(settings.speeds), reverse=True) or tunable_speeds(present, notes)
    check_objective(settings.objective, {s: present[s] for s in chosen})
    search = _Search(intent, plan, settings)
    results = [search.speed(speed, present[speed], notes) for speed in chosen]
    dominant = max(present, key=lambda s: (present[s], s))
    if len(present) > 1:
        notes.append(
            f"one ECN/DCQCN setting per fabric (profile): the override carries "
            f"{format_speed(dominant)}'s ({present[dominant]} of "
            f"{sum(present.values())} hosts); the other speeds' rows are advice only"
        )
    if settings.objectives.margin_source:
        notes.append(settings.objectives.margin_source)
    objective = settings.objective
    return TuneResult(
        fabric=intent.name,
        profile=intent.profile.name,
        scenario=_scenario(settings),
        duration_s=settings.duration_s,
        seeds=tuple(settings.seeds),
        objectives=settings.objectives,
        speeds=results,
        dominant_speed_bps=dominant,
        roce_queue=intent.profile.roce.priority,
        wall_s=time.perf_counter() - started,
        notes=notes,
        objective=objective,
        dcqcn=settings.dcqcn,
    )


def _scenario(settings: TuneSettings) -> str:
    """What every candidate ran: the scenario, the collective, or the jobs side by side."""
    objective = settings.objective
    if objective.name == "queue":
        return settings.scenario
    if objective.beside:
        return " + ".join(f"{j.name} ({j.spec.workload})" for j in objective.jobs)
    if objective.job is not None and (objective.job.step or objective.job.spec.algorithm == "tree"):
        return objective.job.what()
    return objective.workload


@dataclass(frozen=True)
class _Search:
    """One tune: the fabric and its plan, and the settings, the same for every speed."""

    intent: FabricIntent
    plan: Plan
    settings: TuneSettings

    def speed(self, speed: int, hosts: int, notes: list[str]) -> SpeedResult:
        """The joint search at one speed: grid or halving, then widening at the edges; the
        collective without a job file or ``--ranks`` is the speed's every GPU NIC."""
        every = self._every_nic_job(speed, notes)
        if every is None:
            return self._with_algorithm(speed, hosts, notes)._speed(speed, hosts, notes)
        objective = replace(self.settings.objective, job=every, algorithm=every.spec.algorithm)
        return replace(self, settings=replace(self.settings, objective=objective))._speed(
            speed, hosts, notes
        )

    def _with_algorithm(self, speed: int, hosts: int, notes: list[str]) -> _Search:
        """The search with ``--algorithm auto`` made NCCL's pick for ``--ranks``' job at the
        stated size (a rung's smaller size runs the same algorithm); itself otherwise."""
        objective = self.settings.objective
        if not self.settings.collective or objective.job is not None:
            return self
        if objective.algorithm != "auto":
            return self
        ranks = min(objective.ranks or COLLECTIVE_MAX_RANKS, hosts)
        network = build_network(self.intent, self.plan)
        job = self._default_job(network, speed, ranks)
        chosen, why = resolve_algorithm(job.spec, place_ranks(network, job.spec))
        notes.append(f"{format_speed(speed)}: {why}")
        settings = replace(self.settings, objective=replace(objective, algorithm=chosen.algorithm))
        return replace(self, settings=settings)

    def _every_nic_job(self, speed: int, notes: list[str]) -> TunedJob | None:
        """The default job at ``speed``: one rank per GPU NIC at that speed, placed as ``twin
        --workload`` places them (rail-aligned rings on multi-NIC hosts); None when a job or
        ``--ranks`` was given.  Hosts with different NIC counts at one speed cannot be one
        rail-aligned job: one NIC per host then, as ``--ranks`` places it (noted)."""
        objective = self.settings.objective
        if not self.settings.collective or objective.job is not None or objective.ranks:
            return None
        qps = self.intent.profile.job.qps_per_connection or 1  # today's, as the search runs it
        spec = CollectiveSpec(objective.workload, 0, objective.size_bytes, qps,  # type: ignore[arg-type]
                              speed_bps=speed, split_data_on_qps=qps > 1,
                              algorithm=objective.algorithm)  # fmt: skip
        network = build_network(self.intent, self.plan)
        try:
            placement = place_ranks(network, spec)
        except TwinError as error:
            notes.append(f"{format_speed(speed)}: not every GPU NIC in one job ({error}); "
                         "one rank per host instead")  # fmt: skip
            return None
        placed = replace(spec, ranks=len(placement.endpoints), hosts=tuple(placement.endpoints))
        placed, why = resolve_algorithm(placed, placement)  # auto: at the stated size, once
        if why:
            notes.append(f"{format_speed(speed)}: {why}")
        return TunedJob("", placed, placement.rails)

    def _speed(self, speed: int, hosts: int, notes: list[str]) -> SpeedResult:
        settings = self.settings
        roce = self.intent.profile.roce.priority
        dilation = self.intent.emulation.time_dilation
        ecn_now, pause, mtu, host_ports = current_ecn(self.plan, roce, speed, dilation)
        if settings.payload_bytes is not None:
            # The grid's frame bounds (min >= 2 frames, max <= pause threshold - 2 frames) use
            # the frame the hosts send, not the MTU's (the lab's probes send 1000-byte payloads
            # under a 30 KB pause threshold).
            mtu = roce_frame_bytes(mtu, settings.payload_bytes) - ETH_OVERHEAD
        senders = self._senders(speed, hosts, notes)
        points = self._load_points(senders)
        room = ecn_room(speed, mtu, pause)
        space = build_space(room, settings.candidate_count, settings.dcqcn, settings.qps)
        # Today's QPs per connection are the profile's job setting (NCCL's default 1 unset):
        # "no change" must keep what the fabric has, not 1.
        qps_now = (self.intent.profile.job.qps_per_connection or 1) if settings.collective else 1
        if settings.objective.job is not None:  # the job as its file says it runs today
            qps_now = settings.objective.job.spec.qps_per_connection
        current = Candidate(0, ecn_now, qps=qps_now)
        seen: set[Any] = {(current.ecn, current.dcqcn, current.qps)}
        cands = [current, *space_candidates(space, space.points(), seen, 1)]
        method = plan_method(len(cands), len(settings.seeds), len(points), settings.method)
        result = SpeedResult(speed, senders, pause, host_ports, room.frame, [])
        result.method, result.load_points = method, points
        trials = self._validated(cands)
        rungs = rung_plan(method, points, settings.seeds, settings.collective)
        flat = self._halve(result, trials, rungs) and indistinguishable(trials, settings.objective)
        if not flat:
            self._widen(result, space, trials, seen)
        result.stages = [Stage("joint" if settings.dcqcn else "ecn", trials)]
        result.decision = decide(trials, settings.objective)
        if flat and result.decision.kind == "no change":
            heavier = self._heavier_jobs(senders, hosts)
            result.decision = no_load(result.decision, trials, settings.objective, heavier)
        if result.decision.changes:
            result.held_out = self._held_out(result, trials, hosts)
            result.decision = held_out(result.decision, trials, result.held_out)
        self._pause_note(result)
        result.summary = user_summary(result, settings.objective)
        result.explanation = explain(
            result, settings.objectives, settings.dcqcn, settings.objective, space.names
        )
        return result

    def _senders(self, speed: int, hosts: int, notes: list[str]) -> int:
        """As many senders (ranks) as asked, or as the hosts at this speed allow (noted); a
        job file's job: its ranks."""
        settings = self.settings
        if settings.objective.job is not None:
            return sum(job.ranks for job in settings.objective.jobs)
        if settings.collective:
            return min(settings.objective.ranks or COLLECTIVE_MAX_RANKS, hosts)
        limit = hosts - 1 if settings.scenario == "incast" else hosts
        senders = min(settings.senders, limit)
        if senders < settings.senders:
            notes.append(
                f"{format_speed(speed)}: {senders} senders (only {hosts} hosts at this speed)"
            )
        return senders

    def _held_out(self, result: SpeedResult, trials: list[Trial], hosts: int) -> HeldOut:
        """The pick and today's setting where the search did not run them (module
        :mod:`~agent.twin.tune.holdout`): fresh seeds, other placements of the job or, for a
        scenario, other sender counts."""
        pick = result.decision.trial
        current = next(t for t in trials if t.candidate.current)
        assert pick is not None  # a change names its pick
        settings = self.settings
        if settings.collective:
            conditions, short, jobs = self._collective_held_out(result, (pick, current))
        else:
            most = hosts - 1 if settings.scenario == "incast" else hosts
            seeds = tuple(settings.seeds)
            conditions, short = scenario_conditions(
                result.load_points[0], result.load_points, min(most, MAX_SENDERS), seeds
            )
            jobs = [
                self._held_out_job(trial, c.senders or result.load_points[0], result.speed_bps,
                                   c.seed, settings.objective)
                for c in conditions
                for trial in (pick, current)
            ]  # fmt: skip
        metrics = list(settings.runner(jobs))
        runs = [
            HeldOutRun(
                c,
                mine,
                today,
                self._misses(mine, pick),
                self._misses(today, current),
                settings.objective,
            )
            for c, mine, today in zip(conditions, metrics[::2], metrics[1::2], strict=True)
        ]
        return HeldOut(runs, short)

    def _collective_held_out(
        self, result: SpeedResult, trials: tuple[Trial, Trial]
    ) -> tuple[list[Condition], str, list[Job]]:
        """Fresh seeds and other placements of the job (jobs side by side drawn together)."""
        settings, speed, ranks = self.settings, result.speed_bps, result.load_points[0]
        network = build_network(self.intent, self.plan)
        job = settings.objective.job or self._default_job(network, speed, ranks)
        every = (job, *settings.objective.beside)
        shapes = [(j.placed, j.nics_per_host) for j in every]
        conditions, short = held_out_conditions(network, shapes, tuple(settings.seeds))
        jobs = []
        for condition in conditions:
            hosts = condition.hosts or tuple(nics for nics, _ in shapes)
            first, *beside = (
                replace(j, spec=replace(j.spec, hosts=h)) for j, h in zip(every, hosts, strict=True)
            )
            objective = replace(settings.objective, job=first, beside=tuple(beside))
            jobs += [self._held_out_job(t, ranks, speed, condition.seed, objective) for t in trials]
        return conditions, short, jobs

    def _held_out_job(
        self, trial: Trial, senders: int, speed: int, seed: int, objective: ObjectiveSpec
    ) -> Job:
        """One held-out run of ``trial`` (today's setting on the fabric as it is)."""
        settings = self.settings
        intent = self.intent if trial.candidate.current else trial.variant or self.intent
        return Job(intent, settings.scenario, senders, speed, settings.duration_s, seed,
                   self.intent.profile.roce.priority, objective, trial.candidate.qps,
                   f"tune {format_speed(speed)} held out", settings.payload_bytes)  # fmt: skip

    def _default_job(self, network: TwinNetwork, speed: int, ranks: int) -> TunedJob:
        """The collective the search ran without a job file, as a job (one NIC per host)."""
        objective = self.settings.objective
        hosts = collective_hosts(network, speed, ranks)
        spec = CollectiveSpec(objective.workload, ranks, objective.size_bytes,  # type: ignore[arg-type]
                              hosts=hosts, speed_bps=speed,
                              algorithm=objective.algorithm)  # fmt: skip
        return TunedJob("", spec, 1)

    def _misses(self, run: RunMetrics, trial: Trial) -> tuple[str, ...]:
        return tuple(evaluate([run], self._objectives(trial)))

    def _objectives(self, trial: Trial) -> Objectives:
        """The constraints of ``trial``'s setting (its own measured error, where a lab check
        ran it)."""
        return self.settings.objectives.for_setting(trial.candidate.setting_key())

    def _load_points(self, senders: int) -> tuple[int, ...]:
        """:func:`load_points`; a job file's job: its ranks on as many whole hosts."""
        job = self.settings.objective.job
        if job is None:
            return load_points(senders)
        if self.settings.objective.beside:  # jobs side by side are judged as they run, whole
            return (senders,)
        return tuple(h * job.nics_per_host for h in load_points(job.hosts))

    def _heavier_jobs(self, senders: int, hosts: int) -> list[str]:
        """What would load the fabric more than the job searched, as tune's options (a job
        file's job: as the job file's fields)."""
        settings = self.settings
        job = settings.objective.job
        if job is not None and settings.objective.beside:
            return ["more hosts in a job (hosts:), or an all-to-all (collective: alltoall)"]
        if job is not None and job.name:  # a job file's
            heavier = [f"more hosts in job {job.name} (hosts:)"] if hosts > job.hosts else []
            if all(part.workload != "alltoall" for part in job.parts):
                heavier.append(f"an all-to-all (collective: alltoall in job {job.name})")
            return heavier
        if not settings.collective:
            more = min(hosts - 1 if settings.scenario == "incast" else hosts, MAX_SENDERS)
            return [f"more senders (--senders {more})"] if more > senders else []
        heavier = []
        if min(hosts, MAX_TUNE_RANKS) > senders:
            heavier.append(f"more ranks (--ranks {min(hosts, MAX_TUNE_RANKS)})")
        if settings.objective.workload != "alltoall":
            heavier.append("an all-to-all (--workload alltoall)")
        return heavier

    def _validated(self, cands: list[Candidate]) -> list[Trial]:
        """Trials, with the rule each invalid candidate breaks (those never run)."""
        trials = []
        for c in cands:
            trial = Trial(c)
            trial.variant, trial.invalid = candidate_intent(self.intent, c.ecn, c.dcqcn)
            trials.append(trial)
        return trials

    def _halve(
        self,
        result: SpeedResult,
        trials: list[Trial],
        rungs: list[tuple[float, tuple[tuple[int, int], ...]]],
    ) -> bool:
        """Run the rungs; after each but the last keep the best 1/eta (and the current).
        True when every rung measured its candidates the same (:func:`indistinguishable`)."""
        alive = [t for t in trials if t.invalid is None]
        flat = True
        plan = self._with_rail_sample(rungs)
        for number, (fidelity, points) in enumerate(plan):
            runs = self._run(alive, result.speed_bps, fidelity, points, number)
            flat = flat and indistinguishable(alive, self.settings.objective, feasible=False)
            last = number == len(plan) - 1
            kept = alive if last else self._survivors(alive, number, fidelity, points)
            result.rungs.append(
                Rung(
                    self.settings.duration_s * fidelity.fraction,
                    points,
                    len(alive),
                    runs,
                    len(kept),
                    self._fidelity(fidelity),
                    fidelity.sample_rails,
                )
            )
            alive = kept
        return flat

    def _with_rail_sample(
        self, rungs: list[tuple[float, tuple[tuple[int, int], ...]]]
    ) -> list[tuple[Fidelity, tuple[tuple[int, int], ...]]]:
        """The rungs as planned; with a rail sample (:meth:`_rail_sample`) every rung runs rail
        0 alone, and one more runs the best of the last on every rail at the stated job (the
        heaviest load point, every seed): their lighter points stay judged on rail 0 (exact for
        that rail), the objective and the stated job's constraints on the whole job."""
        if not self._rail_sample():
            return [(Fidelity(fraction), points) for fraction, points in rungs]
        plan = [(Fidelity(fraction, 1), points) for fraction, points in rungs]
        heaviest = max(n for n, _ in rungs[-1][1])
        whole = tuple((n, seed) for n, seed in rungs[-1][1] if n == heaviest)
        return [*plan, (Fidelity(1.0, 0, merge=True), whole)]

    def _fidelity(self, fidelity: Fidelity) -> str:
        if not self.settings.collective:
            return f"{self.settings.duration_s * fidelity.fraction * 1e3:g} ms"
        size = mib(self.settings.objective.size_bytes * fidelity.fraction)
        job = self.settings.objective.job
        if job is not None and job.step:
            whole = Fraction(fidelity.fraction).limit_denominator(1024)
            size = "the whole step" if whole == 1 else f"the step at {whole} of each size"
        if job is not None and job.nics_per_host > 1:
            rails = f"rail 0 of {job.nics_per_host}" if fidelity.sample_rails else "every rail"
            return f"{size}, {rails}"
        return size

    def _rail_sample(self) -> int:
        """1 when the shorter rungs may run rail 0 of the job alone: a job of one collective
        on rail-aligned multi-NIC hosts whose rails share no link (each rail's run is then
        exactly its run in the whole job, :func:`rails_share_no_link`); 0 otherwise."""
        objective = self.settings.objective
        job = objective.job
        if job is None or objective.beside or job.nics_per_host < 2:
            return 0
        if not self.settings.rail_sample:
            return 0
        network = build_network(self.intent, self.plan)
        specs = [part.of(job.spec) for part in job.parts]
        return 1 if all(rails_share_no_link(network, spec) for spec in specs) else 0

    def _survivors(
        self,
        alive: list[Trial],
        number: int,
        fidelity: Fidelity,
        points: tuple[tuple[int, int], ...],
    ) -> list[Trial]:
        order = ranked(alive, self.settings.objective)
        eta = COLLECTIVE_ETA if self.settings.collective else HALVING_ETA
        keep = max(HALVING_MIN_SURVIVORS, math.ceil(len(alive) / eta))
        for place, trial in enumerate(order[keep:], start=keep + 1):
            if not trial.candidate.current:
                trial.pruned = (
                    f"dropped by halving at rung {number + 1} "
                    f"({self._fidelity(fidelity)}): ranked {place} of {len(order)}"
                    + (f", {trial.reasons[0]}" if trial.reasons else "")
                )
        return [t for t in alive if t.pruned is None]

    def _run(
        self,
        trials: list[Trial],
        speed: int,
        fidelity: Fidelity,
        points: tuple[tuple[int, int], ...],
        number: int,
    ) -> int:
        """Run ``trials`` at ``points`` at ``fidelity``; their runs replace the earlier rung's
        (with ``fidelity.merge``, only its runs at those load points).  Returns the number of
        runs."""
        fraction, sample_rails = fidelity.fraction, fidelity.sample_rails
        rerun = {n for n, _ in points}
        roce = self.intent.profile.roce.priority
        objective = self.settings.objective
        if objective.name == "collective":
            objective = replace(objective, size_bytes=max(1, int(objective.size_bytes * fraction)))
        duration = self.settings.duration_s * fraction  # a collective runs until it completes
        jobs: list[Job] = []
        owners: list[Trial] = []
        for trial in trials:
            c = trial.candidate
            variant = trial.variant or self.intent  # _validated set it on every valid one
            kept = [r for r in trial.runs if r.senders not in rerun] if fidelity.merge else []
            trial.runs, trial.rung = kept, number
            for n, seed in points:
                label = f"tune {format_speed(speed)} rung {number + 1}"
                jobs.append(Job(self.intent if c.current else variant, self.settings.scenario, n,
                                speed, duration, seed, roce, objective, c.qps, label,
                                self.settings.payload_bytes, sample_rails))  # fmt: skip
                owners.append(trial)
        for trial, metrics in zip(owners, self.settings.runner(jobs), strict=True):
            trial.runs.append(metrics)
        for trial in trials:
            trial.reasons = evaluate(trial.runs, self._objectives(trial))
        return len(jobs)

    def _widen(
        self, result: SpeedResult, space: Space, trials: list[Trial], seen: set[Any]
    ) -> None:
        """Widen the axes the recommendation sits on the edge of (module docstring: Edges)."""
        for _ in range(MAX_WIDENINGS):
            if not self._widen_once(result, space, trials, seen):
                return
        pivot = self._pivot(trials)
        if pivot is None:
            return
        for name, direction in space.ends(pivot.candidate):
            if not any(_explained(note, name) for note in result.edge_notes):
                end: End = "lowest" if direction < 0 else "highest"
                result.edge_notes.append(StillAtEdge(name, end, MAX_WIDENINGS))

    def _pivot(self, trials: list[Trial]) -> Trial | None:
        """What widening moves around: the ranking's first (the best measured, which the decision
        may not take: a tie keeps the current setting), or, when nothing passed, the
        closest (a search that failed at the edge of its range has not looked beyond it);
        None for a pick that is no point of the space (today's setting) or never ran."""
        best = ranked(trials, self.settings.objective)[0] if trials else None
        if best is None or best.candidate.axes is None or not best.runs:
            return None
        return best

    def _widen_once(
        self, result: SpeedResult, space: Space, trials: list[Trial], seen: set[Any]
    ) -> bool:
        """One widening: the points beyond the pivot's edges run at full fidelity and join
        ``trials``.  False when there was nothing to widen (the search stops widening)."""
        pivot = self._pivot(trials)
        if pivot is None:
            return False
        new_points, edges = self._edge_points(space, pivot.candidate)
        result.edge_notes.extend(e for e in edges if e not in result.edge_notes)
        fresh = space_candidates(space, new_points, seen, len(trials))
        if not fresh:
            return False
        added = self._validated(fresh)
        trials.extend(added)
        valid = [t for t in added if t.invalid is None]
        full = tuple((n, s) for n in result.load_points for s in self.settings.seeds)
        runs = self._run(valid, result.speed_bps, Fidelity(1.0), full, len(result.rungs))
        result.rungs.append(
            Rung(
                self.settings.duration_s,
                full,
                len(valid),
                runs,
                len(valid),
                self._fidelity(Fidelity(1.0)),
            )
        )
        after = ranked(trials, self.settings.objective)[0]
        result.edge_notes.append(AfterWidening(after.candidate, after.feasible))
        return True

    @staticmethod
    def _edge_points(space: Space, best: Candidate) -> tuple[list[list[float]], list[Edge]]:
        """The new point beyond ``best`` on each axis it is on the edge of (every other axis
        as ``best``: each costs a full evaluation) and, when several widen, the point with all
        of them moved (rate-increase knobs pay off together), and the edges."""
        assert best.axes is not None
        points: list[list[float]] = []
        edges: list[Edge] = []
        for name, direction in space.ends(best):
            edge = space.extend(name, direction)
            edges.append(edge)
            if edge.widened_to is not None:
                point = list(best.axes)
                point[space.names.index(name)] = edge.widened_to
                points.append(point)
        if len(points) > 1:  # and every widened axis at once: knobs that move together
            corner = list(best.axes)
            for point in points:
                corner = [
                    p if p != b else c for p, b, c in zip(point, best.axes, corner, strict=True)
                ]
            points.append(corner)
        return points, edges

    def _pause_note(self, result: SpeedResult) -> None:
        """A recommendation that moves the pause threshold: by how much, and why it is safe."""
        best = result.recommended
        if best is None or not best.runs:
            return
        before, after = result.pause_threshold_bytes, best.runs[0].pause_threshold_bytes
        if before == after:
            return
        variant, _ = candidate_intent(self.intent, best.candidate.ecn, best.candidate.dcqcn)
        roce = self.intent.profile.roce.priority
        dilation = self.intent.emulation.time_dilation
        old = host_headroom(self.plan, roce, result.speed_bps, dilation)
        new = (
            host_headroom(build_plan(variant), roce, result.speed_bps, dilation)
            if variant
            else None
        )
        result.edge_notes.append(
            PauseMove(
                before=before,
                after=after,
                xoff_before=None if old is None else old.xoff,
                xoff_after=None if new is None else new.xoff,
                ecn_max=best.candidate.ecn.max_bytes,
                load_points=result.load_points,
                unit="ranks" if self.settings.collective else "senders",
            )
        )


# The limits a "still at the edge" note does not repeat: a range that ends and min's floor of two
# frames are said once (a bound or the cap is said again after the last widening).
_SAID_ONCE = frozenset({"range", "floor"})


def _explained(note: EdgeNote, axis: str) -> bool:
    """``note`` already says that ``axis`` cannot widen, for good."""
    return (
        isinstance(note, Edge)
        and note.axis == axis
        and note.limit is not None
        and note.limit.kind in _SAID_ONCE
    )
