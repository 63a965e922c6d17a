"""The sweep's settings: ECN on the switches and DCQCN on the hosts' NICs, and where they come
from -- explicit candidates, the fabric's current setting, a recommendation (``roce-agent tune
--write-override``'s file, or values) and its grid neighbours.

A setting becomes an intent (:func:`with_setting`): the fabric's with the RoCE queue's ECN and
the NICs' DCQCN replaced. That intent is what is pushed -- the switches through the same path as
``apply`` (:class:`agent.device.push.Pusher`), the hosts' DCQCN through the same plan as ``apply
--include-hosts`` (:func:`agent.intent.plan.nic_plan`, which ``linux_host`` renders as mlx5 sysfs
writes): a lab host's NIC is its probe sender, which takes the reaction and notification
point's parameters from that plan (:mod:`agent.observe.probes.scenarios`), so a lab host runs
exactly the DCQCN a real host would be configured with.

Grid neighbours of a recommendation, one step (``neighbour_step``, 1.5 by default) either side
along each axis the recommendation moves:

* ``ecn``: both thresholds divided and multiplied by the step (probability kept);
* ``dcqcn``: the rate increase made slower and faster by the step -- ``rpg_time_reset`` (the
  recovery timer, the knob ``tune --dcqcn`` searches first) multiplied and divided by it.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from agent.errors import AgentError, IntentError, Problem
from agent.intent.model import Dcqcn, Ecn, FabricIntent, Nic, Profile
from agent.intent.plan import ecn_for_port, nic_plan
from agent.intent.units import parse_size
from agent.ops.twin_vs_lab import MEASURES, IncastMeasures, agree
from common.validation import validation_problems
from common.yamlsource import load_yaml

Neighbour = Literal["ecn", "dcqcn"]
AXES: tuple[Neighbour, ...] = ("ecn", "dcqcn")
DEFAULT_STEP = 1.5
CURRENT = "current"
RECOMMENDED = "recommended"


def _size(value: Any) -> Any:
    """A threshold as bytes (``9KB`` -> 9000), so a typo fails when the playbook loads."""
    if isinstance(value, str | int) and not isinstance(value, bool):
        return parse_size(value)
    return value


Size = Annotated[int, BeforeValidator(_size), Field(ge=1)]


class SweepModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EcnCandidate(SweepModel):
    """One setting to try: the RoCE queue's ECN and, optionally, the hosts' DCQCN (mlx5 names,
    :class:`agent.intent.model.Dcqcn`; unset parameters keep the fabric's)."""

    name: str | None = Field(default=None, min_length=1, max_length=80)
    min_threshold: Size
    max_threshold: Size
    max_probability: int = Field(default=100, ge=1, le=100)
    dcqcn: Dcqcn | None = None

    @model_validator(mode="after")
    def _ordered(self) -> EcnCandidate:
        if self.min_threshold > self.max_threshold:
            raise ValueError(
                f"Expected: min_threshold <= max_threshold Actual: {self.min_threshold} > "
                f"{self.max_threshold}"
            )
        return self

    def dcqcn_values(self) -> dict[str, int]:
        """The DCQCN parameters this candidate sets (the rest stay the fabric's)."""
        if self.dcqcn is None:
            return {}
        return {k: v for k, v in self.dcqcn.model_dump().items() if v is not None}

    def label(self) -> str:
        low, high = self.min_threshold / 1000, self.max_threshold / 1000
        ecn = f"{low:g}-{high:g} KB @{self.max_probability} %"
        return f"{self.name}: {ecn}" if self.name else ecn


class SweepSpec(SweepModel):
    """``ecn_sweep``: what to try, and how (see the module and :mod:`agent.ops.playbooks`)."""

    # Settings to try: a list, or a file of them (a path relative to the playbook's directory:
    # ``tune --write-finalists``'s, ``candidates: [...]``).
    candidates: list[EcnCandidate] | Annotated[str, Field(min_length=1)] = Field(
        default_factory=list
    )
    # The fabric's own setting (profile + overrides) as a candidate named "current".
    current: bool = False
    # A tune override file (a path, relative to the playbook's directory) or explicit values.
    recommendation: str | EcnCandidate | None = None
    neighbours: list[Neighbour] = Field(default_factory=lambda: list(AXES))
    neighbour_step: float = Field(default=DEFAULT_STEP, gt=1, le=4)
    to: str = "auto"
    senders: list[str] | Literal["auto"] = Field(default="auto", alias="from")
    duration_s: float = Field(default=2.0, gt=0, le=600)
    min_goodput_fraction: float = Field(default=0.9, gt=0, le=1)
    # The most a setting may keep the senders paused (paused fraction, 0-1); 1 = no limit.
    max_paused_fraction: float = Field(default=1.0, ge=0, le=1)
    # Runs per candidate, in rounds over all candidates (so a burst of load on the shared lab
    # hits every candidate once, not one candidate three times); the median decides.
    repeats: int = Field(default=1, ge=1, le=9)

    @model_validator(mode="after")
    def _something_to_try(self) -> SweepSpec:
        if not self.candidates and not self.current and self.recommendation is None:
            raise ValueError(
                "Expected: candidates, current: true or a recommendation Actual: nothing to try"
            )
        return self


@dataclass(frozen=True)
class Recommendation:
    """A tune override file, read: the ECN queues and the NICs' DCQCN it sets."""

    source: str
    ecn: Ecn | None = None
    dcqcn: Dcqcn | None = None
    ignored: tuple[str, ...] = field(default=())


class _OverrideBlock(BaseModel):
    """The part of a fabric file's ``overrides:`` block the sweep can try."""

    model_config = ConfigDict(extra="allow", frozen=True)
    ecn: Ecn | None = None
    nic: Nic | None = None


def read_recommendation(path: Path) -> Recommendation:
    """A ``tune --write-override`` file (``overrides: {ecn: …, nic: {dcqcn: …}}``, or that block
    itself). Bad content is an IntentError naming file:line and the field; keys the sweep does
    not try (``buffers`` …) are listed in ``ignored``, not silently dropped."""
    data, source = load_yaml(path)
    prefix: tuple[str, ...] = ()
    if isinstance(data, dict) and "overrides" in data:
        data, prefix = data["overrides"], ("overrides",)
    if not isinstance(data, dict):
        raise IntentError(
            [Problem(source.locate(prefix), ".".join(prefix), "Expected: a mapping "
                     "(the fabric's overrides: block, as tune --write-override writes it)")]
        )  # fmt: skip
    try:
        block = _OverrideBlock.model_validate(data)
    except ValidationError as exc:
        raise IntentError(validation_problems(exc, data, source, prefix)) from None
    dcqcn = block.nic.dcqcn if block.nic is not None else None
    if block.ecn is None and (dcqcn is None or not _set(dcqcn)):
        raise IntentError(
            [Problem(source.locate(prefix), ".".join(prefix) or "overrides",
                     "Expected: ecn.queues or nic.dcqcn to try Actual: neither")]
        )  # fmt: skip
    ignored = tuple(sorted(str(k) for k in data if k not in ("ecn", "nic")))
    return Recommendation(str(path), block.ecn, dcqcn, ignored)


def _set(dcqcn: Dcqcn) -> dict[str, int]:
    return {k: v for k, v in dcqcn.model_dump().items() if v is not None}


def read_candidates(path: Path) -> list[EcnCandidate]:
    """A file of settings (``candidates: [...]``, as ``tune --write-finalists`` writes it, or
    the list itself). Bad content is an IntentError naming file:line and the field."""
    data, source = load_yaml(path)
    prefix: tuple[str, ...] = ()
    if isinstance(data, dict) and set(data) == {"candidates"}:
        data, prefix = data["candidates"], ("candidates",)
    if not isinstance(data, list) or not data:
        raise IntentError(
            [Problem(source.locate(prefix), ".".join(prefix) or "candidates",
                     "Expected: a non-empty list of settings (candidates: [...], as tune "
                     "--write-finalists writes it)")]
        )  # fmt: skip
    out = []
    for index, item in enumerate(data):
        try:
            out.append(EcnCandidate.model_validate(item))
        except ValidationError as exc:
            raise IntentError(validation_problems(exc, item, source, (*prefix, index))) from None
    return out


def resolve_files(spec: SweepSpec, base: Path) -> SweepSpec:
    """``spec`` with its recommendation file's path made absolute (relative to ``base``, the
    playbook's directory) and its candidates file read, each read now so a bad file fails
    before the lab changes."""
    update: dict[str, Any] = {}
    if isinstance(spec.recommendation, str):
        path = _beside(spec.recommendation, base)
        read_recommendation(path)
        update["recommendation"] = str(path)
    if isinstance(spec.candidates, str):
        update["candidates"] = read_candidates(_beside(spec.candidates, base))
    return spec.model_copy(update=update) if update else spec


def _beside(name: str, base: Path) -> Path:
    path = Path(name)
    return path if path.is_absolute() else base / path


def listed_candidates(spec: SweepSpec) -> list[EcnCandidate]:
    """The explicit candidates (a file's are read by :func:`resolve_files` when the playbook
    loads; one not yet read is read here)."""
    if isinstance(spec.candidates, str):
        return read_candidates(Path(spec.candidates))
    return spec.candidates


# ---------------------------------------------------------------------------------- settings


def current_setting(intent: FabricIntent, to: str) -> EcnCandidate:
    """The fabric's own setting: the RoCE queue's ECN as planned for the receiver's port, and
    every DCQCN parameter the hosts get (:func:`nic_plan`)."""
    profile = intent.profile
    device = intent.device(to)
    if device is None or not device.ports:
        raise AgentError(f"ecn_sweep: {to}: Expected: a host of fabric {intent.name} with a port")
    plans = ecn_for_port(profile, device.ports[0])
    roce = next((p for p in plans if p.queue == profile.roce.priority), None)
    if roce is None:
        raise AgentError(
            f"ecn_sweep current: the profile has no ECN on the RoCE queue {profile.roce.priority}"
        )
    return EcnCandidate(
        name=CURRENT,
        min_threshold=roce.min_bytes,
        max_threshold=roce.max_bytes,
        max_probability=roce.max_probability,
        dcqcn=Dcqcn(**_dcqcn_fields(nic_plan(profile).dcqcn)),
    )


def _dcqcn_fields(values: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in values.items() if k in Dcqcn.model_fields}


def recommended_setting(
    recommendation: str | EcnCandidate, intent: FabricIntent, to: str
) -> tuple[EcnCandidate, list[str]]:
    """The recommendation as a full candidate (what it leaves unset stays the fabric's), and
    notes (keys of its file the sweep does not try)."""
    if isinstance(recommendation, EcnCandidate):
        # Always named "recommended": the check (sweep_verdict) finds it by that name.
        return recommendation.model_copy(update={"name": RECOMMENDED}), []
    read = read_recommendation(Path(recommendation))
    current = current_setting(intent, to)
    queue = read.ecn.queues.get(intent.profile.roce.priority) if read.ecn else None
    values: dict[str, Any] = {
        "min_threshold": current.min_threshold,
        "max_threshold": current.max_threshold,
        "max_probability": current.max_probability,
    }
    if queue is not None:
        for key in ("min_threshold", "max_threshold"):
            if getattr(queue, key) != "auto":
                values[key] = getattr(queue, key)
        values["max_probability"] = queue.max_probability
    dcqcn = {**current.dcqcn_values(), **(_set(read.dcqcn) if read.dcqcn else {})}
    notes = [
        f"{read.source}: not tried by the sweep (ECN and DCQCN only): {', '.join(read.ignored)}"
    ] if read.ignored else []  # fmt: skip
    return EcnCandidate(name=RECOMMENDED, dcqcn=Dcqcn(**dcqcn), **values), notes


def neighbours(
    best: EcnCandidate, intent: FabricIntent, axes: list[Neighbour], step: float
) -> list[EcnCandidate]:
    """The grid neighbours of ``best``, one ``step`` either side on each axis (module doc).
    A neighbour that rounding would make equal to ``best`` (a 1 µs timer has no faster one)
    is moved one unit further, or left out where it cannot be."""
    out = []
    if "ecn" in axes:
        for how, factor in (("÷", 1 / step), ("×", step)):
            low, high = _scaled(best.min_threshold, factor), _scaled(best.max_threshold, factor)
            if low is not None and high is not None:
                out.append(
                    best.model_copy(
                        update={
                            "name": f"ECN {how}{step:g}",
                            "min_threshold": low,
                            "max_threshold": max(low, high),
                        }
                    )
                )
    if "dcqcn" in axes:
        effective = {**nic_plan(intent.profile).dcqcn, **best.dcqcn_values()}
        for how, factor in (("slower", step), ("faster", 1 / step)):
            timer = _scaled(effective["rpg_time_reset"], factor)
            if timer is not None:
                dcqcn = {**_dcqcn_fields(effective), "rpg_time_reset": timer}
                out.append(
                    best.model_copy(update={"name": f"DCQCN {how}", "dcqcn": Dcqcn(**dcqcn)})
                )
    return out


def _scaled(value: int, factor: float) -> int | None:
    """``value`` x ``factor`` rounded, at least one unit away from ``value`` (and >= 1)."""
    scaled = round(value * factor)
    if factor > 1:
        return max(scaled, value + 1)
    if value <= 1:
        return None  # nothing below the least value (a threshold of 1 B, a 1 µs timer)
    return max(1, min(scaled, value - 1))


def sweep_candidates(
    spec: SweepSpec, intent: FabricIntent, to: str
) -> tuple[list[EcnCandidate], list[str]]:
    """Every setting the sweep runs, in order: current, recommendation, its neighbours, then
    the explicit candidates; and notes for the report."""
    out: list[EcnCandidate] = []
    notes: list[str] = []
    if spec.current:
        out.append(current_setting(intent, to))
    if spec.recommendation is not None:
        best, notes = recommended_setting(spec.recommendation, intent, to)
        out += [best, *neighbours(best, intent, spec.neighbours, spec.neighbour_step)]
    out += listed_candidates(spec)
    return out, notes


def with_setting(intent: FabricIntent, candidate: EcnCandidate) -> FabricIntent:
    """``intent`` with the RoCE queue's ECN (enabled) and the NICs' DCQCN of ``candidate``."""
    profile = intent.profile
    queues = dict(profile.ecn.queues)
    roce = profile.roce.priority
    queues[roce] = queues[roce].model_copy(
        update={
            "min_threshold": candidate.min_threshold,
            "max_threshold": candidate.max_threshold,
            "max_probability": candidate.max_probability,
        }
    )
    ecn = profile.ecn.model_copy(update={"queues": queues, "enabled": True})
    update: dict[str, Any] = {"ecn": ecn}
    if candidate.dcqcn is not None:
        merged = profile.nic.dcqcn.model_copy(update=candidate.dcqcn_values())
        update["nic"] = profile.nic.model_copy(update={"dcqcn": merged})
    new_profile: Profile = profile.model_copy(update=update)
    return intent.model_copy(update={"profile": new_profile})


def dcqcn_label(intent: FabricIntent, candidate: EcnCandidate) -> str:
    """The DCQCN parameters ``candidate`` runs that differ from the fabric's own ("as the
    fabric" when none): what the table shows beside the ECN thresholds."""
    base = nic_plan(intent.profile).dcqcn
    mine = nic_plan(with_setting(intent, candidate).profile).dcqcn
    changed = [f"{k} {v}" for k, v in mine.items() if base.get(k) != v]
    return ", ".join(changed) if changed else "as the fabric"


def host_lines(intent: FabricIntent, host: str) -> list[str]:
    """What ``apply --include-hosts`` would write on ``host``'s NIC for this intent (the mlx5
    DCQCN sysfs lines of :mod:`agent.device.platforms.linux_host`): shown in the report so
    the DCQCN the lab's senders ran is the one a real host would get."""
    from agent.device.platforms.linux_host import LinuxHost
    from agent.intent.plan import build_plan

    device = build_plan(intent).device(host)
    if device is None or device.nic is None:
        return []
    return [line for line in LinuxHost().render(device) if "/ecn/roce_" in line]


# ---------------------------------------------------------------------------------- decision

SWEEP_MEASURES = ("lost", "pfc_frames", "paused_s", "ce_marked", "cnps", "goodput_bps",
                  "paused_fraction", "ce_fraction", "goodput_fraction")  # fmt: skip
# What the twin predicts of each lab measure it can: the three fractions, lossless drops (lost
# frames) and CNPs received by the senders; each agrees within TOLERANCE (twin_vs_lab.agree).
TWIN_MEASURES = (*MEASURES, "lost", "cnps")


def sweep_recommendation(
    candidates: list[EcnCandidate],
    runs: list[list[dict[str, Any]]],
    min_goodput: float,
    max_paused: float = 1.0,
) -> dict[str, Any]:
    """One row per candidate, each measure the median of its runs; the recommendation is the
    candidate with zero (median) loss, at least ``min_goodput`` of line rate and at most
    ``max_paused`` paused that drew the fewest PFC frames (then the least paused time, then the
    most goodput).

    The median, not the mean: on the shared 2-core lab one run in a few is disturbed (a burst
    of load delays the switch's pause reaction and drops frames), and that run must not
    decide. Every run's numbers stay in the row (``runs``), and ``runs_with_loss`` says how
    many runs lost frames, so a loss is never hidden.
    """
    rows = []
    for candidate, measured in zip(candidates, runs, strict=True):
        row: dict[str, Any] = {
            "name": candidate.name,
            "min_threshold": candidate.min_threshold,
            "max_threshold": candidate.max_threshold,
            "max_probability": candidate.max_probability,
            "dcqcn": candidate.dcqcn_values(),
            "label": candidate.label(),
        }
        for measure in SWEEP_MEASURES:
            row[measure] = statistics.median(run[measure] for run in measured)
        row["runs_with_loss"] = sum(1 for run in measured if run["lost"])
        if all("load" in run for run in measured):  # the busiest the machine was
            row["load"] = max(run["load"] for run in measured)
        row["runs"] = measured
        rows.append(row)
    eligible = [r for r in rows if _meets(r, min_goodput, max_paused)]
    eligible.sort(key=lambda r: (r["pfc_frames"], r["paused_s"], -r["goodput_bps"]))
    return {"candidates": rows, "recommended": eligible[0] if eligible else None}


def _meets(row: dict[str, Any], min_goodput: float, max_paused: float) -> bool:
    return bool(
        row["lost"] == 0
        and row["goodput_fraction"] >= min_goodput
        and row["paused_fraction"] <= max_paused
    )


def add_twin_prediction(
    recommendation: dict[str, Any],
    predicted: list[IncastMeasures],
    min_goodput: float,
    counts: list[dict[str, int]] | None = None,
) -> None:
    """Put the twin's prediction of each candidate's incast next to the lab's medians
    (``twin``: the same three fractions, :mod:`agent.ops.twin_vs_lab`, and with ``counts`` its
    lost frames and CNPs), whether each measure agrees (``agreement``), and the candidate the
    same rule picks on the prediction (zero loss is the twin's by construction: its headroom
    is the computed one; fewest pauses, then most goodput)."""
    rows = recommendation["candidates"]
    for index, (row, measures) in enumerate(zip(rows, predicted, strict=True)):
        row["twin"] = measures.as_dict()
        if counts is not None:
            row["twin"].update(counts[index])
        row["agreement"] = {
            m: agree(float(row[m]), float(row["twin"][m])) for m in TWIN_MEASURES
            if m in row["twin"]
        }  # fmt: skip
    eligible = [r for r in rows if r["twin"]["goodput_fraction"] >= min_goodput]
    eligible.sort(key=lambda r: (r["twin"]["paused_fraction"], -r["twin"]["goodput_fraction"]))
    pick = eligible[0] if eligible else None
    recommendation["twin_recommended"] = (
        {k: pick[k] for k in ("name", "min_threshold", "max_threshold", "max_probability")}
        if pick
        else None
    )


def sweep_verdict(decided: dict[str, Any], spec: SweepSpec) -> dict[str, Any] | None:
    """The check of a recommendation (None without one): it must meet the objectives (zero
    loss, goodput >= the floor, paused <= the limit, medians) and, when the fabric's current
    setting ran too, deliver more goodput than it. The twin's agreement is reported with it."""
    rows = {row["name"]: row for row in decided["candidates"]}
    best = rows.get(RECOMMENDED) if spec.recommendation is not None else None
    if best is None:
        return None
    reasons = []
    if best["lost"]:
        reasons.append(f"lost {best['lost']:g} frames (median)")
    if best["goodput_fraction"] < spec.min_goodput_fraction:
        reasons.append(f"goodput {best['goodput_fraction']:.1%} < {spec.min_goodput_fraction:.0%}")
    if best["paused_fraction"] > spec.max_paused_fraction:
        reasons.append(f"paused {best['paused_fraction']:.1%} > {spec.max_paused_fraction:.0%}")
    current = rows.get(CURRENT)
    if current is not None and best["goodput_fraction"] <= current["goodput_fraction"]:
        reasons.append(
            f"goodput {best['goodput_fraction']:.1%} does not beat the current setting's "
            f"{current['goodput_fraction']:.1%}"
        )
    disagree = sorted(m for m, ok in best.get("agreement", {}).items() if not ok)
    return {
        "passed": not reasons,
        "reasons": reasons,
        "goodput": {
            "current": current["goodput_fraction"] if current else None,
            "recommended": best["goodput_fraction"],
        },
        "twin_disagrees_on": disagree,
    }
