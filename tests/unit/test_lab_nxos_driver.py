"""The agent's NX-OS driver (agent/device/platforms/cisco_nxos.py) against the lab's NX-OS
switch over real SSH on loopback: netmiko's ``cisco_nxos`` session, the SCP upload to
bootflash:, ``configure replace`` with its commit timer, checkpoints.

1. Every profile applies (checkpoint, the whole configuration to bootflash:, configure
   replace, commit, save) and reads back with no drift; profiles in turn converge; nothing is
   left behind (checkpoint, file, timer) and nothing is unsaved.
2. A hand change on the switch's CLI is drift; leaving without a confirm, a refused replace
   and a pending change found later each end where they must.
3. Counters, LLDP and the interface table read from the lab's answers as the driver and
   ``discover`` read them.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from agent.device import lldp
from agent.device.platforms.base import ConfigRejected, PlatformError
from agent.device.platforms.cisco_nxos import CiscoNxos
from agent.device.state import QosState, diff
from agent.intent.plan import DevicePlan
from tests.unit.lab_nxos_support import SshNxos, ssh_nxos
from tests.unit.platform_helpers import PROFILES, single_device_plan

DRIVER = CiscoNxos()
NAME = "roce-agent-20261123-101000-042"


def plan(profile: str) -> DevicePlan:
    ports: list[tuple[str, str, float]] = [("Ethernet1/1", "10M", 5), ("Ethernet1/2", "10M", 30)]
    return single_device_plan("cisco_nxos", ports, profile)


def push(nxos: SshNxos, device: DevicePlan) -> list[str]:
    """What the agent's push does: read, diff, render the changes, apply, confirm."""
    conn = nxos.conn
    lines = DRIVER.render_changes(DRIVER.desired(device), DRIVER.read_state(conn))
    with DRIVER.transaction(conn, lines, 60, NAME) as txn:
        DRIVER.confirm(conn, txn)
    return lines


def drift(nxos: SshNxos, device: DevicePlan) -> list[tuple[str, str, Any]]:
    found = diff("leaf1", DRIVER.desired(device), DRIVER.read_state(nxos.conn), DRIVER.managed)
    return [(d.interface, d.setting, d.actual) for d in found]


def left_behind(nxos: SshNxos) -> dict[str, Any]:
    personality = nxos.personality
    return {
        "checkpoints": list(personality.rollbacks.checkpoints),
        "files": [name for name, _, _ in personality.bootflash.listing()],
        "timer": personality.rollbacks.pending is not None,
    }


NOTHING = {"checkpoints": [], "files": [], "timer": False}


@pytest.mark.parametrize("profile", PROFILES)
def test_every_profile_applies_reads_back_and_leaves_nothing_behind(
    tmp_path: Path, profile: str
) -> None:
    with ssh_nxos(tmp_path) as nxos:
        device = plan(profile)
        lines = push(nxos, device)
        assert lines and drift(nxos, device) == []
        assert left_behind(nxos) == NOTHING
        assert DRIVER.unsaved(nxos.conn) == []
        sent = nxos.conn.sent
        replace = next(
            i for i, c in enumerate(sent) if c.startswith("configure replace bootflash:")
        )
        assert sent[sent.index(f"checkpoint {NAME}") + 1] == "show running-config"
        assert sent[replace] == f"configure replace bootflash:{NAME}.cfg commit-timeout 60"
        assert sent[replace + 1] == f"configure replace commit ; no checkpoint {NAME}"
        assert sent[replace + 2] == "copy running-config startup-config"
        assert not any(c.startswith("configure terminal") for c in sent)


def test_profiles_in_turn_converge(tmp_path: Path) -> None:
    with ssh_nxos(tmp_path) as nxos:
        for profile in [*PROFILES, PROFILES[0]]:
            push(nxos, plan(profile))
            assert drift(nxos, plan(profile)) == [], profile
        assert push(nxos, plan(PROFILES[0])) == []  # nothing left to change


def test_the_factory_state_can_be_put_back(tmp_path: Path) -> None:
    """What the fault drill's reset does: the state read before the profile, pushed again
    (untrusted ports, no lossless priority, no watchdog)."""
    with ssh_nxos(tmp_path) as nxos:
        conn = nxos.conn
        factory = DRIVER.read_state(conn)
        assert factory.trust == "none" and not factory.watchdog.enabled
        push(nxos, plan("nvidia-default"))
        lines = DRIVER.render_changes(factory, DRIVER.read_state(conn))
        with DRIVER.transaction(conn, lines, 60, NAME) as txn:
            DRIVER.confirm(conn, txn)
        assert diff("leaf1", factory, DRIVER.read_state(conn), DRIVER.managed) == []
        ports = nxos.thread.dataplane.config["qos"]["ports"]
        assert all(p.get("trust") == "none" and not p["pfc_enabled"] for p in ports.values())


def test_a_hand_change_on_the_cli_is_drift_and_a_push_repairs_it(tmp_path: Path) -> None:
    with ssh_nxos(tmp_path) as nxos:
        device = plan("nvidia-default")
        push(nxos, device)
        outputs = nxos.cli(
            "configure terminal",
            "interface ethernet 1/2",
            "no priority-flow-control mode on",
            "end",
        )
        assert not [o for o in outputs if o.startswith("%")]
        assert drift(nxos, device) == [
            ("Ethernet1/2", "pfc_enabled", False),
            ("Ethernet1/2", "pfc_priorities", []),
        ]
        assert push(nxos, device)
        assert drift(nxos, device) == []


def test_leaving_without_confirm_rolls_back_now_and_stops_the_timer(tmp_path: Path) -> None:
    with ssh_nxos(tmp_path) as nxos:
        conn = nxos.conn
        before = DRIVER.read_state(conn)
        lines = DRIVER.render_changes(DRIVER.desired(plan("nvidia-default")), before)
        with DRIVER.transaction(conn, lines, 60, NAME) as txn:
            assert nxos.personality.rollbacks.pending is not None  # live under the timer
            [session] = DRIVER.read_sessions(conn)
            assert (session.live, session.rolls_back) == (True, True)
        assert txn.rolled_back
        assert diff("leaf1", before, DRIVER.read_state(conn), DRIVER.managed) == []
        assert left_behind(nxos) == NOTHING


def test_a_refused_replace_changes_nothing_and_cleans_up(tmp_path: Path) -> None:
    with ssh_nxos(tmp_path) as nxos:
        conn = nxos.conn
        before = DRIVER.read_state(conn)
        lines = ["interface Ethernet1/1", "  priority-flow-control mode sometimes"]
        with (
            pytest.raises(ConfigRejected, match=r"configure replace .* failed: .*line"),
            DRIVER.transaction(conn, lines, 60, NAME),
        ):
            pytest.fail("the block must not run after a refused replace")
        assert diff("leaf1", before, DRIVER.read_state(conn), DRIVER.managed) == []
        assert left_behind(nxos) == NOTHING


def _staged(nxos: SshNxos, replaced: bool) -> QosState:
    """A change left as an agent that died leaves it: checkpoint, file, and maybe the replace."""
    conn = nxos.conn
    before = DRIVER.read_state(conn)
    txn_lines = DRIVER.render_changes(DRIVER.desired(plan("nvidia-default")), before)
    from agent.device.platforms.base import Transaction

    txn = Transaction(NAME, txn_lines)
    DRIVER.begin(conn, txn)
    DRIVER.stage(conn, txn)
    if replaced:
        DRIVER.commit(conn, txn, 60)
    return before


@pytest.mark.parametrize(
    ("replaced", "state", "live"),
    [(True, "configure replace commit timer running", True), (False, "nothing of it runs", False)],
)
def test_a_change_left_behind_reads_as_what_runs(
    tmp_path: Path, replaced: bool, state: str, live: bool
) -> None:
    with ssh_nxos(tmp_path) as nxos:
        before = _staged(nxos, replaced)
        [session] = DRIVER.read_sessions(nxos.conn)
        assert (session.name, session.state, session.live, session.user) == (
            NAME,
            state,
            live,
            "admin",
        )
        DRIVER.abort_session(nxos.conn, session)  # roll back a live one, else only clean up
        assert diff("leaf1", before, DRIVER.read_state(nxos.conn), DRIVER.managed) == []
        assert DRIVER.read_sessions(nxos.conn) == [] and left_behind(nxos) == NOTHING


def test_confirming_a_change_left_behind_keeps_it_and_saves_it(tmp_path: Path) -> None:
    with ssh_nxos(tmp_path) as nxos:
        _staged(nxos, replaced=True)
        [session] = DRIVER.read_sessions(nxos.conn)
        DRIVER.confirm_session(nxos.conn, session)
        assert drift(nxos, plan("nvidia-default")) == []
        assert left_behind(nxos) == NOTHING and DRIVER.unsaved(nxos.conn) == []


def test_a_switch_without_scp_fails_the_change_before_anything_runs(tmp_path: Path) -> None:
    with ssh_nxos(tmp_path) as nxos:
        files = nxos.personality.bootflash.directory
        assert files is not None
        shutil.rmtree(files)
        files.write_text("")  # a file where the directory was: nothing can be written there
        before = DRIVER.read_state(nxos.conn)
        lines = DRIVER.render_changes(DRIVER.desired(plan("nvidia-default")), before)
        try:
            with (
                pytest.raises(PlatformError, match="over SCP failed"),
                DRIVER.transaction(nxos.conn, lines, 60, NAME),
            ):
                pytest.fail("nothing may run without the file")
        finally:
            files.unlink()
        assert diff("leaf1", before, DRIVER.read_state(nxos.conn), DRIVER.managed) == []
        assert list(nxos.personality.rollbacks.checkpoints) == []


def test_counters_read_what_the_data_plane_counted(tmp_path: Path) -> None:
    with ssh_nxos(tmp_path) as nxos:
        push(nxos, plan("nvidia-default"))
        queue = {
            "tx_packets": 11, "tx_bytes": 12000, "tail_drops": 2, "ecn_marked": 5,
            "watchdog": {"state": "stormed", "storms_detected": 3, "storms_restored": 2,
                         "dropped_packets": 4},
        }  # fmt: skip
        pfc = {"rx_xoff": [0, 0, 0, 7, 0, 0, 0, 0], "rx_xon": [0, 0, 0, 1, 0, 0, 0, 0],
               "tx_xoff": [0, 0, 0, 9, 0, 0, 0, 0], "tx_xon": [0] * 8}  # fmt: skip
        nxos.thread.dataplane.counters_snapshot = {
            "ports": {"eth1": {"pfc": pfc, "queues": {"3": queue}, "oper_up": True}}
        }
        counters = DRIVER.read_counters(nxos.conn).interfaces["Ethernet1/1"]
        assert counters.pfc_rx[3] == 8 and counters.pfc_tx[3] == 9
        q3 = counters.queues[3]
        assert (q3.tx_packets, q3.tx_bytes, q3.dropped_packets, q3.ecn_marked_packets) == (
            11,
            12000,
            6,
            5,
        )
        assert counters.watchdog[3].model_dump() == {
            "storms_detected": 3,
            "storms_restored": 2,
            "stormed": True,
        }


def test_link_health_reads_the_errors_the_data_plane_counted(tmp_path: Path) -> None:
    with ssh_nxos(tmp_path) as nxos:
        nxos.thread.dataplane.counters_snapshot = {
            "ports": {
                "eth1": {"oper_up": True, "rx_fcs_errors": 7, "rx_errors": 9},
                "eth2": {"oper_up": False},
            }
        }
        health = DRIVER.read_link_health(nxos.conn)
        assert {n: (h.up, h.fcs_errors, h.in_errors) for n, h in health.items()} == {
            "Ethernet1/1": (True, 7, 9),
            "Ethernet1/2": (False, 0, 0),
            "Ethernet1/3": (True, 0, 0),
        }


def test_discover_reads_the_lldp_neighbours_and_the_ports(tmp_path: Path) -> None:
    with ssh_nxos(tmp_path) as nxos:
        found = lldp.read(nxos.conn, "cisco_nxos")
        assert found.name == "leaf1"
        assert [(n.local_port, n.system_name, n.port, n.forwards) for n in found.neighbors] == [
            ("Ethernet1/1", "h1", "eth1", False),
            ("Ethernet1/2", "spine1", "Ethernet1", True),
        ]
        assert {n: (p.speed_bps, p.mtu) for n, p in found.ports.items()} == {
            f"Ethernet1/{i}": (10_000_000, 9100) for i in (1, 2, 3)
        }
