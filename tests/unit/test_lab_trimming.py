"""Packet trimming pushed by the agent's drivers to the lab's SONiC and NVUE personalities
(issue #47): each accepts the NOS's trimming configuration (SONiC's sonic-trimming.yang,
Cumulus' packet-trim commands), the driver reads it back with no drift, and a hand change is
found as drift. The lab's data plane does not trim yet: this is the configuration only."""

from __future__ import annotations

import json
from typing import Any

from agent.device.platforms.cumulus_nvue import CumulusNvue
from agent.device.platforms.sonic import Sonic
from agent.device.state import diff
from agent.intent.plan import DevicePlan
from tests.unit.platform_helpers import single_device_plan
from tests.unit.sonic_lab_helpers import LabSonic, run
from tests.unit.test_lab_nvue_driver import lab_connection

LOSSY_TRIM = "overrides: {mode: lossy-trim, trim: {size_bytes: 512}}"


def trim_plan(platform: str, ports: list[str]) -> DevicePlan:
    return single_device_plan(
        platform, [(name, "10M", 5) for name in ports], "nvidia-default", overrides=LOSSY_TRIM
    )


def trim_drift(device: DevicePlan, actual: Any, platform: Any) -> list[str]:
    found = diff(device.name, platform.desired(device), actual, platform.managed)
    return [str(d) for d in found if d.setting.startswith("trim")]


def test_sonic_accepts_switch_trimming_and_reads_it_back() -> None:
    device = trim_plan("sonic", ["Ethernet0", "Ethernet4"])

    async def scenario() -> tuple[str, Any, str]:
        lab = await LabSonic().start()
        # What the push does: read the switch, render what differs, apply it.
        before = Sonic.state_from_config_db(
            json.loads(await lab.run("sudo sonic-cfggen -d --print-data"))
        )
        lines = Sonic().render_changes(Sonic().desired(device), before)
        await lab.write("/tmp/p.json", "\n".join(lines))
        applied = await lab.run("sudo config apply-patch /tmp/p.json")
        config = json.loads(await lab.run("sudo sonic-cfggen -d --print-data"))
        refused = await lab.run(
            "cat > /tmp/bad.json <<'EOF'",
            '[{"op": "add", "path": "/SWITCH_TRIMMING/GLOBAL/dscp_value", "value": "64"}]',
            "EOF",
            "sudo config apply-patch /tmp/bad.json",
        )
        return applied, config, refused

    applied, config, refused = run(scenario())
    assert applied.splitlines()[-1] == "Patch applied successfully.", applied
    assert config["SWITCH_TRIMMING"]["GLOBAL"] == {
        "size": "512", "dscp_value": "48", "queue_index": "6"}  # fmt: skip
    actual = Sonic.state_from_config_db(config)
    assert actual.interfaces["Ethernet0"].trim_queues == (3,)
    assert "pfc_enable" not in config["PORT_QOS_MAP"]["Ethernet0"]  # no PFC on a trimming class
    assert diff(device.name, Sonic().desired(device), actual, Sonic.managed) == []
    assert "Invalid value" in refused  # DSCP 64 is outside sonic-trimming.yang's 0..63


def test_nvue_accepts_packet_trim_and_finds_a_hand_change() -> None:
    device = trim_plan("cumulus_nvue", ["swp1", "swp2"])
    driver = CumulusNvue()
    with lab_connection() as (switch, conn):
        with driver.transaction(conn, driver.render(device), 90) as txn:
            driver.confirm(conn, txn)
        assert diff(device.name, driver.desired(device), driver.read_state(conn),
                    driver.managed) == []  # fmt: skip
        hand = switch.terminal("admin")
        for line in (
            "nv set system forwarding packet-trim size 1024",
            "nv config apply -y",
        ):
            conn.loop.run_until_complete(hand.execute(line))
        assert trim_drift(device, driver.read_state(conn), driver) == [
            "sw1: trim: Expected: 512 B, DSCP 48, priority 6 Actual: 1024 B, DSCP 48, priority 6"
        ]
        refused = conn.loop.run_until_complete(
            hand.execute("nv set system forwarding packet-trim size 258")
        )
        assert "multiple of 4" in refused
