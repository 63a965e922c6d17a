"""Score fault-localisation verdicts against the labelled trials of this data set.

Standard library only, so it runs on a copy of this folder without the project installed:

    python datasets/locate/score.py datasets/locate/*.jsonl
    python datasets/locate/score.py baseline.jsonl --verdicts mine.jsonl   # another method
    python datasets/locate/score.py baseline.jsonl --by kind,direction --json

Each line of a data set file is one trial (the schema: README.md here). ``--verdicts`` scores
another method on the same trials: a JSON-lines file of ``{"id": ..., "suspects": [{"kind",
"element", "rank"}, ...]}``, one line per trial id; a trial it leaves out counts as "no
suspect". ``bench/locate.py`` prints its tables and goals with these same functions.

Definitions (per group of trials, e.g. one fault kind at one rate):

- **first** (first-suspect accuracy): the share of trials whose first suspect is the injected
  element. The first suspect is the one suspect at rank 1; when several share rank 1 (a tied
  group) there is no first, so a tie never counts. A no-fault trial is right when there is no
  suspect at all.
- **precision**: right suspects / all suspects named, over the group's trials (a suspect is
  right when its kind and element are the injected ones; every suspect of a no-fault trial is
  false). No suspect named at all: undefined (``None``).
- **recall**: the share of fault trials whose injected element is among the suspects, at any
  rank, tied or not.
- **tied**: the trials whose rank 1 is shared, and the largest such group.
- **false suspects**: suspects that are not the injected element, in all; and the trials with
  at least one.
- **time to verdict**: median and largest, in seconds, over the trials that ran.

A trial whose run failed (``error`` set) counts as wrong everywhere and has no time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

SCHEMA = 1
RATE_KINDS = ("loss", "corrupt")  # the kinds injected at several rates
DIRECTIONS = ("host>leaf", "leaf>host", "leaf>spine", "spine>leaf")
# The goals on the lab (#30, item 3).
GOAL_FIRST = 0.95  # at >= 1 % loss or corruption, and for every other kind
GOAL_FIRST_LOW = 0.80  # at 0.5 %
LOW_RATE = 0.5
GOAL_VERDICT_S = 60.0

# What a record must hold: key -> the types its value may have.
REQUIRED: dict[str, tuple[type, ...]] = {
    "schema": (int,),
    "id": (str,),
    "fault": (dict,),
    "expected": (dict, type(None)),
    "seed": (dict,),
    "settings": (dict,),
    "time_to_verdict_s": (int, float, type(None)),
    "verdict": (dict, type(None)),
    "evidence": (list,),
    "error": (str, type(None)),
    "code_version": (str,),
    "started_at": (str,),
}
FAULT_KEYS = ("kind", "target", "params", "rate_percent", "direction")


def problems(record: Any) -> list[str]:
    """What is wrong with one record, as "Expected: ... Actual: ..." lines (empty: valid)."""
    if not isinstance(record, dict):
        return [f"Expected: a JSON object. Actual: {type(record).__name__}"]
    out = _type_problems(record)
    if out:
        return out
    return _content_problems(record)


def _type_problems(record: dict[str, Any]) -> list[str]:
    """Each required key missing or of the wrong type."""
    out = []
    for key, types in REQUIRED.items():
        if key not in record:
            out.append(f"{key}: Expected: present. Actual: missing")
        elif not isinstance(record[key], types) or isinstance(record[key], bool):
            wanted = " or ".join("null" if t is type(None) else t.__name__ for t in types)
            out.append(f"{key}: Expected: {wanted}. Actual: {type(record[key]).__name__}")
    return out


def _content_problems(record: dict[str, Any]) -> list[str]:
    """What the keys hold that does not fit: the schema, the fault's keys, the label, and
    exactly one of verdict and error."""
    out = []
    if record["schema"] != SCHEMA:
        out.append(f"schema: Expected: {SCHEMA}. Actual: {record['schema']}")
    out += [
        f"fault.{k}: Expected: present. Actual: missing"
        for k in FAULT_KEYS
        if k not in record["fault"]
    ]
    fault_less = record["fault"].get("kind") == "none"
    if fault_less != (record["expected"] is None):
        out.append(
            "expected: Expected: null exactly when fault.kind is 'none'. Actual: "
            f"{record['expected']!r} for {record['fault'].get('kind')!r}"
        )
    if record["expected"] is not None and set(record["expected"]) != {"kind", "element"}:
        out.append(f"expected: Expected: kind and element. Actual: {sorted(record['expected'])}")
    if (record["verdict"] is None) == (record["error"] is None):
        out.append(
            "verdict/error: Expected: exactly one of them. Actual: "
            f"verdict {'set' if record['verdict'] else 'null'}, error {record['error']!r}"
        )
    elif record["verdict"] is not None and not isinstance(record["verdict"].get("suspects"), list):
        out.append("verdict.suspects: Expected: a list. Actual: missing")
    return out


def load(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    """Every record of the files, checked; ValueError names the file, line and problem."""
    records = []
    for path in paths:
        for number, line in enumerate(Path(path).read_text().splitlines(), start=1):
            if not line.strip():
                continue
            record = json.loads(line)
            bad = problems(record)
            if bad:
                raise ValueError(f"{path}:{number}: {bad[0]}")
            records.append(record)
    return records


# --------------------------------------------------------------------------- one trial


def _key(suspect: dict[str, Any]) -> tuple[str, str]:
    return str(suspect["kind"]), str(suspect["element"])


def rank_one(suspects: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The suspects at rank 1 (with no ranks given, the first in the list)."""
    if not suspects:
        return []
    if all("rank" in s for s in suspects):
        best = min(int(s["rank"]) for s in suspects)
        return [s for s in suspects if int(s["rank"]) == best]
    return [suspects[0]]


def first(suspects: Sequence[dict[str, Any]]) -> tuple[str, str] | None:
    """The first suspect, or None when there is none or rank 1 is a tied group (a suspect
    that names others it is tied with is a group even when they are not listed)."""
    top = rank_one(suspects)
    if len(top) != 1 or top[0].get("tied_with"):
        return None
    return _key(top[0])


@dataclass(frozen=True)
class Scored:
    """One trial, scored."""

    id: str
    kind: str
    rate: float | None
    direction: str | None
    fault: bool  # False: a no-fault trial
    right_first: bool
    found: bool  # the injected element is among the suspects
    suspects: int
    right_suspects: int
    tied_size: int  # suspects sharing rank 1 when more than one, else 0
    time_s: float | None
    error: bool


def score(record: dict[str, Any], suspects: Sequence[dict[str, Any]] | None = None) -> Scored:
    """``suspects``: another method's verdict for this trial (default: the record's own)."""
    failed = record["error"] is not None
    if suspects is None:
        suspects = [] if failed else record["verdict"]["suspects"]
    expected = record["expected"]
    want = (expected["kind"], expected["element"]) if expected else None
    keys = [_key(s) for s in suspects]
    top = rank_one(suspects)
    tied = (
        len(top)
        if len(top) > 1
        else (1 + len(top[0]["tied_with"]) if top and top[0].get("tied_with") else 0)
    )
    right_first = not failed and (first(suspects) == want if want else not suspects)
    return Scored(
        id=record["id"],
        kind=record["fault"]["kind"],
        rate=record["fault"]["rate_percent"],
        direction=record["fault"]["direction"],
        fault=want is not None,
        right_first=right_first,
        found=not failed and want is not None and want in keys,
        suspects=len(keys),
        right_suspects=sum(k == want for k in keys),
        tied_size=tied,
        time_s=None if failed else record["time_to_verdict_s"],
        error=failed,
    )


# --------------------------------------------------------------------------- groups


@dataclass(frozen=True)
class Summary:
    trials: int
    first: float
    precision: float | None
    recall: float | None  # None for no-fault groups
    tied_trials: int
    largest_tie: int
    false_suspects: int
    trials_with_false: int
    errors: int
    time_median_s: float | None
    time_max_s: float | None


def summarise(trials: Sequence[Scored]) -> Summary:
    faults = [t for t in trials if t.fault]
    times = [t.time_s for t in trials if t.time_s is not None]
    return Summary(
        trials=len(trials),
        first=sum(t.right_first for t in trials) / len(trials),
        precision=_ratio(sum(t.right_suspects for t in trials), sum(t.suspects for t in trials)),
        recall=_ratio(sum(t.found for t in faults), len(faults)),
        tied_trials=sum(t.tied_size > 0 for t in trials),
        largest_tie=max((t.tied_size for t in trials), default=0),
        false_suspects=sum(t.suspects - t.right_suspects for t in trials),
        trials_with_false=sum(t.suspects > t.right_suspects for t in trials),
        errors=sum(t.error for t in trials),
        time_median_s=statistics.median(times) if times else None,
        time_max_s=max(times, default=None),
    )


def _ratio(part: int, whole: int) -> float | None:
    """``part / whole``; None (undefined) when ``whole`` is 0."""
    return part / whole if whole else None


GROUPINGS = ("kind", "rate", "direction")


def group_key(trial: Scored, by: Sequence[str]) -> tuple[Any, ...]:
    return tuple(getattr(trial, field) for field in by)


def grouped(trials: Sequence[Scored], by: Sequence[str]) -> dict[tuple[Any, ...], Summary]:
    """One summary per group, fault kinds in the order first seen, "none" last."""
    groups: dict[tuple[Any, ...], list[Scored]] = {}

    def order(t: Scored) -> tuple[bool, float, int]:
        where = DIRECTIONS.index(t.direction) if t.direction in DIRECTIONS else len(DIRECTIONS)
        return t.kind == "none", t.rate or 0.0, where

    for trial in sorted(trials, key=order):
        groups.setdefault(group_key(trial, by), []).append(trial)
    return {key: summarise(members) for key, members in groups.items()}


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def _secs(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f}"


def markdown(trials: Sequence[Scored], by: Sequence[str] = ("kind", "rate")) -> str:
    head = [
        *by,
        "trials",
        "first",
        "precision",
        "recall",
        "tied (largest)",
        "false suspects (trials)",
        "time to verdict s (median, max)",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key, s in grouped(trials, by).items():
        cells = [
            "no fault"
            if v == "none"
            else ("–" if v is None else f"{v:g}" if isinstance(v, float) else str(v))
            for v in key
        ]
        errors = f" ({s.errors} failed)" if s.errors else ""
        cells += [
            f"{s.trials}{errors}",
            f"{_pct(s.first)} ({round(s.first * s.trials)}/{s.trials})",
            _pct(s.precision),
            _pct(s.recall),
            f"{s.tied_trials} ({s.largest_tie})" if s.tied_trials else "0",
            f"{s.false_suspects} ({s.trials_with_false})",
            f"{_secs(s.time_median_s)}, {_secs(s.time_max_s)}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# --------------------------------------------------------------------------- goals


@dataclass(frozen=True)
class Goal:
    name: str
    status: str  # PASS, FAIL, or n/a (no trial in its scope)
    detail: str


def _share_goal(name: str, trials: Sequence[Scored], goal: float) -> Goal:
    if not trials:
        return Goal(name, "n/a", "no trials")
    right = sum(t.right_first for t in trials)
    ok = right >= goal * len(trials)
    return Goal(name, "PASS" if ok else "FAIL", f"{right} of {len(trials)} first")


def goals(trials: Sequence[Scored]) -> list[Goal]:
    """The issue's goals on the lab, each PASS, FAIL or n/a."""
    return [*_rate_goals(trials), _kinds_goal(trials), _clean_goal(trials), _time_goal(trials)]


def _rate_goals(trials: Sequence[Scored]) -> list[Goal]:
    """First-suspect accuracy on loss and corruption: at 1 % and more, and at 0.5 %."""
    rated = [t for t in trials if t.kind in RATE_KINDS and t.rate is not None]
    return [
        _share_goal(
            f"faulty element first in >= {GOAL_FIRST:.0%} at >= 1 % loss/corruption",
            [t for t in rated if t.rate is not None and t.rate >= 1.0],
            GOAL_FIRST,
        ),
        _share_goal(
            f"faulty element first in >= {GOAL_FIRST_LOW:.0%} at {LOW_RATE:g} %",
            [t for t in rated if t.rate == LOW_RATE],
            GOAL_FIRST_LOW,
        ),
    ]


def _kinds_goal(trials: Sequence[Scored]) -> Goal:
    """First-suspect accuracy on every other kind, each on its own."""
    others = sorted({t.kind for t in trials if t.kind not in (*RATE_KINDS, "none")})
    per_kind = [_share_goal(k, [t for t in trials if t.kind == k], GOAL_FIRST) for k in others]
    failing = [g for g in per_kind if g.status == "FAIL"]
    return Goal(
        f"faulty element first in >= {GOAL_FIRST:.0%} for every other kind",
        "n/a" if not per_kind else ("FAIL" if failing else "PASS"),
        "; ".join(f"{g.name}: {g.detail}" for g in per_kind) or "no trials",
    )


def _clean_goal(trials: Sequence[Scored]) -> Goal:
    """No suspect at all in a run without a fault."""
    clean = [t for t in trials if t.kind == "none"]
    with_suspects = [t for t in clean if not t.right_first]
    return Goal(
        "no suspect in any no-fault run",
        "n/a" if not clean else ("FAIL" if with_suspects else "PASS"),
        f"{len(clean) - len(with_suspects)} of {len(clean)} without a suspect",
    )


def _time_goal(trials: Sequence[Scored]) -> Goal:
    """Every verdict within GOAL_VERDICT_S."""
    times = [t.time_s for t in trials if t.time_s is not None]
    slow = [x for x in times if x > GOAL_VERDICT_S]
    return Goal(
        f"verdict within {GOAL_VERDICT_S:g} s",
        "n/a" if not times else ("FAIL" if slow else "PASS"),
        f"largest {max(times):.0f} s, {len(slow)} over" if times else "no trials ran",
    )


def goal_lines(trials: Sequence[Scored]) -> list[str]:
    return [f"{g.status:4} {g.name}: {g.detail}" for g in goals(trials)]


# --------------------------------------------------------------------------- command line


def _their_verdicts(path: str) -> dict[str, list[dict[str, Any]]]:
    out = {}
    for number, line in enumerate(Path(path).read_text().splitlines(), start=1):
        if line.strip():
            row = json.loads(line)
            if not isinstance(row.get("id"), str) or not isinstance(row.get("suspects"), list):
                raise ValueError(
                    f'{path}:{number}: Expected: {{"id": str, "suspects": '
                    f"[...]}}. Actual: keys {sorted(row)}"
                )
            out[row["id"]] = row["suspects"]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", help="data set files (JSON lines)")
    parser.add_argument("--verdicts", help="another method's verdicts, JSON lines by trial id")
    parser.add_argument("--by", default="kind,rate", help=f"group by some of {GROUPINGS}")
    parser.add_argument("--json", action="store_true", help="summaries and goals as JSON")
    args = parser.parse_args(argv)
    by = [b for b in args.by.split(",") if b]
    if not by or any(b not in GROUPINGS for b in by):
        parser.error(f"--by: Expected: some of {','.join(GROUPINGS)}. Actual: {args.by!r}")
    try:
        records = load(args.files)
        theirs = _their_verdicts(args.verdicts) if args.verdicts else None
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    trials = [score(r, None if theirs is None else theirs.get(r["id"], [])) for r in records]
    if not trials:
        print("error: Expected: at least one trial. Actual: none", file=sys.stderr)
        return 2
    if args.json:
        rows = [
            {**dict(zip(by, key, strict=True)), **asdict(s)}
            for key, s in grouped(trials, by).items()
        ]
        print(json.dumps({"groups": rows, "goals": [asdict(g) for g in goals(trials)]}, indent=2))
    else:
        print(markdown(trials, by))
        print()
        print("\n".join(goal_lines(trials)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
