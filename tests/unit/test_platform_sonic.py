"""SONiC platform: rendered JSON patch (golden files), CONFIG_DB and counter parsing, transaction.

No SONiC lab device exists for this project, so parsing and transaction tests use recorded
device output in SONiC's documented formats (each fixture under tests/data/platforms/sonic
names its source) and a scripted fake connection that records the commands it is sent.

Regenerate the golden files after a reviewed renderer change with:
    .venv/bin/python -c "import tests.unit.test_platform_sonic as t; t.write_goldens()"
then read the diff of tests/data/platforms/sonic/*.golden line by line before committing.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest

from agent.device.platforms.base import ConfigRejected
from agent.device.platforms.sonic import Sonic, pointer
from agent.device.state import diff
from agent.intent.loader import load_fabric
from agent.intent.plan import DevicePlan, build_plan
from tests.unit.platform_helpers import (
    PROFILES,
    ROOT,
    Ports,
    RecordingConnection,
    single_device_plan,
)

DATA = ROOT / "tests" / "data" / "platforms" / "sonic"
PORTS: Ports = [("Ethernet0", "100G", 5), ("Ethernet8", "400G", 30)]


def device_plan(profile: str, ports: Ports = PORTS) -> DevicePlan:
    """One SONiC leaf with the given ports, planned with a built-in profile."""
    return single_device_plan("sonic", ports, profile, username="netops")


def pod_leaf5() -> DevicePlan:
    plan = build_plan(load_fabric(ROOT / "playbooks" / "fabrics" / "pod-400g.yml").intent)
    device = plan.device("leaf5")
    assert device is not None
    return device


def golden_plan(name: str) -> DevicePlan:
    return pod_leaf5() if name == "pod-400g-leaf5" else device_plan(name)


GOLDENS = [*PROFILES, "pod-400g-leaf5"]


def write_goldens() -> None:
    for name in GOLDENS:
        (DATA / f"{name}.golden").write_text("\n".join(Sonic().render(golden_plan(name))) + "\n")


def load_db(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / name).read_text(encoding="utf-8"))
    return data


def apply_patch(document: dict[str, Any], patch: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902 add/remove on a copy — what GCU does to CONFIG_DB, minus its validation."""
    result: dict[str, Any] = json.loads(json.dumps(document))
    for op in patch:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        parent = result
        for part in parts[:-1]:
            parent = parent[part]  # a missing parent fails, as it does in GCU
        if op["op"] == "add":
            parent[parts[-1]] = op["value"]
        else:
            del parent[parts[-1]]
    return result


FakeConnection = functools.partial(
    RecordingConnection,
    "sw1",
    refusal_text="Failed to apply patch due to: Given patch will produce invalid config\n",
)


SUCCESS = {
    "sudo config checkpoint": "Checkpoint created successfully.\n",
    "sudo config apply-patch": "Patch applied successfully.\n",
    "sudo config rollback": "Config rolled back successfully.\n",
    "sudo config delete-checkpoint": "Checkpoint deleted successfully.\n",
}


# ----------------------------------------------------------------------------- render


@pytest.mark.parametrize("name", GOLDENS)
def test_render_matches_reviewed_golden(name: str) -> None:
    rendered = "\n".join(Sonic().render(golden_plan(name))) + "\n"
    assert rendered == (DATA / f"{name}.golden").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", GOLDENS)
def test_render_is_a_json_patch_of_adds(name: str) -> None:
    patch = json.loads("\n".join(Sonic().render(golden_plan(name))))
    assert patch and all(op["op"] == "add" and op["path"].startswith("/") for op in patch)


@pytest.mark.parametrize("profile", PROFILES)
def test_rendered_map_puts_roce_dscp_26_into_its_lossless_class(profile: str) -> None:
    plan = device_plan(profile)
    patch = json.loads("\n".join(Sonic().render(plan)))
    ops = {op["path"]: op["value"] for op in patch}
    assert ops["/DSCP_TO_TC_MAP/ROCE"]["26"] == "3"  # stock AZURE says "1", which is lossy
    assert ops["/PORT_QOS_MAP/Ethernet0/dscp_to_tc_map"] == "ROCE"
    assert set(ops["/DSCP_TO_TC_MAP/ROCE"]) == {str(d) for d in range(64)}
    if plan.pfc_priorities:
        assert "3" in ops["/PORT_QOS_MAP/Ethernet0/pfc_enable"].split(",")


@pytest.mark.parametrize(
    ("key", "expected"),
    [("Ethernet1/1", "/PORT_QOS_MAP/Ethernet1~11"), ("a~b", "/PORT_QOS_MAP/a~0b")],
)
def test_json_pointer_escapes_slash_and_tilde(key: str, expected: str) -> None:
    assert pointer("PORT_QOS_MAP", key) == expected


def test_headroom_profiles_follow_the_plan_per_port() -> None:
    plan = device_plan("nvidia-default")
    ops = {op["path"]: op["value"] for op in json.loads("\n".join(Sonic().render(plan)))}
    for port in plan.ports:
        headroom = port.headroom[3]
        binding = ops[f"/BUFFER_PG/{port.name}|3"]["profile"]
        profile = ops[f"/BUFFER_PROFILE/{binding}"]
        assert (profile["xoff"], profile["xon"], profile["size"]) == (
            str(headroom.xoff),
            str(headroom.xon),
            str(headroom.size),
        )


# ----------------------------------------------------------------------------- read_state


def test_stock_azure_config_shows_dscp_26_outside_the_lossless_class() -> None:
    plan = device_plan("nvidia-default")
    actual = Sonic.state_from_config_db(load_db("configdb_stock_azure.json"))
    found = {(d.interface, d.setting): d for d in diff("sw1", Sonic().desired(plan), actual)}
    trap = found[("", "dscp_to_priority[26]")]
    assert (trap.expected, trap.actual) == (3, 1)
    assert ("Ethernet0", "pfc_priorities") in found  # stock enables 3 and 4


def test_correct_config_db_diffs_to_nothing() -> None:
    plan = device_plan("nvidia-default")
    actual = Sonic.state_from_config_db(load_db("configdb_roce.json"))
    assert diff("sw1", Sonic().desired(plan), actual, Sonic.managed) == []


def test_one_wrong_threshold_diffs_to_exactly_that_setting() -> None:
    plan = device_plan("nvidia-default")
    actual = Sonic.state_from_config_db(load_db("configdb_roce_wrong_threshold.json"))
    found = diff("sw1", Sonic().desired(plan), actual, Sonic.managed)
    assert [(d.interface, d.setting, d.expected, d.actual) for d in found] == [
        ("Ethernet8", "queue[3].ecn", "150000-1500000@100%", "15000-1500000@100%")
    ]


@pytest.mark.parametrize("profile", PROFILES)
def test_changes_rendered_against_stock_bring_it_to_the_plan(profile: str) -> None:
    stock = load_db("configdb_stock_azure.json")
    desired = Sonic().desired(device_plan(profile))
    changes = Sonic().render_changes(desired, Sonic.state_from_config_db(stock))
    changed = apply_patch(stock, json.loads("\n".join(changes)))
    assert diff("sw1", desired, Sonic.state_from_config_db(changed), Sonic.managed) == []


def test_no_changes_when_already_as_planned() -> None:
    desired = Sonic().desired(device_plan("nvidia-default"))
    actual = Sonic.state_from_config_db(load_db("configdb_roce.json"))
    assert Sonic().render_changes(desired, actual) == []


def test_read_state_runs_cfggen_and_reads_json() -> None:
    conn = FakeConnection({"sudo sonic-cfggen": (DATA / "configdb_roce.json").read_text()})
    state = Sonic().read_state(conn)
    assert conn.sent == ["sudo sonic-cfggen -d --print-data"]
    assert state.trust == "dscp" and state.dscp_to_priority[26] == 3


# ----------------------------------------------------------------------------- counters


def counter_outputs() -> dict[str, str]:
    files = {
        "pfc": "show_pfc_counters.txt",
        "queue": "show_queue_counters.txt",
        "wred": "show_queue_wredcounters.txt",
        "watermark": "show_queue_watermark_unicast.txt",
        "pg_drop": "show_pg_drop_counters.txt",
        "pfcwd": "pfcwd_show_stats.txt",
    }
    return {key: (DATA / name).read_text(encoding="utf-8") for key, name in files.items()}


def test_counters_are_normalized_exactly() -> None:
    counters = Sonic.counters_from_text("sw1", 1.0, counter_outputs())
    eth0, eth4 = counters.interfaces["Ethernet0"], counters.interfaces["Ethernet4"]
    assert eth0.pfc_rx == (1200, 201, 202, 203, 204, 205, 206, 207)
    assert eth4.pfc_tx == (1410, 411, 412, 413, 414, 415, 416, 417)
    q3 = eth0.queues[3]
    assert (q3.tx_packets, q3.tx_bytes, q3.dropped_packets) == (1234567, 987654321, 0)
    assert (q3.ecn_marked_packets, q3.watermark_bytes) == (3454820, 0)
    assert eth0.queues[0].watermark_bytes == 2057328
    assert eth4.queues[3].ecn_marked_packets == 777 and eth4.queues[0].ecn_marked_packets == 0
    assert set(eth0.queues) == set(range(8))  # MC and ALL rows are not traffic classes
    assert eth0.headroom_drops == (800, 801, 802, 803, 804, 805, 806, 807)
    assert eth0.watchdog[3].model_dump() == {
        "storms_detected": 1,
        "storms_restored": 0,
        "stormed": True,
    }
    assert eth4.watchdog[3].stormed is False and eth4.watchdog[3].storms_restored == 2


def test_read_counters_sends_the_documented_show_commands() -> None:
    outputs = counter_outputs()
    replies = {Sonic.COUNTER_COMMANDS[key]: text for key, text in outputs.items()}
    conn = FakeConnection(replies)
    counters = Sonic().read_counters(conn)
    assert conn.sent == list(Sonic.COUNTER_COMMANDS.values())
    assert counters.device == "sw1" and set(counters.interfaces) == {"Ethernet0", "Ethernet4"}


def test_pg_watermarks() -> None:
    marks = Sonic.pg_watermarks_from_text(
        (DATA / "show_pg_watermark_headroom.txt").read_text(),
        (DATA / "show_pg_watermark_shared.txt").read_text(),
    )
    assert marks["Ethernet4"]["headroom"][3] == 403
    assert marks["Ethernet0"]["shared"] == (200, 201, 202, 203, 204, 205, 206, 207)


# ----------------------------------------------------------------------------- transaction


CONFIG = "/usr/local/bin/config"


def test_transaction_happy_path_checkpoints_applies_and_confirms() -> None:
    conn = FakeConnection(SUCCESS)
    lines = Sonic().render(device_plan("nvidia-default"))
    with Sonic().transaction(conn, lines, confirm_timeout_s=120) as txn:
        Sonic().confirm(conn, txn)
    name = txn.name
    assert conn.sent[0] == f"sudo config checkpoint {name}"
    assert conn.sent[1] == f"cat > /tmp/{name}.json <<'ROCE_AGENT_PATCH_EOF'"
    assert conn.sent[2 : 2 + len(lines)] == lines
    rest = conn.sent[3 + len(lines) :]
    assert rest == [
        f"sudo config apply-patch /tmp/{name}.json",
        # the timer's service rolls back and drops the checkpoint
        f"sudo systemd-run --on-active=120 --unit={name}-rollback /bin/sh -c "
        f"'{CONFIG} rollback {name} && {CONFIG} delete-checkpoint {name}'",
        # confirm: the checkpoint goes first (the timer then has nothing to roll back to)
        f"sudo config delete-checkpoint {name}",
        f"sudo systemctl stop {name}-rollback.timer",
        "sudo config save -y",
        f"rm -f /tmp/{name}.json",
    ]
    assert txn.confirmed and not txn.rolled_back
    assert not any(c.startswith("sudo config rollback") for c in conn.sent)


def test_refused_patch_is_rolled_back_to_the_checkpoint() -> None:
    conn = FakeConnection(SUCCESS, refuse="sudo config apply-patch")
    with (
        pytest.raises(ConfigRejected, match="apply-patch"),
        Sonic().transaction(conn, ['[{"op": "add"}]'], 60),
    ):
        pytest.fail("the block must not run when the patch is refused")
    rollback = [c for c in conn.sent if c.startswith("sudo config rollback")]
    assert len(rollback) == 1
    assert conn.sent[-2].startswith("sudo config delete-checkpoint")


def test_leaving_without_confirm_rolls_back() -> None:
    conn = FakeConnection(SUCCESS)
    with Sonic().transaction(conn, ["[]"], 60) as txn:
        pass
    assert txn.rolled_back and not txn.confirmed
    assert f"sudo config rollback {txn.name}" in conn.sent
    assert "sudo config save -y" not in conn.sent
