"""Host pre-flight checks RC202-RC207 (agent/observe/checks/hosts.py) on host facts built from
recorded outputs (tests/data/hosts/README.md; mlnx_qos from tests/data/platforms/linux_host).

Facts come from :func:`agent.observe.hostfacts.collect_host_facts` with a shell that answers
each source's real command (the command text decides which recorded output it gets), so the
commands, the collection and the checks are tested together; the GID table is the real
SHOW_GIDS script run under ``sh`` on the recorded sysfs tree tests/data/perftest/sysfs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.intent.model import FabricIntent
from agent.intent.plan import build_plan
from agent.observe.checks import CATALOG, HOST_CHECK_IDS
from agent.observe.checks.base import Collected, DeviceData
from agent.observe.collect import HOST_STATE_ELSEWHERE
from agent.observe.hostfacts import (
    CommandResult,
    HostFacts,
    collect_host_facts,
    command_for,
    rdma_port_facts,
    run_local,
    sudo_wrapped,
)
from agent.observe.hostsources import PREFLIGHT_SOURCES

DATA = Path(__file__).resolve().parents[1] / "data"
HOSTS = DATA / "hosts"
QOS = DATA / "platforms" / "linux_host"
SYSFS = DATA / "perftest" / "sysfs"


def text(name: str) -> str:
    if name.startswith("mlnx_qos"):
        lines = (QOS / name).read_text().splitlines(keepends=True)
        return "".join(line for line in lines if not line.startswith("# Format"))
    return (HOSTS / name).read_text()


def _host(name: str, ports: list[dict[str, Any]]) -> dict[str, Any]:
    return {"name": name, "platform": "linux_host", "role": "host", "host": "192.0.2.10",
            "username": "lab", "credentials": {"password_env": "HOST_CHECKS_PASSWORD"},
            "ports": [{"cable_m": 3, "mtu": 9000, **port} for port in ports]}  # fmt: skip


RDMA_PORT = {"name": "ens1f0np0", "speed": "100G", "mtu": 9000, "rdma_device": "mlx5_0",
             "ipv4": "198.18.0.11/31"}  # fmt: skip


def intent_with(rdma_port: dict[str, Any]) -> FabricIntent:
    gpu1 = _host("gpu1", [rdma_port, {"name": "eth0", "speed": "1G"}])
    plain = _host("plain", [{"name": "eth0", "speed": "1G"}])
    return FabricIntent.model_validate(
        {"name": "t", "profile": {"name": "p"}, "devices": [gpu1, plain]}
    )


INTENT = intent_with(RDMA_PORT)
PLAN = build_plan(INTENT)
GPU1 = INTENT.devices[0]
PORT = "ens1f0np0"

OK = 0
Answer = tuple[int | None, str]

# gpu1 as it should be: MLNX_OFED (mlnx_qos), mlx5 with RoCE on, MTU 9000, a GPU behind the
# same PLX switch as its NIC with ACS off on the switch ports.
HEALTHY: dict[str, Answer] = {
    "gpus": (OK, "00000000:05:00.0\n"),
    "pci_paths": (OK, text("pci_paths_plx.txt")),
    "lspci": (OK, text("lspci_acs_off.txt")),
    "traffic_class": (OK, text("traffic_class_106.txt")),
    "mlnx_qos": (OK, text("mlnx_qos_roce.txt")),
    "dcb_app": (OK, text("dcb_app_roce.txt")),
    "dcb_pfc": (OK, text("dcb_pfc_prio3.txt")),
    "rdma_device": (OK, text("rdma_device_mlx5.txt")),
    "enable_roce": (OK, text("devlink_enable_roce_true.txt")),
    "mtu": (OK, text("mtu_9000.txt")),
    "ibv_devinfo": (OK, text("ibv_devinfo_mlx5_azure.txt").replace("1024 (3)", "4096 (5)")),
}
NO_MLNX_QOS: Answer = (127, "sh: 1: mlnx_qos: not found\n")
NOT_SUPPORTED: Answer = (1, text("dcb_not_supported.txt"))


def facts_with(changes: dict[str, Answer] | None = None) -> HostFacts:
    """gpu1's facts: HEALTHY with ``changes``, every command answered by its source."""
    answers = {**HEALTHY, **(changes or {})}
    by_command: dict[str, str] = {}
    for source in PREFLIGHT_SOURCES:
        for port in rdma_port_facts(GPU1) if source.per_port else [None]:
            command = command_for(source, port)
            by_command[sudo_wrapped(command) if source.sudo else command] = source.name

    def shell(command: str) -> CommandResult:
        name = by_command[command]
        if name == "gids" and name not in answers:  # the real script on the recorded tree
            return run_local(["env", f"SYSFS={SYSFS}", "sh", "-s"], command)
        status, output = answers[name]
        return CommandResult(command, status, output, "" if status is not None else "timed out")

    return collect_host_facts(GPU1, INTENT, sources=PREFLIGHT_SOURCES, shell=shell)


def collected(facts: HostFacts | None) -> Collected:
    data = Collected(INTENT, PLAN)
    for device in INTENT.devices:
        plan = PLAN.device(device.name)
        assert plan is not None
        data.devices[device.name] = DeviceData(
            device, plan, facts=facts if device is GPU1 else None
        )
    return data


def run(check_id: str, facts: HostFacts | None) -> tuple[str, list[str]]:
    data = collected(facts)
    for host in data.devices.values():  # as agent/observe/collect.py leaves hosts for RC201
        host.error = HOST_STATE_ELSEWHERE
    results = {r.device: r for r in CATALOG[check_id]().run(data)}
    assert results["plain"].status == "skipped"  # no rdma_device: never judged
    assert "no port declares an rdma_device" in results["plain"].messages[0]
    return results["gpu1"].status, results["gpu1"].messages


def test_the_host_checks_are_registered() -> None:
    assert HOST_CHECK_IDS == ("RC202", "RC203", "RC204", "RC205", "RC206", "RC207")
    for check_id in HOST_CHECK_IDS:
        assert CATALOG[check_id].categories == ("hosts",)
        assert CATALOG[check_id].description()


@pytest.mark.parametrize("check_id", HOST_CHECK_IDS)
def test_a_healthy_host_passes(check_id: str) -> None:
    status, messages = run(check_id, facts_with())
    assert status == "success", messages


@pytest.mark.parametrize("check_id", HOST_CHECK_IDS)
def test_without_facts_every_check_skips_and_says_why(check_id: str) -> None:
    status, messages = run(check_id, None)
    assert status == "skipped" and "host facts not collected" in messages[0]


@pytest.mark.parametrize("check_id", HOST_CHECK_IDS)
def test_an_unreachable_host_is_unverified(check_id: str) -> None:
    facts = HostFacts("gpu1", rdma_port_facts(GPU1), error="host gpu1: cannot connect")
    assert run(check_id, facts) == ("unverified", ["host gpu1: cannot connect"])


FAILURES: list[tuple[str, dict[str, Answer], str]] = [
    # RC202: the GID table has no RoCE v2 GID for the port's address
    ("RC202", {"gids": (OK, "n_gids_found=0\n")},
     "gpu1 mlx5_0 port 1 netdev ens1f0np0: Expected: a RoCE v2 GID for 198.18.0.11 "
     "Actual: no GIDs"),
    # RC203: a forced class of another DSCP, trust PCP, DSCP 26 not in the APP table
    ("RC203", {"traffic_class": (OK, text("traffic_class_236.txt"))},
     "forced traffic class (tc/1/traffic_class): Expected: DSCP 26 (tclass 104-107) or none "
     "Actual: tclass 236 (DSCP 59)"),
    ("RC203", {"mlnx_qos": NO_MLNX_QOS, "dcb_app": (OK, text("dcb_app_empty.txt"))},
     "gpu1 ens1f0np0 (mlx5_0/1) trust (dcb app): Expected: dscp Actual: pcp"),
    ("RC203", {"mlnx_qos": NO_MLNX_QOS, "dcb_app": (OK, text("dcb_app_man_example.txt"))},
     "DSCP 26 -> priority (dcb app): Expected: 3 Actual: none"),
    # RC204
    ("RC204", {"mlnx_qos": (OK, text("mlnx_qos_wrong_pfc.txt"))},
     "gpu1 ens1f0np0 (mlx5_0/1) PFC priorities (mlnx_qos): Expected: [3] Actual: [4]"),
    ("RC204", {"mlnx_qos": NO_MLNX_QOS, "dcb_pfc": (OK, text("dcb_pfc_man_example.txt"))},
     "PFC priorities (dcb pfc): Expected: [3] Actual: [6, 7]"),
    # RC205: ReqRedir/CmpltRedir on the GPU's switch port
    ("RC205", {"lspci": (OK, text("lspci_acs_on.txt"))},
     "gpu1 GPU 0000:05:00.0 to mlx5_0 (0000:06:00.0) bridge 0000:04:08.0 ACSCtl: Expected: "
     "all off (ACS disabled) Actual: ReqRedir+ CmpltRedir+"),
    # RC206
    ("RC206", {"enable_roce": (OK, text("devlink_enable_roce_false.txt"))},
     "gpu1 ens1f0np0 (mlx5_0/1) devlink enable_roce (0000:06:00.0): Expected: true Actual: false"),
    ("RC206", {"rdma_device": (OK, text("rdma_device_ib.txt"))},
     "link layer: Expected: Ethernet (RoCE) Actual: InfiniBand"),
    # RC207: a 1500 netdev and the Azure host's active_mtu 1024
    ("RC207", {"mtu": (OK, "1500\n")},
     "gpu1 ens1f0np0 (mlx5_0/1) netdev MTU: Expected: >= 4192 (RoCE MTU 4096 from the intent's "
     "MTU 9000, + 96 B of RoCE headers) Actual: 1500 (RoCE MTU 1024)"),
    ("RC207", {"ibv_devinfo": (OK, text("ibv_devinfo_mlx5_azure.txt"))},
     "ibv_devinfo active_mtu: Expected: >= 4096 Actual: 1024"),
]  # fmt: skip


@pytest.mark.parametrize(("check_id", "changes", "words"), FAILURES)
def test_failures_name_host_port_expected_and_actual(
    check_id: str, changes: dict[str, Answer], words: str
) -> None:
    status, messages = run(check_id, facts_with(changes))
    assert status == "failure", messages
    assert any(words in m for m in messages), messages


def test_mlnx_qos_defaults_fail_on_pfc_not_on_the_map() -> None:
    # The NIC default map is dscp >> 3: DSCP 26 lands in priority 3 and 48 in 6 as the intent
    # wants, so trust and map pass; PFC is off, which RC204 reports.
    facts = facts_with({"mlnx_qos": (OK, text("mlnx_qos_default.txt"))})
    assert run("RC203", facts)[0] == "success"
    status, messages = run("RC204", facts)
    assert status == "failure"
    assert messages == [
        "gpu1 ens1f0np0 (mlx5_0/1) PFC priorities (mlnx_qos): Expected: [3] Actual: []"
    ]


UNVERIFIED: list[tuple[str, dict[str, Answer], str]] = [
    ("RC202", {"gids": (None, "")}, "not run (timed out)"),
    ("RC203", {"mlnx_qos": NO_MLNX_QOS, "dcb_app": NOT_SUPPORTED},
     "`mlnx_qos -i ens1f0np0`: exit 127 (sh: 1: mlnx_qos: not found); "
     "`dcb -N app show dev ens1f0np0 dscp-prio`: exit 1 (Attribute read: Operation not supported)"),
    ("RC203", {"mlnx_qos": (OK, "garbage\n")}, "not mlnx_qos output"),
    ("RC204", {"mlnx_qos": NO_MLNX_QOS, "dcb_pfc": NOT_SUPPORTED},
     "`dcb pfc show dev ens1f0np0`: exit 1 (Attribute read: Operation not supported)"),
    ("RC205", {"lspci": (OK, text("lspci_no_root.txt"))},
     "bridge 0000:03:00.0: lspci shows no capabilities (`Capabilities: <access denied>`"),
    ("RC205", {"lspci": (1, "sudo: a password is required\n")},
     "`sudo -n sh -c 'lspci -D -vvv'`: exit 1 (sudo: a password is required)"),
    ("RC206", {"enable_roce": (1, "Error: devlink: Unknown device.\n")},
     "`devlink dev param show pci/"),
    ("RC206", {"rdma_device": (1, "no RDMA port /sys/class/infiniband/mlx5_0/ports/1\n")},
     "exit 1 (no RDMA port /sys/class/infiniband/mlx5_0/ports/1)"),
    ("RC207", {"mtu": (1, "cat: /sys/class/net/ens1f0np0/mtu: No such file or directory\n")},
     "`cat /sys/class/net/ens1f0np0/mtu`: exit 1"),
]  # fmt: skip


@pytest.mark.parametrize(("check_id", "changes", "words"), UNVERIFIED)
def test_a_source_that_failed_is_unverified_with_the_command(
    check_id: str, changes: dict[str, Answer], words: str
) -> None:
    status, messages = run(check_id, facts_with(changes))
    assert status == "unverified", messages
    assert any(words in m for m in messages), messages
    assert all(m.startswith("gpu1") for m in messages)


def test_trust_and_pfc_from_dcb_when_there_is_no_mlnx_qos() -> None:
    facts = facts_with({"mlnx_qos": NO_MLNX_QOS})
    assert run("RC203", facts)[0] == "success"
    assert run("RC204", facts)[0] == "success"


def test_a_failure_outranks_an_unverified_source_and_lists_both() -> None:
    pcp = text("mlnx_qos_default.txt").replace("dscp", "pcp", 1)
    facts = facts_with({"traffic_class": (1, "cat: Permission denied\n"), "mlnx_qos": (OK, pcp)})
    status, messages = run("RC203", facts)
    assert status == "failure"
    assert messages[0].endswith("trust (mlnx_qos): Expected: dscp Actual: pcp")
    assert any(m.startswith("unverified: gpu1 ens1f0np0") and "Permission denied" in m
               for m in messages)  # fmt: skip


SKIPS: list[tuple[dict[str, Answer], str]] = [
    ({"gpus": (127, "sh: 1: nvidia-smi: not found\n")}, "nvidia-smi is not installed"),
    ({"gpus": (6, text("nvidia_smi_no_devices.txt"))}, "nvidia-smi found no devices"),
    ({"gpus": (9, text("nvidia_smi_no_driver.txt"))}, "cannot reach the NVIDIA driver"),
    ({"gpus": (OK, "")}, "nvidia-smi lists none"),
]


@pytest.mark.parametrize(("changes", "words"), SKIPS)
def test_acs_is_skipped_without_a_gpu(changes: dict[str, Answer], words: str) -> None:
    status, messages = run("RC205", facts_with(changes))
    assert status == "skipped" and words in messages[0]


def test_acs_of_a_gpu_on_the_other_socket_is_not_judged() -> None:
    # GPU 85:00.0 meets the NIC only in the CPU; the root port's ACS (on) is not between them
    status, messages = run("RC205", facts_with({"gpus": (OK, text("nvidia_smi_bus_ids.txt"))}))
    assert status == "success", messages
    assert any("GPU 0000:85:00.0: shares no PCIe switch or root port" in m for m in messages)
    assert any("ACS off on 0000:03:00.0, 0000:04:08.0, 0000:04:10.0" in m for m in messages)


def test_rxe_is_roce_by_construction() -> None:
    rxe = (OK, "link_layer=Ethernet\nparent=eth1\ndriver=\npci=device\n")
    status, messages = run("RC206", facts_with({"rdma_device": rxe, "enable_roce": (1, "")}))
    assert status == "success"
    assert "rxe (Soft-RoCE) on eth1: RoCE by construction" in messages[0]


def test_another_driver_is_roce_when_its_port_has_roce_gids() -> None:
    other = (OK, "link_layer=Ethernet\nparent=\ndriver=bnxt_en\npci=0000:06:00.0\n")
    status, messages = run("RC206", facts_with({"rdma_device": other}))
    assert status == "success" and "bnxt_en: RoCE GIDs present" in messages[0]
    status, messages = run(
        "RC206", facts_with({"rdma_device": other, "gids": (OK, "n_gids_found=0\n")})
    )
    assert status == "failure" and "RoCE GIDs (bnxt_en): Expected: >= 1 Actual: 0" in messages[0]


def test_without_ibv_devinfo_the_netdev_mtu_decides_and_says_so() -> None:
    status, messages = run("RC207", facts_with({"ibv_devinfo": (127, "ibv_devinfo: not found")}))
    assert status == "success"
    assert (
        "active_mtu not compared: ibv_devinfo: `ibv_devinfo -d mlx5_0 -i 1`: exit 127"
        in (messages[0])
    )


def test_a_port_without_an_address_is_skipped_by_the_gid_check() -> None:
    intent = intent_with({k: v for k, v in RDMA_PORT.items() if k != "ipv4"})
    facts = HostFacts("gpu1", rdma_port_facts(intent.devices[0]))
    data = Collected(intent, build_plan(intent))
    for device in intent.devices:
        plan = data.plan.device(device.name)
        assert plan is not None
        data.devices[device.name] = DeviceData(device, plan, facts=facts)
    result = next(r for r in CATALOG["RC202"]().run(data) if r.device == "gpu1")
    assert result.status == "skipped" and "the intent gives this port no ipv4" in result.messages[0]


# --------------------------------------------------------------------------- validate --hosts-only

LEAFSPINE = DATA / "platforms" / "arista_eos" / "lab-leafspine-fabric.yml"


def validate(*args: str) -> Any:
    from click.testing import CliRunner

    from agent.app.cli import main

    return CliRunner().invoke(main, ["validate", str(LEAFSPINE), *args])


def test_hosts_only_refuses_a_playbook_naming_the_option(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROCE_LAB_PASSWORD", "unused")
    done = validate("--hosts-only", "--playbook", "validate")
    assert done.exit_code == 2
    assert "--hosts-only runs its own playbook: leave out --playbook" in done.output


def test_hosts_only_reads_no_switch_and_skips_hosts_without_rdma(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The leaf-spine lab's switches are not running here: a switch read would fail the collect
    # step ("no switch could be read"); its hosts are namespaces without an rdma_device.
    monkeypatch.setenv("ROCE_LAB_PASSWORD", "unused")
    done = validate("--hosts-only", "--output", "json")
    report = json.loads(done.stdout)
    assert done.exit_code == 0, done.output
    assert report["playbook"] == "host-preflight"
    assert [s["status"] for s in report["steps"]] == ["success", "success"]
    assert {c["check"] for c in report["checks"]} == set(HOST_CHECK_IDS)
    assert {c["status"] for c in report["checks"]} == {"skipped"}


def test_unverified_fails_the_checks_step_and_is_a_junit_error() -> None:
    from agent.app.playbook_report import render_junit
    from agent.ops.playbooks import ChecksSpec, PlaybookRunner, Report

    runner = PlaybookRunner(INTENT)
    runner.collected = collected(facts_with({"mlnx_qos": NO_MLNX_QOS, "dcb_pfc": NOT_SUPPORTED}))
    report = Report("host-preflight", "t", 0.0)
    step = runner._checks(ChecksSpec(ids=["RC204"]), report)
    report.steps.append(step)
    assert step.status == "failure"
    assert step.detail == {"checks": 2, "failed": 1, "unverified": 1}
    assert not report.passed
    xml = render_junit(report)
    assert '<error message="unverified">' in xml and 'errors="1"' in xml


def test_rc201_points_to_the_host_fact_checks_instead_of_judging_twice() -> None:
    data = collected(facts_with({"mlnx_qos": (OK, text("mlnx_qos_wrong_pfc.txt"))}))
    for host in data.devices.values():
        host.error = HOST_STATE_ELSEWHERE
    rc201 = {r.device: r for r in CATALOG["RC201"]().run(data)}
    assert rc201["gpu1"].status == "skipped"
    assert rc201["gpu1"].messages == [
        "NIC trust, DSCP map and PFC are read as host facts and judged by RC203 and RC204"
    ]
    assert run("RC204", data.devices["gpu1"].facts)[0] == "failure"  # judged once, here
