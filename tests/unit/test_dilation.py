"""Time dilation of the lab hosts' DCQCN (agent.observe.probes.dilation), where the factor comes
from
(roce.lab/time-dilation → the fabric file's emulation.time_dilation), and that it changes no
switch configuration."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from agent.errors import IntentError
from agent.intent.loader import load_fabric
from agent.intent.plan import build_plan
from agent.intent.sizing import DCQCN_NIC_UNITS, dcqcn_nic_defaults
from agent.observe.probes.dilation import (
    ALPHA_UPDATE_PERIOD,
    ALPHA_UPDATE_PERIOD_US,
    SCALING,
    Dilation,
    dilate,
)
from agent.observe.probes.receiver import ReceiveSpec
from agent.observe.probes.sender import SendSpec
from lab.addressing import build_plan as build_lab_plan
from lab.topology.loader import load_topology
from lab.topology.model import TopologyError
from lossless.dcqcn import DcqcnReactionPoint, NotificationPoint

REPO = Path(__file__).resolve().parents[2]
LAB_FABRIC = REPO / "playbooks" / "fabrics" / "lab-leafspine.yml"
LEAFSPINE = REPO / "containerlab" / "roce-leafspine.clab.yml"
D = 1000

# parameter, unit, how it scales, why
SCALING_TABLE = [
    ("rpg_time_reset", "us", "time", "rate-increase timer: an interval of the emulated link"),
    ("rate_reduce_monitor_period", "us", "time", "least time between two cuts: an interval"),
    ("min_time_between_cnps", "us", "time", "NP's CNP pacing: an interval"),
    (ALPHA_UPDATE_PERIOD, "us", "time", "alpha timer (55 µs, a model constant): an interval"),
    ("rpg_ai_rate", "Mb/s", "rate", "additive step: a fraction of a factor× slower line rate"),
    ("rpg_hai_rate", "Mb/s", "rate", "hyper step: a fraction of the line rate"),
    ("rpg_min_rate", "Mb/s", "rate", "rate floor: a fraction of the line rate"),
    ("rpg_byte_reset", "bytes", "bytes", "bytes already take factor× longer on the slow link"),
    ("clamp_tgt_rate", "flag", "ratio", "a switch, not a quantity"),
    ("clamp_tgt_rate_after_time_inc", "flag", "ratio", "a switch, not a quantity"),
    ("rpg_gd", "log2", "ratio", "cut = alpha / 2^gd: dimensionless"),
    ("rpg_min_dec_fac", "%", "ratio", "largest cut, a percentage"),
    ("dce_tcp_g", "1/1024", "ratio", "EWMA gain per update: dimensionless"),
    ("initial_alpha_value", "1/1024", "ratio", "alpha on the first CNP: dimensionless"),
    ("cnp_dscp", "code point", "ratio", "a marking, not a quantity"),
    ("cnp_802p_prio", "priority", "ratio", "a marking, not a quantity"),
]


def test_the_table_covers_every_dcqcn_parameter_once() -> None:
    names = [row[0] for row in SCALING_TABLE]
    assert len(names) == len(set(names))
    assert set(names) == set(SCALING) == set(DCQCN_NIC_UNITS) | {ALPHA_UPDATE_PERIOD}


@pytest.mark.parametrize(("name", "unit", "scaling", "why"), SCALING_TABLE)
def test_dilate_scales_each_parameter(name: str, unit: str, scaling: str, why: str) -> None:
    value = {**dcqcn_nic_defaults(), ALPHA_UPDATE_PERIOD: ALPHA_UPDATE_PERIOD_US}[name]
    expected = {"time": value * D, "rate": value / D}.get(scaling, value)
    assert SCALING[name] == scaling, why
    assert dilate({name: value}, D) == {name: pytest.approx(expected)}
    assert dilate({name: value}, 1) == {name: value}  # real time: unchanged
    if name in DCQCN_NIC_UNITS and scaling != "ratio":  # the unit agent.intent.sizing states
        assert DCQCN_NIC_UNITS[name].replace(",", " ").split()[0] == unit


@pytest.mark.parametrize(
    ("params", "factor", "message"),
    [
        ({"rpg_time_rest": 300}, D, "unknown DCQCN parameter 'rpg_time_rest'"),
        ({"rpg_time_reset": 300}, 0.5, "Expected: 1-1000000 Actual: 0.5"),
        ({"rpg_time_reset": 300}, math.nan, "Actual: nan"),
        ({"rpg_time_reset": 300}, 2_000_000, "Actual: 2000000"),
    ],
)
def test_dilate_refuses(params: dict[str, float], factor: float, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        dilate(params, factor)


# What the scaled clock does, observed on the model itself (lossless.dcqcn, untouched): each
# row of dilate() must hold in the lab's wall time and lab rates.
LAB_LINE = 10_000_000  # the lab port (b/s); it stands for D times that


def _lab_reaction() -> tuple[DcqcnReactionPoint, Dilation]:
    dilation = Dilation(D)
    return DcqcnReactionPoint(dilation.model_rate(LAB_LINE), dcqcn_nic_defaults()), dilation


def test_scaled_clock_recovery_timer_steps_at_the_dilated_period() -> None:
    reaction, dilation = _lab_reaction()
    lab = dilation.lab_parameters(dcqcn_nic_defaults())
    reaction.on_cnp(dilation.model_time(0.0))
    after_cut = reaction.current_bps
    period_s = lab["rpg_time_reset"] * 1e-6  # 0.3 s of lab time
    reaction.on_sent(dilation.model_time(period_s * 0.99), 0)
    assert reaction.current_bps == after_cut  # not yet: the real 300 µs passed long ago
    reaction.on_sent(dilation.model_time(period_s * 1.01), 0)
    assert reaction.current_bps > after_cut


def test_scaled_clock_cut_monitor_period_and_cnp_pacing_are_dilated() -> None:
    reaction, dilation = _lab_reaction()
    lab = dilation.lab_parameters(dcqcn_nic_defaults())
    monitor_s = lab["rate_reduce_monitor_period"] * 1e-6  # 4 ms of lab time
    assert reaction.on_cnp(dilation.model_time(1.0))
    assert not reaction.on_cnp(dilation.model_time(1.0 + monitor_s * 0.9))
    assert reaction.on_cnp(dilation.model_time(1.0 + monitor_s * 1.1))
    np = NotificationPoint(dcqcn_nic_defaults()["min_time_between_cnps"])
    gap_s = lab["min_time_between_cnps"] * 1e-6
    assert np.on_ce("qp", dilation.model_time(1.0))
    assert not np.on_ce("qp", dilation.model_time(1.0 + gap_s * 0.9))
    assert np.on_ce("qp", dilation.model_time(1.0 + gap_s * 1.1))


def test_scaled_clock_alpha_timer_is_dilated() -> None:
    reaction, dilation = _lab_reaction()
    period_s = dilation.lab_parameters({})[ALPHA_UPDATE_PERIOD] * 1e-6  # 55 ms of lab time
    reaction.on_cnp(dilation.model_time(0.0))
    alpha = reaction.alpha
    reaction.on_sent(dilation.model_time(period_s * 0.9), 0)
    assert reaction.alpha == alpha
    reaction.on_sent(dilation.model_time(period_s * 1.1), 0)
    assert reaction.alpha < alpha


def test_scaled_rates_additive_step_and_floor_are_divided() -> None:
    # Timer steps only; the paper's target clamp, so the cuts take the target to the floor too.
    params = {**dcqcn_nic_defaults(), "rpg_byte_reset": 1 << 30, "clamp_tgt_rate": 1}
    dilation = Dilation(D)
    reaction = DcqcnReactionPoint(dilation.model_rate(LAB_LINE), params)
    lab = dilation.lab_parameters(params)
    monitor_s = lab["rate_reduce_monitor_period"] * 1e-6
    for cut in range(40):  # cut to the floor, each cut just after the monitor period
        assert reaction.on_cnp(dilation.model_time(cut * monitor_s * 1.01))
    assert dilation.lab_rate(reaction.current_bps) == pytest.approx(lab["rpg_min_rate"] * 1e6)
    period_s = lab["rpg_time_reset"] * 1e-6
    t0 = 39 * monitor_s * 1.01
    for step in range(1, 6):  # fast recovery: target unchanged
        reaction.on_sent(dilation.model_time(t0 + step * period_s * 1.0001), 0)
    target = reaction.target_bps
    reaction.on_sent(dilation.model_time(t0 + 6 * period_s * 1.0001), 0)  # additive step
    assert dilation.lab_rate(reaction.target_bps - target) == pytest.approx(
        lab["rpg_ai_rate"] * 1e6
    )


def test_byte_counter_is_not_dilated() -> None:
    reaction, dilation = _lab_reaction()
    reaction.on_cnp(dilation.model_time(0.0))
    after_cut = reaction.current_bps
    byte_reset = dilation.lab_parameters(dcqcn_nic_defaults())["rpg_byte_reset"]
    assert byte_reset == dcqcn_nic_defaults()["rpg_byte_reset"]
    reaction.on_sent(dilation.model_time(0.001), int(byte_reset) - 1)
    assert reaction.current_bps == after_cut
    reaction.on_sent(dilation.model_time(0.002), 1)
    assert reaction.current_bps > after_cut


def test_probe_specs_refuse_a_bad_factor() -> None:
    with pytest.raises(ValueError, match="time_dilation"):
        SendSpec("eth1", "198.18.0.13", 1000, 10_000, count=1, time_dilation=0)
    with pytest.raises(ValueError, match="time_dilation"):
        ReceiveSpec("eth1", 1.0, 10_000, time_dilation=-1)


# ------------------------------------------------------------------ where the factor lives


def test_the_lab_topology_and_both_fabric_files_carry_the_factor() -> None:
    topology = load_topology(LEAFSPINE)
    assert topology.time_dilation > 1
    lab_plan = build_lab_plan(topology)
    assert lab_plan.topology.time_dilation == topology.time_dilation
    shipped = load_fabric(LAB_FABRIC).intent
    assert shipped.emulation.time_dilation == topology.time_dilation


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('"0"', "Expected: a whole time-dilation factor 1-1000000"),
        ('"fast"', "Actual: 'fast'"),
        ('"1.5"', "Actual: '1.5'"),
        ('"99999999999999"', "Actual: '99999999999999'"),
    ],
)
def test_bad_time_dilation_label_names_file_line_and_field(
    tmp_path: Path, value: str, message: str
) -> None:
    text = LEAFSPINE.read_text().replace(
        'roce.lab/time-dilation: "100"', "roce.lab/time-dilation: " + value
    )
    path = tmp_path / "t.clab.yml"
    path.write_text(text)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "roce.lab/time-dilation" in t)
    with pytest.raises(TopologyError) as caught:
        load_topology(path)
    (problem,) = caught.value.problems
    assert problem.position is not None and problem.position.line == line
    assert problem.field == "topology.defaults.labels.roce.lab/time-dilation"
    assert message in problem.message


def test_time_dilation_label_is_lab_wide_only(tmp_path: Path) -> None:
    text = LEAFSPINE.read_text().replace(
        "labels: {roce.lab/role: spine}",
        'labels: {roce.lab/role: spine, roce.lab/time-dilation: "10"}',
        1,
    )
    path = tmp_path / "t.clab.yml"
    path.write_text(text)
    with pytest.raises(TopologyError, match="lab-wide setting"):
        load_topology(path)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, "greater than or equal to 1"),
        (2_000_000, "less than or equal to 1000000"),
        ("'fast'", "valid integer"),
        ("{factor: 10}", "valid integer"),
    ],
)
def test_bad_emulation_in_the_fabric_file_names_file_line_and_field(
    tmp_path: Path, value: object, message: str
) -> None:
    text = LAB_FABRIC.read_text()
    text = text.replace("emulation:\n  time_dilation: ", "emulation:\n  time_dilation: X#", 1)
    text = text.split("X#", 1)[0] + f"{value}\n" + text.split("X#", 1)[1].split("\n", 1)[1]
    path = tmp_path / "fabric.yml"
    path.write_text(text)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "time_dilation:" in t)
    with pytest.raises(IntentError) as caught:
        load_fabric(path)
    (problem,) = caught.value.problems
    assert problem.field == "emulation.time_dilation"
    assert problem.position is not None and problem.position.line == line
    assert message in problem.message


def test_unknown_emulation_key_is_refused(tmp_path: Path) -> None:
    text = LAB_FABRIC.read_text().replace("emulation:\n", "emulation:\n  speedup: 3\n", 1)
    path = tmp_path / "fabric.yml"
    path.write_text(text)
    with pytest.raises(IntentError, match="speedup"):
        load_fabric(path)


def test_real_fabrics_default_to_real_time() -> None:
    intent = load_fabric(REPO / "playbooks" / "fabrics" / "pod-400g.yml").intent
    assert intent.emulation.time_dilation == 1


def test_the_factor_changes_no_device_configuration(tmp_path: Path) -> None:
    data = yaml.safe_load(LAB_FABRIC.read_text())
    plans = []
    for factor in (1, 1000):
        data["emulation"] = {"time_dilation": factor}
        path = tmp_path / f"f{factor}.yml"
        path.write_text(yaml.safe_dump(data))
        plans.append(build_plan(load_fabric(path).intent))
    assert plans[0] == plans[1]
