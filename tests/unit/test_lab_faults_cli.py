"""``roce-agent lab fault``: target parsing, what each kind does where, and bad input (no root).

The lab's ``state.json`` here is the one ``lab up`` would write for
containerlab/roce-leafspine.clab.yml (same code, nothing started); what the faults do to a
running lab is in tests/lab/test_lab_faults_lab.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from lab.cli import group
from lab.fault_registry import FaultError, stop_fault_processes
from lab.faults import LabFaults, check_parameters, interface_trust

REPO = Path(__file__).resolve().parents[2]
LEAFSPINE = REPO / "containerlab" / "roce-leafspine.clab.yml"


def _vswitch(switch: str, **fault: Any) -> list[dict[str, Any]]:
    return [{"type": "vswitch", "switch": switch, "fault": fault}]


# kind, target, parameters, the actions planned (the switch side of C1, the link, the CLI...)
PLANS: list[tuple[str, str, dict[str, Any], list[dict[str, Any]]]] = [
    # loss: on the switch end of the direction — tx leaving a switch, rx entering one
    (
        "loss",
        "leaf1:eth1>spine1",
        {"percent": 5},
        _vswitch("leaf1", kind="drop", direction="tx", percent=5, seed=1, port="eth1"),
    ),
    (  # the fabric's (and locate's) spelling of the same port
        "loss",
        "leaf1:Ethernet1>spine1",
        {"percent": 5},
        _vswitch("leaf1", kind="drop", direction="tx", percent=5, seed=1, port="eth1"),
    ),
    (
        "loss",
        "h1>leaf1",
        {"percent": 50, "seed": 7},
        _vswitch("leaf1", kind="drop", direction="rx", percent=50, seed=7, port="eth3"),
    ),
    (
        "loss",
        "h1:eth1>leaf1",
        {"percent": 1},
        _vswitch("leaf1", kind="drop", direction="rx", percent=1, seed=1, port="eth3"),
    ),
    (
        "loss",
        "spine2>leaf2",
        {"percent": 2},
        _vswitch("spine2", kind="drop", direction="tx", percent=2, seed=1, port="eth2"),
    ),
    # corrupt: FCS at a receiving switch, ICRC towards a host
    (
        "corrupt",
        "spine1:eth1>leaf1",
        {"percent": 10},
        _vswitch("leaf1", kind="fcs_error", percent=10, seed=1, port="eth1"),
    ),
    (
        "corrupt",
        "h3>leaf2",
        {"percent": 10},
        _vswitch("leaf2", kind="fcs_error", percent=10, seed=1, port="eth3"),
    ),
    (
        "corrupt",
        "leaf2:eth4>h4",
        {"percent": 10},
        _vswitch("leaf2", kind="icrc_error", percent=10, seed=1, port="eth4"),
    ),
    (
        "icrc",
        "leaf1:eth2>spine2",
        {"percent": 3},
        _vswitch("leaf1", kind="icrc_error", percent=3, seed=1, port="eth2"),
    ),
    ("latency", "leaf1:eth3>h1", {"ms": 20}, _vswitch("leaf1", kind="delay", ms=20, port="eth3")),
    ("ignore-pfc", "leaf1:eth3", {}, _vswitch("leaf1", kind="ignore_pfc", port="eth3")),
    # the fabric's RoCE class (nvidia-default: DSCP 26, priority 3) unless told otherwise
    (
        "asic-misclassify",
        "leaf1:eth3",
        {},
        _vswitch("leaf1", kind="classify", dscp=26, tc=0, port="eth3"),
    ),
    (
        "asic-misclassify",
        "spine1:eth2",
        {"dscp": 10, "tc": 5},
        _vswitch("spine1", kind="classify", dscp=10, tc=5, port="eth2"),
    ),
    # down: in the switch namespace, whichever end is named
    (
        "down",
        "leaf1:eth1",
        {},
        [
            {
                "type": "link_down",
                "node": "leaf1",
                "netns": "clab-flt-leaf1",
                "ifname": "eth1",
                "link": ["leaf1:eth1", "spine1:eth1"],
            }
        ],
    ),
    (
        "down",
        "h2:eth1",
        {},
        [
            {
                "type": "link_down",
                "node": "leaf1",
                "netns": "clab-flt-leaf1",
                "ifname": "eth4",
                "link": ["h2:eth1", "leaf1:eth4"],
            }
        ],
    ),
    (
        "misclassify",
        "leaf2:eth3",
        {},
        [{"type": "trust", "switch": "leaf2", "interface": "Ethernet3", "set": "qos trust cos"}],
    ),
    (
        "storm",
        "h3",
        {},
        [
            {
                "type": "process",
                "node": "h3",
                "netns": "clab-flt-h3",
                "ifname": "eth1",
                "priority": 3,
            }
        ],
    ),
]


@pytest.mark.parametrize(("kind", "target", "params", "actions"), PLANS)
def test_each_kind_is_planned_on_the_right_element(
    state_dir: Path, kind: str, target: str, params: dict[str, Any], actions: list[dict[str, Any]]
) -> None:
    fault = LabFaults(state_dir).plan(kind, target, **params)
    assert (fault.id, fault.kind, fault.target) == ("f1", kind, target)
    assert fault.actions == actions
    assert not (state_dir / "faults.json").exists()  # planning applies nothing


# arguments after `fault add`, what the one-line error must say
BAD_ADDS: list[tuple[list[str], str]] = [
    (["flap", "leaf1:eth1"], "kind: unknown fault kind 'flap'. Expected: one of loss, corrupt"),
    (
        ["loss", "leaf9:eth1>spine1", "--percent", "5"],
        "target 'leaf9:eth1>spine1': unknown node 'leaf9'",
    ),
    (
        ["loss", "leaf1:eth9>spine1", "--percent", "5"],
        "leaf1 has no port 'eth9'. Expected: one of eth1, eth2, eth3, eth4",
    ),
    (
        ["loss", "leaf1:eth3>spine1", "--percent", "5"],
        "leaf1:eth3 leads to h1:eth1, not spine1. Expected: leaf1:eth3>h1",
    ),
    (["loss", "h1>leaf2", "--percent", "5"], "target 'h1>leaf2': h1 has no link to leaf2"),
    (
        ["loss", "leaf1:eth1", "--percent", "5"],
        "loss needs a link direction like leaf1:eth3>spine1 or h1>leaf1. Actual: a port",
    ),
    (["loss", "leaf1:eth1>spine1"], "--percent: loss needs it"),
    (
        ["loss", "leaf1:eth1>spine1", "--percent", "0"],
        "'--percent': Expected: 0 < x <= 100 Actual: 0",
    ),
    (
        ["loss", "leaf1:eth1>spine1", "--percent", "100.5"],
        "'--percent': Expected: 0 < x <= 100 Actual: 100.5",
    ),
    (
        ["loss", "leaf1:eth1>spine1", "--percent", "nan"],
        "'--percent': Expected: a finite number Actual: 'nan'",
    ),
    (
        ["loss", "leaf1:eth1>spine1", "--percent", "5", "--delay", "3ms"],
        "--delay: does not apply to loss. Expected: --percent, --seed",
    ),
    (
        ["latency", "leaf1:eth1>spine1", "--delay", "0ms"],
        "'--delay': Expected: more than 0 and at most 1s Actual: '0ms'",
    ),
    (
        ["latency", "leaf1:eth1>spine1", "--delay", "1000.1ms"],
        "'--delay': Expected: more than 0 and at most 1s Actual: '1000.1ms'",
    ),
    (
        ["latency", "leaf1:eth1>spine1", "--delay", "5"],
        "'--delay': Expected: a duration with its unit",
    ),
    (
        # the old option name still answers, and says what changed
        ["latency", "leaf1:eth1>spine1", "--ms", "5"],
        "'--ms': Expected: a duration with its unit",
    ),
    (
        ["latency", "h1>leaf1", "--delay", "5ms"],
        "latency acts on a switch egress and h1 is a host. Expected: a direction leaving a "
        "switch port, like leaf1:eth3>h1",
    ),
    (["icrc", "h2>leaf1", "--percent", "5"], "icrc acts on a switch egress and h2 is a host"),
    (
        ["misclassify", "h1:eth1"],
        "misclassify needs a switch port; h1 is a host. Expected: its peer leaf1:eth3",
    ),
    (
        ["ignore-pfc", "h4:eth1"],
        "ignore-pfc needs a switch port; h4 is a host. Expected: its peer leaf2:eth4",
    ),
    (["ignore-pfc", "leaf1"], "ignore-pfc needs a switch port like leaf1:eth3. Actual: a node"),
    (
        ["asic-misclassify", "leaf1:eth3", "--dscp", "64"],
        "--dscp: Expected: a DSCP from 0 to 63. Actual: 64",
    ),
    (
        ["asic-misclassify", "leaf1:eth3", "--tc", "8"],
        "--tc: Expected: a traffic class from 0 to 7. Actual: 8",
    ),
    (["storm", "leaf1"], "target 'leaf1': storm needs a host; leaf1 is a switch"),
    (["storm", "h1:eth1"], "storm needs a host like h1. Actual: a port"),
    (
        ["down", "leaf1:eth1>spine1"],
        "down needs a link named by one of its ends, like leaf1:eth1. Actual: a link direction",
    ),
    (
        ["down", "leaf1:eth1", "--percent", "5"],
        "--percent: does not apply to down. Expected: no parameters",
    ),
    (["loss", "", "--percent", "5"], "target '': Expected: a link direction"),
]


@pytest.mark.parametrize(("args", "message"), BAD_ADDS)
def test_bad_input_exits_2_naming_what_and_applies_nothing(
    state_dir: Path, args: list[str], message: str
) -> None:
    before = (state_dir / "state.json").read_text()
    result = CliRunner().invoke(group, ["fault", "add", *args, "--state-dir", str(state_dir)])
    assert result.exit_code == 2, result.output
    if message.startswith("'--"):  # an option click refuses itself (FiniteFloat), as elsewhere
        assert f"Error: Invalid value for {message}" in result.output, result.output
        assert "Traceback" not in result.output
    else:
        assert result.output.startswith("error: "), result.output
        assert message in result.output
        assert result.output.count("\n") == 1  # one line, no traceback
    assert not (state_dir / "faults.json").exists()
    assert (state_dir / "state.json").read_text() == before


def test_remove_of_an_unknown_id_names_the_known_ones(state_dir: Path) -> None:
    registry = {
        "schema": 1,
        "next_id": 3,
        "faults": [
            {"id": "f2", "kind": "ignore-pfc", "target": "leaf1:eth3", "params": {}, "actions": []}
        ],
    }
    (state_dir / "faults.json").write_text(json.dumps(registry))
    result = CliRunner().invoke(group, ["fault", "remove", "f9", "--state-dir", str(state_dir)])
    assert result.exit_code == 2
    assert result.output == "error: fault 'f9': no such fault. Expected: one of f2\n"
    assert json.loads((state_dir / "faults.json").read_text()) == registry


def test_a_second_identical_fault_is_refused(state_dir: Path) -> None:
    registry = {
        "schema": 1,
        "next_id": 2,
        "faults": [LabFaults(state_dir).plan("corrupt", "leaf1:eth3>h1", percent=5).to_json()],
    }
    (state_dir / "faults.json").write_text(json.dumps(registry))
    # icrc on the same egress is the same data-plane fault, whatever the percentage
    with pytest.raises(FaultError, match=r"already injected there as f1 \(corrupt leaf1:eth3>h1\)"):
        LabFaults(state_dir).plan("icrc", "leaf1:eth3>h1", percent=50)
    assert LabFaults(state_dir).plan("loss", "leaf1:eth3>h1", percent=5).id == "f2"


@pytest.mark.parametrize(
    ("contents", "message"),
    [
        ("{", "cannot read the fault registry"),
        ('{"schema": 9, "faults": []}', "is not a fault registry this version understands"),
        ('{"schema": 1, "faults": [{}]}', "malformed fault registry"),
    ],
)
def test_a_damaged_registry_is_a_located_error(
    state_dir: Path, contents: str, message: str
) -> None:
    (state_dir / "faults.json").write_text(contents)
    result = CliRunner().invoke(group, ["fault", "list", "--state-dir", str(state_dir)])
    assert result.exit_code == 2
    assert str(state_dir / "faults.json") in result.output and message in result.output


def test_no_lab_is_an_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(group, ["fault", "list", "--state-dir", str(tmp_path / "none")])
    assert result.exit_code == 2
    assert result.output.startswith("error: no lab state in")


def test_list_of_a_lab_without_faults(state_dir: Path) -> None:
    result = CliRunner().invoke(group, ["fault", "list", "--state-dir", str(state_dir)])
    assert (result.exit_code, result.output) == (0, "no faults\n")
    result = CliRunner().invoke(
        group, ["fault", "list", "-o", "json", "--state-dir", str(state_dir)]
    )
    assert (result.exit_code, json.loads(result.output)) == (0, [])


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({"percent": 5}, {"percent": 5, "seed": 1}),
        ({"percent": 100, "seed": 0}, {"percent": 100, "seed": 0}),
        ({"percent": 0.01, "ms": None}, {"percent": 0.01, "seed": 1}),
    ],
)
def test_parameters_that_apply_are_kept_and_seed_defaults(
    given: dict[str, Any], expected: dict[str, Any]
) -> None:
    assert check_parameters("loss", given) == expected


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"percent": True}, "--percent: Expected: a number. Actual: True"),
        ({"percent": "5"}, "--percent: Expected: a number. Actual: '5'"),
        ({"percent": 5, "seed": 1.5}, "--seed: Expected: a whole number. Actual: 1.5"),
        ({"percent": 5, "colour": 1}, "loss: unknown parameter 'colour'"),
    ],
)
def test_the_python_api_checks_types(given: dict[str, Any], message: str) -> None:
    with pytest.raises(FaultError, match=rf"^{message}"):
        check_parameters("loss", given)


RUNNING = """\
hostname leaf1
!
interface Ethernet1
   qos trust dscp
!
interface Ethernet3
   priority-flow-control on
   no qos trust
!
interface Ethernet4
   priority-flow-control on
"""


@pytest.mark.parametrize(
    ("interface", "line"),
    [
        ("Ethernet1", "qos trust dscp"),
        ("Ethernet3", "no qos trust"),
        ("Ethernet4", None),
        ("Ethernet2", None),
    ],
)
def test_the_previous_trust_is_read_from_the_running_config(
    interface: str, line: str | None
) -> None:
    assert interface_trust(RUNNING, interface) == line


def test_lab_down_ends_only_recorded_fault_processes_still_running_what_was_started(
    tmp_path: Path,
) -> None:
    import subprocess
    import sys

    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        process = {"type": "process", "node": "h1", "netns": "x", "ifname": "eth1", "priority": 3}
        records = [
            {**process, "pid": sleeper.pid, "argv": sleeper.args, "launcher": []},
            # a recycled PID: the process there is not what the fault started
            {
                **process,
                "pid": other.pid,
                "argv": ["python", "-m", "lab.faults_storm"],
                "launcher": [],
            },
        ]
        faults = [
            {"id": f"f{i}", "kind": "storm", "target": "h1", "params": {}, "actions": [r]}
            for i, r in enumerate(records, start=1)
        ]
        (tmp_path / "faults.json").write_text(
            json.dumps({"schema": 1, "next_id": 3, "faults": faults})
        )
        stopped = stop_fault_processes(tmp_path)
        assert [(s["node"], s["pid"], s["how"]) for s in stopped] == [
            ("fault f1", sleeper.pid, "SIGTERM"),
            ("fault f2", other.pid, "not-ours"),
        ]
        assert sleeper.poll() is not None and other.poll() is None
    finally:
        for proc in (sleeper, other):
            proc.kill()
            proc.wait()
