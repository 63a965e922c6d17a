"""A RoCE class in ``mode: lossy-trim`` (issue #47, the intent and its render): the fabric
loads and plans without PFC, headroom or watchdog; SONiC renders SWITCH_TRIMMING and a
trimming buffer profile, Cumulus ``packet-trim`` with ``roce mode lossy-multi-tc``; EOS and
NX-OS are refused with the reason; the trimmed class's rules; the state read back, and a hand
change seen as drift."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.device.platforms import platform_for
from agent.device.platforms.base import PlatformError
from agent.device.platforms.cumulus_nvue import CumulusNvue
from agent.device.platforms.sonic import TRIM_PROFILE, Sonic
from agent.device.state import TrimState, diff
from agent.intent.loader import load_fabric
from agent.intent.plan import build_plan
from agent.observe.checks.config import roce_mode
from common.errors import IntentError

ROOT = Path(__file__).resolve().parents[2]
TRIM_FABRIC = ROOT / "tests" / "data" / "render" / "trim-fabric.yml"
MIXED = ROOT / "tests" / "data" / "render" / "mixed-fabric.yml"


def plan_of(path: Path) -> Any:
    return build_plan(load_fabric(path).intent)


def device(plan: Any, name: str) -> Any:
    return next(d for d in plan.devices if d.name == name)


def with_overrides(tmp_path: Path, overrides: dict[str, Any], source: Path = TRIM_FABRIC) -> Path:
    data = yaml.safe_load(source.read_text())
    data["overrides"] = {"mode": "lossy-trim", **overrides}
    path = tmp_path / "fabric.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_the_plan_has_trimming_and_nothing_lossless() -> None:
    plan = plan_of(TRIM_FABRIC)
    assert plan.mode == "lossy-trim"
    for switch in ("spine1", "leaf-nvue", "leaf-sonic"):
        planned = device(plan, switch)
        # Defaults: 256 B (valid on both NOSes), the CNP class's DSCP and priority.
        assert planned.trim.model_dump() == {"size_bytes": 256, "dscp": 48, "priority": 6,
                                             "queues": [3]}  # fmt: skip
        assert planned.pfc_priorities == [] and not planned.watchdog.enabled
        assert all(not port.headroom and not port.pfc_priorities for port in planned.ports)
    assert device(plan, "gpu1").trim is None


def test_sonic_renders_switch_trimming_and_a_trimming_queue_profile() -> None:
    planned = device(plan_of(TRIM_FABRIC), "leaf-sonic")
    ops = {op["path"]: op for op in json.loads("\n".join(Sonic().render(planned)))}
    assert ops["/SWITCH_TRIMMING/GLOBAL"]["value"] == {
        "size": "256", "dscp_value": "48", "queue_index": "6"}  # fmt: skip
    assert ops[f"/BUFFER_PROFILE/{TRIM_PROFILE}"]["value"]["packet_discard_action"] == "trim"
    assert ops["/BUFFER_QUEUE/Ethernet0|3"]["value"] == {"profile": TRIM_PROFILE}
    assert not [p for p in ops if p.startswith(("/PFC_WD", "/BUFFER_PG"))]
    # Referenced before use: the profile's op comes before the queue's.
    paths = list(ops)
    assert paths.index(f"/BUFFER_PROFILE/{TRIM_PROFILE}") < paths.index("/BUFFER_QUEUE/Ethernet0|3")


def test_cumulus_renders_packet_trim_with_lossy_multi_tc() -> None:
    lines = CumulusNvue().render(device(plan_of(TRIM_FABRIC), "leaf-nvue"))
    assert lines[0] == "nv set qos roce mode lossy-multi-tc"
    for expected in (
        "nv set system forwarding packet-trim state enabled",
        "nv set system forwarding packet-trim size 256",
        "nv set system forwarding packet-trim remark dscp 48",
        "nv set system forwarding packet-trim switch-priority 6",
        "nv set interface swp1 packet-trim egress-eligibility traffic-class 3",
        "nv set interface swp2 packet-trim egress-eligibility traffic-class 3",
    ):
        assert expected in lines
    assert not [line for line in lines if "pfc" in line and not line.startswith("nv unset")]


@pytest.mark.parametrize(
    ("platform", "reason"),
    [("arista_eos", "EOS's published"), ("cisco_nxos", "NX-OS's published")],
)
def test_a_platform_that_cannot_trim_is_refused_where_written(
    tmp_path: Path, platform: str, reason: str
) -> None:
    data = yaml.safe_load(TRIM_FABRIC.read_text())
    data["devices"][0]["platform"] = platform
    data["devices"][0]["ports"] = [
        {"name": "Ethernet1/1" if platform == "cisco_nxos" else "Ethernet1", "speed": "400G",
         "cable_m": 3, "mtu": 9100}]  # fmt: skip
    for d in data["devices"][1:]:
        for port in d["ports"]:
            port.pop("peer", None)
    path = tmp_path / "fabric.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(IntentError) as caught:
        load_fabric(path)
    message = str(caught.value)
    assert f"{path}:" in message and "devices[0].platform: IR022" in message
    assert reason in message and "sonic: SWITCH_TRIMMING" in message


def test_a_plan_that_reached_a_platform_that_cannot_trim_is_refused() -> None:
    planned = device(plan_of(TRIM_FABRIC), "leaf-sonic").model_copy(update={"platform": "x"})
    with pytest.raises(PlatformError, match="cannot trim packets"):
        platform_for("arista_eos").render(planned)


@pytest.mark.parametrize(
    ("overrides", "where", "expected"),
    [
        ({"trim": {"priority": 3}}, "overrides.trim.priority: IR023", "other than RoCE's"),
        ({"trim": {"priority": 5, "dscp": 40}, "dscp_map": {5: [40]}},
         "overrides.trim.priority: IR023", "a strict queue"),
        ({"trim": {"dscp": 40}}, "overrides.trim.dscp: IR023", "sends DSCP 40 to priority 0"),
        ({"trim": {"size_bytes": 200}}, "overrides.trim.size_bytes: IR024", "256-1024"),
        ({"trim": {"size_bytes": 258}}, "overrides.trim.size_bytes: IR024", "steps of 4"),
    ],
    ids=["roce-priority", "not-strict", "dscp-unmapped", "too-small-for-nvue", "not-step-4"],
)  # fmt: skip
def test_the_trimmed_class_rules(
    tmp_path: Path, overrides: dict[str, Any], where: str, expected: str
) -> None:
    with pytest.raises(IntentError) as caught:
        load_fabric(with_overrides(tmp_path, overrides))
    assert where in str(caught.value) and expected in str(caught.value)


def test_a_size_only_cumulus_refuses_is_fine_without_cumulus(tmp_path: Path) -> None:
    data = yaml.safe_load(TRIM_FABRIC.read_text())
    data["devices"] = [d for d in data["devices"] if d["platform"] == "sonic"]
    for d in data["devices"]:
        for port in d["ports"]:
            port.pop("peer", None)
    data["overrides"] = {"mode": "lossy-trim", "trim": {"size_bytes": 128}}
    path = tmp_path / "fabric.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    planned = device(build_plan(load_fabric(path).intent), "leaf-sonic")
    assert planned.trim.size_bytes == 128  # SONiC's own default size


SONIC_TRIMMING = {
    "SWITCH_TRIMMING": {"GLOBAL": {"size": "256", "dscp_value": "48", "queue_index": "6"}},
    "BUFFER_PROFILE": {TRIM_PROFILE: {"pool": "egress_lossy_pool", "size": "0",
                                      "dynamic_th": "3", "packet_discard_action": "trim"}},
    "BUFFER_QUEUE": {"Ethernet0|3": {"profile": TRIM_PROFILE}},
}  # fmt: skip


def test_sonic_reads_trimming_back_and_sees_a_hand_change() -> None:
    planned = device(plan_of(TRIM_FABRIC), "leaf-sonic")
    desired = Sonic().desired(planned)
    actual = Sonic.state_from_config_db(json.loads(json.dumps(SONIC_TRIMMING)))
    assert actual.trim == TrimState(size_bytes=256, dscp=48, priority=6)
    assert actual.interfaces["Ethernet0"].trim_queues == (3,)
    assert not [d for d in diff("leaf-sonic", desired, actual, Sonic.managed)
                if d.setting.startswith("trim")]  # fmt: skip
    changed = json.loads(json.dumps(SONIC_TRIMMING))
    changed["SWITCH_TRIMMING"]["GLOBAL"].update({"size": "512", "dscp_value": "from-tc"})
    drift = [d for d in diff("leaf-sonic", desired, Sonic.state_from_config_db(changed),
                             Sonic.managed) if d.setting == "trim"]  # fmt: skip
    assert [str(d) for d in drift] == [
        "leaf-sonic: trim: Expected: 256 B, DSCP 48, priority 6 Actual: 512 B, DSCP from the "
        "TC, priority 6"]  # fmt: skip


def test_sonic_stops_trimming_by_the_profile_action() -> None:
    lossless = device(plan_of(MIXED), "leaf-sonic")
    actual = Sonic.state_from_config_db(json.loads(json.dumps(SONIC_TRIMMING)))
    patch = json.loads("\n".join(Sonic().render_changes(Sonic().desired(lossless), actual)))
    profile = next(op for op in patch if op["path"] == f"/BUFFER_PROFILE/{TRIM_PROFILE}")
    assert profile["value"]["packet_discard_action"] == "drop"
    assert not [op for op in patch if op["path"].startswith("/SWITCH_TRIMMING")]


@pytest.mark.parametrize(
    ("roce_mode_set", "packet_trim", "eligibility", "trim", "classes"),
    [
        ("lossy-multi-tc", {}, {}, TrimState(size_bytes=256, dscp=11, priority=4), (1, 2, 3)),
        ("lossy", {"profile": "packet-trim-default"}, {},
         TrimState(size_bytes=256, dscp=11, priority=4), (1, 2, 3)),
        # Enabled by hand: "By default, port eligibility is disabled for all ports".
        ("lossy", {"state": "enabled", "size": 512}, {},
         TrimState(size_bytes=512, dscp=11, priority=4), ()),
        ("lossy", {}, {}, None, ()),
        ("lossy-multi-tc",
         {"state": "enabled", "size": 512, "remark": {"dscp": 48}, "switch-priority": 6},
         {"traffic-class": {"3": {}}}, TrimState(size_bytes=512, dscp=48, priority=6), (3,)),
        ("lossy-multi-tc", {"state": "disabled"}, {}, None, ()),
        ("lossy-multi-tc", {"remark": {"dscp": "port-level"}}, {},
         TrimState(size_bytes=256, dscp=None, priority=4), (1, 2, 3)),
    ],
    ids=["lossy-multi-tc-defaults", "default-profile", "enabled-by-hand", "lossy-off",
         "explicit", "disabled", "port-level-remark"],
)  # fmt: skip
def test_cumulus_reads_packet_trim(
    roce_mode_set: str,
    packet_trim: dict[str, Any],
    eligibility: dict[str, Any],
    trim: Any,
    classes: Any,
) -> None:
    tree = {
        "qos": {"roce": {"mode": roce_mode_set}},
        "system": {"forwarding": {"packet-trim": packet_trim}},
        "interface": {"swp1": {"packet-trim": {"egress-eligibility": eligibility}}},
    }
    state = CumulusNvue.state_from_config(tree)
    assert state.trim == trim
    assert state.interfaces["swp1"].trim_queues == classes


def test_cumulus_render_then_read_agrees() -> None:
    """What the render sets, read back from the tree NVUE would hold, is the desired state."""
    planned = device(plan_of(TRIM_FABRIC), "leaf-nvue")
    desired = CumulusNvue().desired(planned)
    tree = {
        "qos": {"roce": {"mode": "lossy-multi-tc"}},
        "system": {"forwarding": {"packet-trim": {"state": "enabled", "size": 256,
                                                  "remark": {"dscp": 48},
                                                  "switch-priority": 6}}},
        "interface": {name: {"packet-trim": {"egress-eligibility": {"traffic-class": {"3": {}}}}}
                      for name in ("swp1", "swp2")},
    }  # fmt: skip
    actual = CumulusNvue.state_from_config(tree)
    assert not [d for d in diff("leaf-nvue", desired, actual, CumulusNvue.managed)
                if d.setting.startswith("trim")]  # fmt: skip
    assert roce_mode(actual, 3, 3) == "lossy-trim"


def test_a_lossless_switch_reads_no_trimming() -> None:
    state = Sonic.state_from_config_db({})
    assert state.trim is None
    assert roce_mode(state, 3, 3) == "disabled"
