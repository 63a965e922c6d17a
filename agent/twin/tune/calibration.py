"""The twin's measured error, and the settings a lab check should measure it on.

A lab check (an ``ecn_sweep`` step of ``roce-agent run``, :mod:`agent.ops.sweep`) runs each
setting in the lab and the twin beside it, and writes both medians per setting to its report
(``--report-file``). :func:`read_calibration` reads those reports. The twin's error at a setting is
how far its goodput fraction stood *above* the lab's median there (a floor the lab must clear is
missed only where the twin is too optimistic; where it is below the lab, its own number is the
safer one). ``tune --calibration REPORT --min-goodput 90`` then holds a candidate the lab ran to
the floor plus that setting's own error, and every other candidate to the floor plus the median
of the errors measured: the twin's typical error. Not the largest: the lab's runs have a low
tail at some settings, and a tail measured at one setting says that setting is riskier than the
twin thinks, not that every setting is (docs/tuning.md, "The lab check's margin").

Where the error is measured matters: it depends on the regime (the twin reads the lab's deep
factory-like ECN setting far below the lab, tune's shallow picks close to it;
docs/measurements/2026-12-03-lab-check-margin.md). :func:`finalists` writes the settings the
decision is made among -- tune's best few -- as the candidates of such a check, so the margin
is measured where it is used.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.twin.network import TwinError
from agent.twin.tune.judge import ranked
from agent.twin.tune.objectives import ObjectiveSpec, SettingKey, full_key
from agent.twin.tune.results import SpeedResult
from agent.twin.tune.text import pct
from common.yamlsource import read_bounded

MAX_REPORT_BYTES = 16 * 2**20
FINALISTS = 3  # tune --write-finalists: the settings a check runs (3 runs each: minutes of lab)


@dataclass(frozen=True)
class Measured:
    """One setting a lab check ran: its label and the goodput fraction in the lab (median of
    its runs) and in the twin."""

    source: str
    setting: str
    lab: float
    twin: float
    key: SettingKey | None = None  # None: a row that does not name its setting

    @property
    def over(self) -> float:
        """How far the twin stood above the lab (negative: below)."""
        return self.twin - self.lab


@dataclass(frozen=True)
class Calibration:
    """The goodput margin of the reports read, and where it comes from."""

    settings: tuple[Measured, ...]

    @property
    def margin(self) -> float:
        """The twin's typical error: the median over the settings checked (0 at least)."""
        return max(0.0, statistics.median(m.over for m in self.settings))

    def by_setting(self) -> tuple[tuple[SettingKey, float], ...]:
        """Each setting's own error (0 at least; the largest where one ran twice)."""
        own: dict[SettingKey, float] = {}
        for m in self.settings:
            if m.key is not None:
                own[m.key] = max(own.get(m.key, 0.0), m.over)
        return tuple(own.items())

    def describe(self) -> str:
        """The margins in words: the typical one and each setting's own."""
        count = f"{len(self.settings)} setting{'s' if len(self.settings) != 1 else ''}"
        each = "; ".join(
            f"{m.setting} {m.over * 100:+.1f} % (lab {pct(m.lab)}, twin {pct(m.twin)})"
            for m in self.settings
        )
        sources = ", ".join(sorted({m.source for m in self.settings}))
        return (
            f"goodput margin {pct(self.margin)}: the median of the twin's error above the lab "
            f"over {count} checked ({sources}); a setting the lab ran takes its own: {each}"
        )


def read_calibration(
    paths: Sequence[Path], fabric: str, dcqcn_base: tuple[tuple[str, int], ...] = ()
) -> Calibration:
    """The settings of every lab check in ``paths`` (``roce-agent run --report-file`` JSON of
    fabric ``fabric`` with an ``ecn_sweep`` step), each keyed with the fabric's DCQCN values
    ``dcqcn_base`` under its own: an error naming the file and what it lacks otherwise."""
    settings: list[Measured] = []
    for path in paths:
        report = _report(path)
        if report.get("fabric") != fabric:
            actual = report.get("fabric")
            raise _bad(path, f"a lab check of fabric {fabric} Actual: fabric {actual}")
        found = [_measured(path, row, dcqcn_base) for row in _sweep_rows(report)]
        measured = [m for m in found if m is not None]
        if not measured:
            raise _bad(path, "a lab check with the twin beside the lab (an ecn_sweep step's rows) "
                             "Actual: none")  # fmt: skip
        settings.extend(measured)
    return Calibration(tuple(settings))


def _report(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(read_bounded(path, MAX_REPORT_BYTES))
    except (ValueError, UnicodeDecodeError) as exc:
        raise _bad(path, f"a JSON report Actual: {exc}") from None
    if not isinstance(data, dict):
        raise _bad(path, f"a JSON object Actual: {type(data).__name__}")
    return data


def _sweep_rows(report: dict[str, Any]) -> list[Any]:
    """Every ecn_sweep step's rows (a report may hold several sweeps)."""
    rows: list[Any] = []
    for step in report.get("steps") or ():
        if isinstance(step, dict) and step.get("kind") == "ecn_sweep":
            detail = step.get("detail")
            if isinstance(detail, dict) and isinstance(detail.get("candidates"), list):
                rows.extend(detail["candidates"])
    return rows


def _measured(path: Path, row: Any, base: tuple[tuple[str, int], ...]) -> Measured | None:
    if not isinstance(row, dict) or not isinstance(row.get("twin"), dict):
        return None
    lab, twin = row.get("goodput_fraction"), row["twin"].get("goodput_fraction")
    if lab is None or twin is None or not (_fraction(lab) and _fraction(twin)):
        return None
    setting = str(row.get("name") or row.get("label") or "?")
    key = _key(row)
    return Measured(path.name, setting, float(lab), float(twin), key and full_key(key, base))


def _key(row: dict[str, Any]) -> SettingKey | None:
    """The setting of a row (its ECN and the DCQCN values it set), as tune's candidates name
    theirs (:meth:`agent.twin.tune.space.Candidate.setting_key`)."""
    ecn = [row.get(k) for k in ("min_threshold", "max_threshold", "max_probability")]
    dcqcn = row.get("dcqcn") or {}
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in ecn):
        return None
    if not isinstance(dcqcn, dict) or not all(isinstance(v, int) for v in dcqcn.values()):
        return None
    low, high, probability = (int(v) for v in ecn if v is not None)
    return (low, high, probability, tuple(sorted((str(k), v) for k, v in dcqcn.items())))


def _fraction(value: Any) -> bool:
    """A goodput fraction as the sweep writes it (a short run that drains after its senders
    stop can read a little above 1)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 2


def _bad(path: Path, expected: str) -> TwinError:
    return TwinError(f"tune --calibration {path}: Expected: {expected}")


def finalists(
    speed: SpeedResult, objective: ObjectiveSpec, count: int = FINALISTS
) -> list[dict[str, Any]]:
    """The first ``count`` candidates meeting the constraints, in the ranking's order, as a lab
    check's candidates (``ecn_sweep``'s ``candidates:``): what the twin's error should be
    measured on before the decision."""
    out = []
    feasible = [t for t in ranked(speed.ecn.trials, objective) if t.feasible]
    for place, trial in enumerate(feasible[:count], 1):
        candidate = trial.candidate
        entry: dict[str, Any] = {
            "name": f"finalist {place}" + (" (current)" if candidate.current else ""),
            "min_threshold": candidate.ecn.min_bytes,
            "max_threshold": candidate.ecn.max_bytes,
            "max_probability": candidate.ecn.max_probability,
        }
        if candidate.dcqcn:
            entry["dcqcn"] = dict(candidate.dcqcn)
        out.append(entry)
    return out
