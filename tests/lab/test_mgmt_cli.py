"""lab.mgmt against a real lab.vswitch: netmiko ``arista_eos`` configures the data plane, shows
return live counters, commit timers roll back, cut sessions change nothing, 20 sessions at
once, ``write memory`` survives a restart of the management process."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import pytest

from tests.lab.support import frames
from tests.lab.support import mgmt as mf
from tests.lab.support import vswitch as fx
from tests.lab.support.polling import wait_until

# The management plane over SSH (commit timers of 2-3 s checked with 5 s of margin): nothing
# here measures a rate, so it runs beside another lab module.
pytestmark = [pytest.mark.lab, pytest.mark.lab_parallel, fx.requires_vswitch_lab]

LOSSLESS = [
    "qos map dscp 26 to traffic-class 3",
    "qos map dscp 48 to traffic-class 6",
    "qos profile ROCE",
    "priority-flow-control on",
    "priority-flow-control priority 3 no-drop",
    "uc-tx-queue 3",
    "bandwidth percent 50",
    "random-detect ecn minimum-threshold 5 kbytes maximum-threshold 20 kbytes "
    "max-mark-probability 50",
    "uc-tx-queue 6",
    "priority strict",
    "interface Ethernet1-3",
    "service-profile ROCE",
    "priority-flow-control pause watchdog default timeout 0.2",
    "priority-flow-control pause watchdog default recovery-time 0.4",
    "priority-flow-control pause watchdog action drop",
]


@pytest.fixture(scope="module")
def switch() -> Iterator[mf.ManagedSwitch]:
    with mf.managed_switch("mgc") as managed:
        yield managed


def test_send_config_set_builds_a_lossless_profile_in_the_data_plane(
    switch: mf.ManagedSwitch,
) -> None:
    with switch.connect(fast_cli=True) as conn:
        output = conn.send_config_set(LOSSLESS)
        assert "% " not in output, output
        qos = switch.dataplane_qos()
        assert qos["dscp_to_tc"] == {"26": 3, "48": 6}
        for port in ("eth1", "eth2", "eth3"):
            assert qos["ports"][port]["pfc_enabled"] is True
            assert qos["ports"][port]["pfc_priorities"] == [3]
            queue3 = qos["ports"][port]["queues"]["3"]
            assert queue3["ecn"] == {"min_bytes": 5120, "max_bytes": 20480, "max_probability": 50}
            assert queue3["bandwidth_percent"] == 50
            assert qos["ports"][port]["queues"]["6"]["strict"] is True
        assert qos["watchdog"]["enabled"] is True and qos["watchdog"]["detection_ms"] == 200

        pfc = json.loads(conn.send_command("show priority-flow-control | json"))
        assert pfc["interfaceStatuses"]["Ethernet2"]["priorities"] == [3]
        maps = json.loads(conn.send_command("show qos maps | json"))
        assert maps["dscpTcMap"]["26"] == 3 and maps["dscpTcMap"]["10"] == 1
        running = conn.send_command("show running-config")
        assert "   service-profile ROCE" in running.splitlines()


def test_show_json_holds_the_live_counters(switch: mf.ManagedSwitch) -> None:
    host1, host2 = switch.topo.host(1), switch.topo.host(2)
    with fx.Rig(switch.topo) as rig:
        raw = rig.raw(host1)
        rig.sink(host2, 4791)
        conn = rig.enter_context(switch.connect())
        conn.send_command("clear counters")
        frame = frames.build_udp(
            host1.mac, host1.switch_mac, host1.ip, host2.ip, 1000, 4791, b"x", dscp=26, size=200
        )
        for _ in range(25):
            raw.send(frame)
        assert wait_until(
            lambda: switch.counters()["ports"]["eth2"]["queues"]["3"]["tx_packets"] == 25, 5
        )
        queues = json.loads(conn.send_command("show interfaces counters queue | json"))
        live = switch.counters()["ports"]["eth2"]["queues"]["3"]
        tc3 = queues["egressQueueCounters"]["interfaces"]["Ethernet2"]["ucastQueues"]
        dp0 = tc3["trafficClasses"]["TC3"]["dropPrecedences"]["DP0"]
        assert dp0["enqueuedPackets"] == live["tx_packets"] == 25
        assert dp0["enqueuedBytes"] == live["tx_bytes"] > 0
        ecn = json.loads(conn.send_command("show qos interfaces ecn counters queue | json"))
        queue_counters = ecn["intfQueueCounters"]["Ethernet2"]["queueCounters"]
        assert queue_counters["3"] == str(live["ecn_marked"])
        assert queue_counters["0"] == "-"  # no ECN configured on queue 0
        drops = json.loads(conn.send_command("show interfaces counters queue drops | json"))
        tc = drops["interfaces"]["Ethernet2"]["trafficClasses"]["TC3"]
        assert tc["egressQueueCounters"]["countersSum"]["droppedPackets"] == 0
        pfc = json.loads(conn.send_command("show priority-flow-control counters | json"))
        assert pfc["interfaceCounters"]["Ethernet1"] == {"rxFrames": 0, "txFrames": 0}
        watchdog = json.loads(
            conn.send_command("show priority-flow-control counters watchdog | json")
        )
        assert watchdog == {"interfaces": {}}


def test_invalid_lines_are_refused_and_reported(switch: mf.ManagedSwitch) -> None:
    before = switch.dataplane_qos()
    with switch.connect() as conn:
        running = conn.send_command("show running-config")
        output = conn.send_config_set(
            [
                "interface Ethernet9",
                "qos map dscp 64 to traffic-class 3",
                "interface Ethernet1",
                "priority-flow-control priority 8 no-drop",
                "uc-tx-queue 1",
                "bandwidth percent 60",  # with queue 3's 50 % the data plane refuses it
            ],
            error_pattern="",
        )
        assert "% Invalid input (at token 1: 'Ethernet9')" in output
        assert "% Invalid input (at token 3: '64')" in output
        assert "% Invalid input (at token 2: '8')" in output
        assert "% Data plane refused the change: invalid qos:" in output
        assert conn.send_command("show running-config") == running
    assert switch.dataplane_qos() == before


def test_commit_timer_expiry_rolls_back_and_confirm_keeps(switch: mf.ManagedSwitch) -> None:
    before = switch.dataplane_qos()
    with switch.connect() as conn:
        conn.send_config_set(
            ["interface Ethernet3", "no service-profile"],
            config_mode_command="configure session timed",
            exit_config_mode=False,
        )
        assert "-   service-profile ROCE" in conn.send_command("show session-config diffs")
        conn.send_command("commit timer 00:00:03", expect_string=r"leaf1#")
        assert "eth3" not in switch.dataplane_qos()["ports"]
        sessions = json.loads(conn.send_command("show configuration sessions | json"))
        assert sessions["sessions"]["timed"]["state"] == "pendingCommitTimer"
        started = time.monotonic()
        assert wait_until(lambda: switch.dataplane_qos() == before, 8), switch.mgmt_log()
        assert time.monotonic() - started >= 2.0
        assert "   service-profile ROCE" in conn.send_command(
            "show running-config section Ethernet3"
        )

        conn.send_config_set(
            ["interface Ethernet3", "description confirmed"],
            config_mode_command="configure session kept",
            exit_config_mode=False,
        )
        conn.send_command("commit timer 00:00:02", expect_string=r"leaf1#")
        conn.send_command("configure session kept commit")
        time.sleep(2.5)
        assert "description confirmed" in conn.send_command("show running-config section Ethernet3")


def test_session_cut_mid_way_leaves_running_config_unchanged(switch: mf.ManagedSwitch) -> None:
    before = switch.dataplane_qos()
    with switch.connect() as watcher:
        running = watcher.send_command("show running-config")
        conn = switch.connect()
        conn.send_config_set(
            ["interface Ethernet2", "no service-profile", "priority-flow-control on"],
            config_mode_command="configure session cut",
            exit_config_mode=False,
        )
        sessions = json.loads(watcher.send_command("show configuration sessions | json"))
        assert sessions["sessions"]["cut"]["state"] == "pending"
        conn.remote_conn.get_transport().close()  # the SSH connection drops, no exit/end

        def released() -> bool:
            # Like EOS, the session stays (pending, no terminal) for whoever cleans it up.
            listing = json.loads(watcher.send_command("show configuration sessions | json"))
            cut = listing["sessions"].get("cut", {})
            return cut.get("state") == "pending" and cut.get("terminal") == ""

        assert wait_until(released, 5), switch.mgmt_log()
        assert watcher.send_command("show running-config") == running
        watcher.send_command("configure session cut abort")
    assert switch.dataplane_qos() == before


def test_twenty_concurrent_netmiko_sessions(switch: mf.ManagedSwitch) -> None:
    errors: list[str] = []
    results: list[float] = []
    lock = threading.Lock()

    def worker(index: int) -> None:
        started = time.monotonic()
        try:
            with switch.connect() as conn:
                version = json.loads(conn.send_command("show version | json"))
                assert version["modelName"] == "LabVSwitch"
                counters = json.loads(
                    conn.send_command("show priority-flow-control counters | json")
                )
                assert "Ethernet1" in counters["interfaceCounters"]
                out = conn.send_config_set(
                    [f"interface Ethernet{index % 3 + 1}", f"description s{index}"]
                )
                assert "%" not in out
        except Exception as exc:  # collected and reported below
            with lock:
                errors.append(f"session {index}: {type(exc).__name__}: {exc}")
            return
        with lock:
            results.append(time.monotonic() - started)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(20)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    elapsed = time.monotonic() - started
    assert not errors, errors
    assert len(results) == 20
    print(f"20 concurrent netmiko sessions: {elapsed:.2f} s wall, slowest {max(results):.2f} s")


def test_write_memory_survives_a_restart(switch: mf.ManagedSwitch) -> None:
    with switch.connect() as conn:
        conn.send_config_set(["interface Ethernet1", "description persisted"])
        saved = conn.save_config()
        assert "Copy completed successfully." in saved
        running = conn.send_command("show running-config")
    expected_qos = switch.dataplane_qos()
    assert switch.stop_mgmt() == 0
    with switch.vswitch.client() as client:  # as if the data plane had been reloaded
        client.set_qos({})
    assert switch.dataplane_qos() != expected_qos
    switch.start_mgmt()
    assert switch.dataplane_qos() == expected_qos
    with switch.connect() as conn:
        assert conn.send_command("show running-config") == running
        assert "description persisted" in conn.send_command("show startup-config")
