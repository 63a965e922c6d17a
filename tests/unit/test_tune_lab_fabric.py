"""``tune`` on the lab's own fabric file: a time-dilated fabric (its 10 Mb/s ports stand for
1 Gb/s) whose probes send 1000-byte payloads under a 30 KB pause threshold.  Before, tune looked
for switch ports at the twin's 1 Gb/s (there are none: the plan's run at 10 Mb/s) and sized
the grid's frame bounds from the 9000-byte MTU (no room below 30 KB)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from agent.app.cli import main
from agent.intent.loader import load_fabric
from agent.intent.plan import build_plan
from agent.twin.tune.fabric import current_ecn
from agent.twin.tune.objectives import ObjectiveSpec
from agent.twin.tune.search import tune

LAB_FABRIC = Path(__file__).resolve().parents[2] / "playbooks" / "fabrics" / "lab-leafspine.yml"
G1 = 1_000_000_000


def test_current_setting_is_found_at_the_speed_the_lab_stands_for() -> None:
    intent = load_fabric(LAB_FABRIC).intent
    plan = build_plan(intent)
    dilation = intent.emulation.time_dilation
    assert dilation == 100
    ecn, pause, _, ports = current_ecn(plan, intent.profile.roce.priority, G1, dilation)
    assert (ecn.min_bytes, ecn.max_bytes, pause) == (6000, 18000, 30000)
    assert ports == 4  # h1-h4 behind the two leaves
    with pytest.raises(Exception, match="no switch port faces a host"):
        current_ecn(plan, intent.profile.roce.priority, G1)  # undilated: none at 1 Gb/s


def test_tune_recommends_for_the_lab_with_its_payload() -> None:
    intent = load_fabric(LAB_FABRIC).intent
    result = tune(
        intent, objective=ObjectiveSpec("queue"), senders=2, duration_s=10e-3, candidates=4,
        seeds=(1,), payload_bytes=1000,
    )  # fmt: skip
    (speed,) = result.speeds
    assert speed.speed_bps == G1
    best = speed.recommended
    assert best is not None and best.feasible
    # The grid's bounds use the 1082-byte frames the hosts send: max <= 30 KB - 2 frames.
    assert best.candidate.ecn.max_bytes <= 30000 - 2 * 1062


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--payload", "1000"], "--payload"),  # the default objective is the collective
        (["--objective", "queue", "--payload", "10"], "--payload"),
    ],
)
def test_bad_payload_exits_2_naming_it(args: list[str], named: str) -> None:
    result = CliRunner().invoke(main, ["tune", str(LAB_FABRIC), *args])
    assert result.exit_code == 2, result.output
    assert named in result.output
