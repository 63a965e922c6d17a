"""``twin --compare-modes``' recommendation (agent.twin.compare.recommend), table-driven."""

from __future__ import annotations

from dataclasses import replace

import pytest

from agent.twin.compare import ModeRow, comparison_notes, recommend

BASE = ModeRow(
    mode="lossless", job="", paths="flow", recovery="go-back-n", completed=True, time_s=1e-3,
    busbw_GBps=40.0, goodput_Gbps=None, completion_p50_s=1e-4, completion_p99_s=2e-4,
    completion_max_s=3e-4, queue_peak_bytes=0, queue_p99_bytes=0, pfc_frames=0,
    max_paused_fraction=0.0, trimmed=0, trim_dropped=0, retransmitted=0, timeouts=0,
    reorder_depth=0, lossless_drops=0, lossy_drops=0,
)  # fmt: skip


def _rows(lossless: dict[str, object], trim: dict[str, object]) -> list[ModeRow]:
    return [
        replace(BASE, **lossless),  # type: ignore[arg-type]
        replace(BASE, **{"mode": "lossy-trim", "paths": "spray", **trim}),  # type: ignore[arg-type]
    ]


# (lossless row's changes, lossy-trim row's changes, recommended, words of the reason)
CASES: list[tuple[dict[str, object], dict[str, object], str, str]] = [
    ({}, {"busbw_GBps": 50.0}, "lossy-trim", "25.0% higher busbw"),
    ({"busbw_GBps": 50.0}, {}, "lossless", "25.0% higher busbw"),
    ({}, {"busbw_GBps": 40.4}, "lossless", "a tie"),
    ({}, {"busbw_GBps": 40.4, "completion_p99_s": 1e-4}, "lossy-trim", "50.0% lower p99"),
    ({}, {"completed": False, "busbw_GBps": 80.0}, "lossless", "only lossless completed"),
    ({"completed": False}, {}, "lossy-trim", "only lossy-trim completed"),
    (
        {"busbw_GBps": None, "goodput_Gbps": 300.0, "completion_p99_s": None},
        {"busbw_GBps": None, "goodput_Gbps": 360.0, "completion_p99_s": None},
        "lossy-trim",
        "higher goodput",
    ),
]


@pytest.mark.parametrize(("lossless", "trim", "mode", "words"), CASES)
def test_recommend(
    lossless: dict[str, object], trim: dict[str, object], mode: str, words: str
) -> None:
    recommended, reason = recommend(_rows(lossless, trim))
    assert recommended == mode
    assert words in reason, reason


def test_notes_say_when_the_paths_differ() -> None:
    assert comparison_notes(_rows({}, {}))
    assert not comparison_notes(_rows({}, {"paths": "flow"}))


# (lossless flow's busbw, lossless spray's, lossy-trim spray's, recommended, words of the
#  reason, words of the paths note): with the lossless control on sprayed paths, the modes
#  are compared on the same paths, and the paths' own part is a note.
CONTROL: list[tuple[float, float, float, str, str, str]] = [
    (20.0, 40.0, 40.2, "lossless", "a tie", "100.0% higher busbw"),
    (20.0, 40.0, 50.0, "lossy-trim", "25.0% higher busbw", "100.0% higher busbw"),
    (40.0, 40.5, 30.0, "lossless", "35.0% higher busbw", "the same busbw"),
    (40.0, 30.0, 45.0, "lossy-trim", "50.0% higher busbw", "25.0% lower busbw"),
]


@pytest.mark.parametrize(("flow", "spray", "trim", "mode", "words", "note"), CONTROL)
def test_recommend_on_the_same_paths(
    flow: float, spray: float, trim: float, mode: str, words: str, note: str
) -> None:
    rows = [
        replace(BASE, busbw_GBps=flow),
        replace(BASE, paths="spray", recovery="selective-repeat", busbw_GBps=spray),
        replace(BASE, mode="lossy-trim", paths="spray", busbw_GBps=trim),
    ]
    recommended, reason = recommend(rows)
    assert recommended == mode
    assert words in reason and reason.endswith("(both on spray paths)"), reason
    (said,) = comparison_notes(rows)
    assert said.startswith("the paths alone:") and note in said, said
