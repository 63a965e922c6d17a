"""lossless.watchdog: PFC storm detection, mitigation per action, restoration.

Sources: SONiC PFC watchdog ("detect if a lossless queue is receiving a PFC storm from its
link partner and is in a paused state over T0 time ... If no PFC frame is received over the
T1 period, then the PFC storm restoration re-enables the PFC on the queue and stops dropping
packets if the mitigation action was drop", Netberg SONiC "PFC (Priority Flow Control)
Watchdog"; actions drop / forward / alert, sonic-swss PfcWdOrch); EOS ``priority-flow-control
pause watchdog`` timeout / polling-interval / recovery-time / action drop|no-drop (Arista TOI
"PFC Watchdog").  The owner (the lab switch) clears the pause and flushes the queue when told;
the harness below does the same.
"""

from __future__ import annotations

from typing import Literal

import pytest

from lossless.config import WatchdogConfig
from lossless.pfc import ReceivedPause
from lossless.watchdog import OPERATIONAL, STORMED, PortWatchdog

SPEED = 10e6  # XOFF 0xFFFF lasts 3.36 s: one frame holds the class paused for the whole run
TC = 3
Action = Literal["drop", "forward", "alert"]


def _run(
    action: Action,
    xoffs: list[float],
    polls: list[float],
    queued: bool = True,
    enabled: bool = True,
) -> tuple[PortWatchdog, list[tuple[float, bool]]]:
    """Feed XOFFs (times) and polls (times) in time order; returns the events seen."""
    config = WatchdogConfig(
        enabled=enabled, detection_ms=200, restoration_ms=400, polling_ms=100, action=action
    )
    watchdog = PortWatchdog(config, 0.0)
    pause = ReceivedPause(SPEED)
    pause.configure([True] * 8)
    events: list[tuple[float, bool]] = []
    timeline = sorted([(t, "xoff") for t in xoffs] + [(t, "poll") for t in polls])
    for at, what in timeline:
        if what == "xoff":
            pause.receive(TC, 0xFFFF, at, watchdog.override_pause[TC])
            continue
        for event in watchdog.poll(at, pause, [queued and tc == TC for tc in range(8)]):
            events.append((at, event.detected))
            if event.detected and watchdog.override_pause[event.priority]:
                pause.clear(event.priority)
    return watchdog, events


POLLS = [round(0.1 * k, 1) for k in range(1, 21)]  # every 100 ms for 2 s

# (action, XOFF times, queued, expected events (time, detected?))
STORMS: list[tuple[str, Action, list[float], bool, list[tuple[float, bool]]]] = [
    (
        "paused with packets queued for the timeout: storm; restored once XOFFs stop",
        "drop",
        [0.0],
        True,
        [(0.2, True), (0.4, False)],
    ),
    (
        "XOFFs keep coming: no restoration until restoration_ms after the last",
        "drop",
        [0.0, 0.25, 0.55, 0.85],
        True,
        [(0.2, True), (1.3, False)],
    ),
    (
        "nothing queued: a pause is not a storm",
        "drop",
        [0.0],
        False,
        [],
    ),
    (
        "forward (EOS no-drop) detects and restores the same way",
        "forward",
        [0.0, 0.25],
        True,
        [(0.2, True), (0.7, False)],
    ),
]


@pytest.mark.parametrize(
    ("action", "xoffs", "queued", "expected"),
    [row[1:] for row in STORMS],
    ids=[row[0] for row in STORMS],
)
def test_detection_and_restoration(
    action: Action, xoffs: list[float], queued: bool, expected: list[tuple[float, bool]]
) -> None:
    watchdog, events = _run(action, xoffs, POLLS, queued)
    assert events == expected
    stats = watchdog.classes[TC]
    assert (stats.storms_detected, stats.storms_restored) == (
        sum(1 for _, d in expected if d),
        sum(1 for _, d in expected if not d),
    )


# Mitigation per action while stormed: (action, ignores pause?, drops traffic?).
MITIGATION: list[tuple[Action, bool, bool]] = [
    ("drop", True, True),
    ("forward", True, False),
    ("alert", False, False),
]


@pytest.mark.parametrize(("action", "override", "drop"), MITIGATION)
def test_mitigation_per_action(action: Action, override: bool, drop: bool) -> None:
    watchdog, events = _run(action, [0.0], [0.1, 0.2])
    assert events == [(0.2, True)]
    assert watchdog.classes[TC].state == STORMED
    assert (watchdog.override_pause[TC], watchdog.drop_traffic[TC]) == (override, drop)
    assert not any(
        watchdog.override_pause[tc] or watchdog.drop_traffic[tc] for tc in range(8) if tc != TC
    )


def test_detected_within_timeout_plus_one_polling_interval() -> None:
    # The pause starts between two polls: declared at the first poll >= 200 ms after it.
    _, events = _run("drop", [0.05], POLLS)
    assert events[0] == (0.3, True)


def test_disabled_watchdog_never_acts() -> None:
    watchdog, events = _run("drop", [0.0], POLLS, enabled=False)
    assert events == [] and watchdog.classes[TC].state == OPERATIONAL


def test_disabling_restores_a_stormed_class() -> None:
    watchdog, _ = _run("drop", [0.0], [0.1, 0.2])
    assert watchdog.reconfigure(WatchdogConfig(enabled=False), 0.25) == [TC]
    assert watchdog.classes[TC].state == OPERATIONAL
    assert not watchdog.override_pause[TC] and not watchdog.drop_traffic[TC]


def test_changing_the_action_applies_to_a_stormed_class() -> None:
    watchdog, _ = _run("drop", [0.0], [0.1, 0.2])
    assert watchdog.reconfigure(WatchdogConfig(enabled=True, action="forward"), 0.25) == []
    assert (watchdog.override_pause[TC], watchdog.drop_traffic[TC]) == (True, False)
    assert watchdog.next_poll == pytest.approx(0.35)
