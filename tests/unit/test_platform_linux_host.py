"""Linux host NIC platform (mlx5): rendered mlnx_qos/sysfs commands, mlnx_qos parsing, opt-in.

Applying to real hosts is opt-in and not exercised against a host here: no lab NIC exists, so
parsing uses recorded ``mlnx_qos -i IF`` output (fixture headers name the source) and the
transaction tests use a scripted fake connection that records the commands it is sent.

Regenerate the golden files after a reviewed renderer change with:
    .venv/bin/python -c "import tests.unit.test_platform_linux_host as t; t.write_goldens()"
then read the diff of tests/data/platforms/linux_host/*.golden line by line before committing.
"""

from __future__ import annotations

import functools

import pytest

from agent.device.platforms import platform_for
from agent.device.platforms.base import ConfigRejected, PlatformError
from agent.device.platforms.linux_host import LinuxHost
from agent.device.state import diff
from agent.intent.plan import DevicePlan
from tests.unit.platform_helpers import (
    PROFILES,
    ROOT,
    RecordingConnection,
    single_device_plan,
)

DATA = ROOT / "tests" / "data" / "platforms" / "linux_host"
PORTS = [("eth0", "100G", 5), ("eth1", "400G", 30)]


def device_plan(profile: str) -> DevicePlan:
    return single_device_plan(
        "linux_host", PORTS, profile, role="host", name="gpu01", username="ops"
    )


def write_goldens() -> None:
    for profile in PROFILES:
        text = "\n".join(LinuxHost().render(device_plan(profile))) + "\n"
        (DATA / f"{profile}.golden").write_text(text)


def read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


FakeConnection = functools.partial(
    RecordingConnection, "gpu01", refusal_text="% roce-agent: command failed\n"
)


@pytest.mark.parametrize("profile", PROFILES)
def test_render_matches_reviewed_golden(profile: str) -> None:
    rendered = "\n".join(LinuxHost().render(device_plan(profile))) + "\n"
    assert rendered == read(f"{profile}.golden")


@pytest.mark.parametrize(
    ("expected_line"),
    [
        "sudo mlnx_qos -i eth0 --trust dscp",
        "sudo mlnx_qos -i eth0 --pfc 0,0,0,1,0,0,0,0",
        "sudo mlnx_qos -i eth0 --dscp2prio set,26,3",
        "sudo mlnx_qos -i eth0 --dscp2prio set,24,0",
        "echo 1 | sudo tee /sys/class/net/eth1/ecn/roce_rp/enable/3 > /dev/null",
        "echo 1 | sudo tee /sys/class/net/eth1/ecn/roce_np/enable/3 > /dev/null",
        "echo 48 | sudo tee /sys/class/net/eth0/ecn/roce_np/cnp_dscp > /dev/null",
        "echo 6 | sudo tee /sys/class/net/eth0/ecn/roce_np/cnp_802p_prio > /dev/null",
        "echo 4 | sudo tee /sys/class/net/eth0/ecn/roce_np/min_time_between_cnps > /dev/null",
        "echo 300 | sudo tee /sys/class/net/eth0/ecn/roce_rp/rpg_time_reset > /dev/null",
        "echo 1019 | sudo tee /sys/class/net/eth0/ecn/roce_rp/dce_tcp_g > /dev/null",
    ],
)
def test_render_has_nic_settings_on_the_right_side(expected_line: str) -> None:
    assert expected_line in LinuxHost().render(device_plan("nvidia-default"))


def test_configured_nic_diffs_to_nothing() -> None:
    platform = LinuxHost()
    desired = platform.desired(device_plan("nvidia-default"))
    conn = FakeConnection({"mlnx_qos -i": read("mlnx_qos_roce.txt")})
    actual = platform.read_state(conn)
    assert conn.sent == ["mlnx_qos -i eth0", "mlnx_qos -i eth1"]
    assert diff("gpu01", desired, actual, platform.managed) == []


def test_one_wrong_setting_diffs_to_exactly_that_setting() -> None:
    platform = LinuxHost()
    desired = platform.desired(device_plan("nvidia-default"))
    conn = FakeConnection(
        {
            "mlnx_qos -i eth0": read("mlnx_qos_roce.txt"),
            "mlnx_qos -i eth1": read("mlnx_qos_wrong_pfc.txt"),
        }
    )
    found = diff("gpu01", desired, platform.read_state(conn), platform.managed)
    assert [(d.interface, d.setting, d.expected, d.actual) for d in found] == [
        ("eth1", "pfc_priorities", [3], [4])
    ]


def test_nic_defaults_put_dscp_24_in_the_lossless_priority() -> None:
    state = LinuxHost.parse_mlnx_qos(read("mlnx_qos_default.txt"))
    assert state.dscp_to_priority[24] == 3 and state.dscp_to_priority[26] == 3
    assert next(iter(state.interfaces.values())).pfc_enabled is False


def test_transaction_without_opt_in_refuses_and_sends_nothing() -> None:
    conn = FakeConnection()
    platform = platform_for("linux_host")
    with pytest.raises(PlatformError, match="opt-in"), platform.transaction(conn, ["x"], 60):
        pytest.fail("must not apply to a host without the opt-in")
    assert conn.sent == []


def test_opted_in_transaction_applies_and_confirms() -> None:
    platform = LinuxHost(apply_hosts=True)
    platform.desired(device_plan("nvidia-default"))
    conn = FakeConnection({"mlnx_qos -i": read("mlnx_qos_roce.txt")})
    with platform.transaction(conn, ["sudo mlnx_qos -i eth0 --trust dscp"], 60) as txn:
        platform.confirm(conn, txn)
    assert "sudo mlnx_qos -i eth0 --trust dscp || echo '% roce-agent: command failed'" in conn.sent
    assert txn.confirmed and not txn.rolled_back


def test_opted_in_refused_command_restores_the_snapshot() -> None:
    platform = LinuxHost(apply_hosts=True)
    platform.desired(device_plan("nvidia-default"))
    snapshot = "/sys/class/net/eth0/ecn/roce_np/cnp_dscp:26\n"
    conn = FakeConnection(
        {"mlnx_qos -i": read("mlnx_qos_roce.txt"), "sudo grep -r . /sys/class/net/eth0": snapshot},
        refuse="sudo mlnx_qos -i eth0 --pfc",
    )
    with (
        pytest.raises(ConfigRejected),
        platform.transaction(conn, ["sudo mlnx_qos -i eth0 --pfc 0,0,0,1,0,0,0,0"], 60),
    ):
        pytest.fail("the block must not run after a refused command")
    assert "echo 26 | sudo tee /sys/class/net/eth0/ecn/roce_np/cnp_dscp > /dev/null" in conn.sent
    assert "sudo mlnx_qos -i eth0 --trust dscp" in conn.sent
