"""The job environment (agent.observe.jobenv): every variable from the intent and a host's GID
table, and every reason a host is refused.

GID tables are real ones: the GID source's own script (agent.observe.hostsources.SHOW_GIDS)
run with ``sh`` over sysfs trees laid out as the kernel's (Documentation/ABI/stable/
sysfs-class-infiniband: ``ports/P/gids/I``, ``gid_attrs/types/I``, ``gid_attrs/ndevs/I``):
the recorded tree tests/data/perftest/sysfs (README there) and small trees built here the same
way tests/unit/test_perftest_gid.py builds them.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from agent.intent.model import FabricIntent, Profile
from agent.observe.hostfacts import CommandResult, HostFacts, collect_host_facts, run_local
from agent.observe.jobenv import HostEnvironment, hca_list, job_environment, traffic_class

REPO = Path(__file__).resolve().parents[2]
SYSFS = REPO / "tests" / "data" / "perftest" / "sysfs"
PROFILES = REPO / "playbooks" / "profiles"


def _profile(name: str, **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((PROFILES / f"{name}.yml").read_text())
    data.update(changes)
    return data


def _host(name: str, *ports: tuple[str, str, str | None]) -> dict[str, Any]:
    return {
        "name": name,
        "platform": "linux_host",
        "role": "host",
        "netns": f"ns-{name}",
        "ports": [
            {"name": netdev, "speed": "100G", "cable_m": 3, "mtu": 9000, "rdma_device": rdma}
            | ({"ipv4": f"{ipv4}/31"} if ipv4 else {})
            for netdev, rdma, ipv4 in ports
        ],
    }


GPU1 = _host("gpu1", ("ens1f0np0", "mlx5_0", "198.18.0.11"), ("ens1f1np1", "mlx5_1", "198.18.1.11"))
RXE = _host("h1", ("eth1", "rxe0", "198.18.99.1"))


def _intent(*hosts: dict[str, Any], profile: dict[str, Any] | None = None) -> FabricIntent:
    return FabricIntent.model_validate(
        {"name": "t", "profile": profile or _profile("nvidia-default"), "devices": list(hosts)}
    )


def _facts(intent: FabricIntent, host: str, sysfs: Path = SYSFS) -> HostFacts:
    """The host's facts as collected, with the GID script reading ``sysfs``."""
    device = intent.device(host)
    assert device is not None

    def shell(command: str) -> CommandResult:
        return run_local(["env", f"SYSFS={sysfs}", "sh", "-s"], command)

    return collect_host_facts(device, intent, shell=shell)


def _env(intent: FabricIntent, host: str, sysfs: Path = SYSFS) -> HostEnvironment:
    return job_environment(intent, _facts(intent, host, sysfs))


def _tree(root: Path, device: str, slots: dict[int, tuple[str, str, str]]) -> None:
    """One RDMA port's GID table: index -> (gid, type as the kernel prints it, netdev)."""
    base = root / "class" / "infiniband" / device / "ports" / "1"
    for sub in ("gids", "gid_attrs/types", "gid_attrs/ndevs"):
        (base / sub).mkdir(parents=True, exist_ok=True)
    for index in range(8):
        gid, kind, netdev = slots.get(index, ("0000:0000:0000:0000:0000:0000:0000:0000", "", ""))
        (base / "gids" / str(index)).write_text(gid + "\n")
        if kind:  # an unused slot's type and netdev read EINVAL: absent files here
            (base / "gid_attrs" / "types" / str(index)).write_text(kind + "\n")
            (base / "gid_attrs" / "ndevs" / str(index)).write_text(netdev + "\n")


def _mapped(ipv4: str) -> str:
    packed = ipaddress.IPv4Address(ipv4).packed.hex()
    return f"0000:0000:0000:0000:0000:ffff:{packed[:4]}:{packed[4:]}"


LINK_LOCAL = "fe80:0000:0000:0000:5054:00ff:fe12:3401"


# ------------------------------------------------------------------ the happy paths


def test_two_mlx5_ports_one_index() -> None:
    env = _env(_intent(GPU1), "gpu1")
    assert env.ok, env.problems
    assert env.variables == {
        "NCCL_IB_HCA": "mlx5_0:1,mlx5_1:1",
        "NCCL_IB_GID_INDEX": "3",
        "NCCL_IB_TC": "106",  # DSCP 26 << 2 | ECT(0): nvidia-default marks ECN on priority 3
        "UCX_NET_DEVICES": "mlx5_0:1,mlx5_1:1",
        "UCX_IB_GID_INDEX": "3",
        "UCX_IB_TRAFFIC_CLASS": "106",
    }
    evidence = env.as_json()["ports"]
    assert [(p["device"], p["gid_index"], p["gid_type"], p["gid_netdev"]) for p in evidence] == [
        ("mlx5_0", 3, "RoCE v2", "ens1f0np0"),
        ("mlx5_1", 3, "RoCE v2", "ens1f1np1"),
    ]
    assert evidence[0]["gid"] == "0000:0000:0000:0000:0000:ffff:c612:000b"
    assert any(n.startswith("NCCL_IB_SL not set") for n in env.notes)
    assert any(n.startswith("NCCL_SOCKET_IFNAME not set") for n in env.notes)


def test_rxe_host() -> None:
    env = _env(_intent(RXE), "h1")
    assert env.ok, env.problems
    assert env.variables["NCCL_IB_HCA"] == "rxe0:1"
    assert env.variables["NCCL_IB_GID_INDEX"] == "1"  # index 0 is the link-local GID
    assert env.variables["UCX_NET_DEVICES"] == "rxe0:1"


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        # ECN off in the profile: no ECT bit (Meta's PFC-only profile)
        ({"ecn": {"enabled": False}}, {"NCCL_IB_TC": "104", "UCX_IB_TRAFFIC_CLASS": "104"}),
        # ECN on, but not on the RoCE priority's queue
        ({"ecn": {"enabled": True, "queues": {4: {}}}}, {"NCCL_IB_TC": "104"}),
        # PCP trust anywhere: the SL is the Ethernet priority, printed for NCCL and UCX
        ({"trust": "pcp"}, {"NCCL_IB_SL": "3", "UCX_IB_SL": "3"}),
        ({"nic": {"trust": "pcp"}}, {"NCCL_IB_SL": "3", "UCX_IB_SL": "3"}),
        # tune's recommendation, merged by the user
        (
            {"job": {"qps_per_connection": 4, "split_data_on_qps": True}},
            {"NCCL_IB_QPS_PER_CONNECTION": "4", "NCCL_IB_SPLIT_DATA_ON_QPS": "1"},
        ),
        ({"job": {"split_data_on_qps": False}}, {"NCCL_IB_SPLIT_DATA_ON_QPS": "0"}),
        # a class for control messages: CNP's (DSCP 48, strict priority 6, not ECN-marked)
        ({"job": {"control": {"dscp": 48, "priority": 6}}}, {"NCCL_IB_FIFO_TC": "192"}),
    ],
)
def test_profile_decides(changes: dict[str, Any], expected: dict[str, str]) -> None:
    env = _env(_intent(RXE, profile=_profile("nvidia-default", **changes)), "h1")
    assert env.ok
    assert {k: env.variables.get(k) for k in expected} == expected


def test_variable_order_nccl_then_ucx() -> None:
    profile = _profile(
        "nvidia-default",
        trust="pcp",
        job={"qps_per_connection": 2, "control": {"dscp": 48, "priority": 6}},
    )
    names = list(_env(_intent(RXE, profile=profile), "h1").variables)
    assert names == [
        "NCCL_IB_HCA", "NCCL_IB_GID_INDEX", "NCCL_IB_TC", "NCCL_IB_SL", "NCCL_IB_FIFO_TC",
        "NCCL_IB_QPS_PER_CONNECTION",
        "UCX_NET_DEVICES", "UCX_IB_GID_INDEX", "UCX_IB_TRAFFIC_CLASS", "UCX_IB_SL",
    ]  # fmt: skip


def test_profiles_shipped_give_their_classes() -> None:
    for path in sorted(PROFILES.glob("*.yml")):
        profile = Profile.model_validate(yaml.safe_load(path.read_text()))
        value = traffic_class(profile, profile.roce)
        assert value >> 2 == profile.roce.dscp, path.name
        ecn = profile.ecn.enabled and profile.roce.priority in profile.ecn.queues
        assert value & 0b11 == (0b10 if ecn else 0), path.name


# ------------------------------------------------------------------ refusals


def test_a_second_address_moves_one_port_to_another_index() -> None:
    # mlx5_1's GID for 198.18.1.111 sits at index 5 in the recorded tree: NCCL takes one
    # index per process, so the host is refused rather than given an average or the first.
    gpu = _host(
        "gpu1", ("ens1f0np0", "mlx5_0", "198.18.0.11"), ("ens1f1np1", "mlx5_1", "198.18.1.111")
    )
    env = _env(_intent(gpu), "gpu1")
    assert not env.ok
    assert env.problems == [
        "host gpu1: NCCL_IB_GID_INDEX: Expected: one RoCE v2 GID index for every fabric port "
        "(one value per process) Actual: mlx5_0:1 index 3, mlx5_1:1 index 5; leave it unset "
        "and let NCCL >= 2.21 pick each device's IPv4 RoCE v2 GID (NCCL_IB_ADDR_FAMILY, "
        "NCCL_IB_ROCE_VERSION_NUM)"
    ]
    assert "NCCL_IB_GID_INDEX" not in env.variables and "UCX_IB_GID_INDEX" not in env.variables


@pytest.mark.parametrize(
    ("slots", "actual"),
    [
        # only RoCE v1 for the address: not routable, NVIDIA/nccl#426-style
        (
            {
                0: (LINK_LOCAL, "IB/RoCE v1", "eth1"),
                1: (_mapped("198.18.5.1"), "IB/RoCE v1", "eth1"),
            },
            "index 0 fe80::5054:ff:fe12:3401 RoCE v1 eth1; index 1 198.18.5.1 RoCE v1 eth1",
        ),
        # only IPv6 GIDs (a NIC that never got the IPv4 address)
        ({0: (LINK_LOCAL, "RoCE v2", "eth1")}, "index 0 fe80::5054:ff:fe12:3401 RoCE v2 eth1"),
        # the address is on another netdev of the same port (a VLAN)
        (
            {0: (LINK_LOCAL, "RoCE v2", "eth1"), 1: (_mapped("198.18.5.1"), "RoCE v2", "eth1.7")},
            "index 0 fe80::5054:ff:fe12:3401 RoCE v2 eth1; index 1 198.18.5.1 RoCE v2 eth1.7",
        ),
        ({}, "no GIDs"),
    ],
)
def test_no_roce_v2_ipv4_gid(tmp_path: Path, slots: dict[int, Any], actual: str) -> None:
    _tree(tmp_path, "rxe0", slots)
    intent = _intent(_host("h9", ("eth1", "rxe0", "198.18.5.1")))
    env = _env(intent, "h9", tmp_path)
    assert env.problems == [
        f"host h9: rxe0 port 1 netdev eth1: Expected: a RoCE v2 GID for 198.18.5.1 Actual: {actual}"
    ]
    assert "NCCL_IB_GID_INDEX" not in env.variables
    assert env.as_json()["ports"][0]["problem"] == env.problems[0]


def test_names_that_share_a_prefix_get_exact_match(tmp_path: Path) -> None:
    for device, ipv4 in (("mlx5_1", "198.18.7.1"), ("mlx5_10", "198.18.7.3")):
        _tree(tmp_path, device, {0: (_mapped(ipv4), "RoCE v2", f"if{device[5:]}")})
    alone = _intent(_host("g", ("if_1", "mlx5_1", "198.18.7.1")))
    # mlx5_10 is on the host, not in the fabric: NCCL would take it too without "="
    assert _env(alone, "g", tmp_path).variables["NCCL_IB_HCA"] == "=mlx5_1:1"
    both = _intent(_host("g", ("if_1", "mlx5_1", "198.18.7.1"), ("if_10", "mlx5_10", "198.18.7.3")))
    env = _env(both, "g", tmp_path)
    assert env.variables["NCCL_IB_HCA"] == "=mlx5_1:1,mlx5_10:1"
    assert env.variables["UCX_NET_DEVICES"] == "mlx5_1:1,mlx5_10:1"  # UCX matches names exactly


@pytest.mark.parametrize(
    ("facts", "problem"),
    [
        (
            HostFacts("gpu1", error="host gpu1: cannot connect to 192.0.2.1:22"),
            "host gpu1: cannot connect to 192.0.2.1:22",
        ),
        (
            HostFacts("gpu1", results={"gids": CommandResult("gids", 126, "sh: denied\n")}),
            "host gpu1: cannot read the GID table: `gids`: exit 126 (sh: denied)",
        ),
        (
            HostFacts("gpu1", results={"gids": CommandResult("gids-script", 0, "DEV\tPORT\n")}),
            "host gpu1: the GID table read is not one: show_gids: Expected: a closing "
            "n_gids_found=<count> line Actual: none (cut short?)",
        ),
        (HostFacts("gpu1"), "host gpu1: the GID table was not read (no `gids` source)"),
    ],
)  # fmt: skip
def test_a_host_that_cannot_tell(facts: HostFacts, problem: str) -> None:
    """A host that could not be read, or whose GID table could not: the problem named, the
    GID index not set (null with the reason), and every variable the intent alone decides
    still given (issue #41, finding 4)."""
    device = _intent(GPU1).device("gpu1")
    assert device is not None
    facts.ports = _facts(_intent(GPU1), "gpu1").ports  # collection always names the ports
    env = job_environment(_intent(GPU1), facts)
    assert env.problems == [problem]
    assert env.not_set == {
        "NCCL_IB_GID_INDEX": f"not read: {problem}",
        "UCX_IB_GID_INDEX": f"not read: {problem}",
    }
    assert env.variables == {
        "NCCL_IB_HCA": "mlx5_0:1,mlx5_1:1",
        "NCCL_IB_TC": "106",
        "UCX_NET_DEVICES": "mlx5_0:1,mlx5_1:1",
        "UCX_IB_TRAFFIC_CLASS": "106",
    }
    document = env.as_json()
    assert document["variables"]["NCCL_IB_GID_INDEX"] is None
    assert document["not_set"]["NCCL_IB_GID_INDEX"] == f"not read: {problem}"
    assert not document["ok"]


def test_a_host_without_rdma_ports() -> None:
    h4 = {"name": "h4", "platform": "linux_host", "role": "host", "netns": "ns-h4",
          "ports": [{"name": "eth1", "speed": "10G", "cable_m": 3, "mtu": 9000,
                    "ipv4": "198.18.9.1/31"}]}  # fmt: skip
    env = _env(_intent(RXE, h4), "h4")
    assert env.problems == [
        "host h4: Expected: a port with an rdma_device in the fabric Actual: none (nothing for "
        "NCCL_IB_HCA)"
    ]


# ------------------------------------------------------------------ intent: the job section


def test_control_class_must_be_mapped_by_the_profile() -> None:
    with pytest.raises(ValidationError, match=r"job.control: Expected: DSCP 40 sent to priority 5"):
        Profile.model_validate(
            _profile("nvidia-default", job={"control": {"dscp": 40, "priority": 5}})
        )
    mapped = _profile(
        "nvidia-default", dscp_map={5: [40]}, job={"control": {"dscp": 40, "priority": 5}}
    )
    assert Profile.model_validate(mapped).job.control is not None


@pytest.mark.parametrize("qps", [0, 129, -1])
def test_qps_range(qps: int) -> None:
    with pytest.raises(ValidationError, match="qps_per_connection"):
        Profile.model_validate(_profile("nvidia-default", job={"qps_per_connection": qps}))


# ------------------------------------------------------------------ properties


@given(
    dscp=st.integers(0, 63),
    priority=st.integers(0, 7),
    ecn=st.booleans(),
    queue=st.integers(0, 7),
)
def test_traffic_class_carries_the_dscp(dscp: int, priority: int, ecn: bool, queue: int) -> None:
    profile = Profile.model_validate(
        {"name": "p", "roce": {"dscp": dscp, "priority": priority},
         "cnp": {"dscp": (dscp + 1) % 64, "priority": 6},
         "ecn": {"enabled": ecn, "queues": {queue: {}}}}
    )  # fmt: skip
    value = traffic_class(profile, profile.roce)
    assert 0 <= value <= 255
    assert value >> 2 == dscp
    assert value & 0b11 == (0b10 if ecn and queue == priority else 0)  # never CE (0b11)


NAMES = st.from_regex(r"[a-z]{2,4}_?[0-9]{1,2}", fullmatch=True)


@given(
    listed=st.lists(NAMES, min_size=1, max_size=4, unique=True), others=st.lists(NAMES, max_size=4)
)
def test_exact_match_exactly_when_a_prefix_would_catch_another(
    listed: list[str], others: list[str]
) -> None:
    from agent.observe.hostfacts import RdmaPortFacts

    ports = [RdmaPortFacts(f"p{i}", name, 1, f"p{i}", None) for i, name in enumerate(listed)]
    value = hca_list(ports, set(listed) | set(others))
    exact = value.startswith("=")
    names = [entry.partition(":")[0] for entry in value.lstrip("=").split(",")]
    assert names == listed
    # NCCL without "=" selects every device whose name starts with a listed one
    caught = {o for o in set(listed) | set(others) for n in listed if o.startswith(n)}
    assert exact == (caught != set(listed))


# ------------------------------------------------------------------ tune's override carries the QPs


class _Tuned:
    """What override_document and apply_steps read of a TuneResult: the switch/NIC override
    and the collective objective's QPs per connection."""

    def __init__(self, qps: int | None) -> None:
        self.qps = qps

    def override(self) -> dict[str, Any]:
        return {"ecn": {"queues": {3: {"min_threshold": 20000, "max_threshold": 80000}}}}

    def qps_per_connection(self) -> int | None:
        return self.qps

    def decision(self) -> Any:
        # The override above changes the ECN thresholds: a decision with changes.
        return SimpleNamespace(changes=True)


@pytest.mark.parametrize(
    ("qps", "existing", "job", "variables"),
    [
        (4, {}, {"qps_per_connection": 4, "split_data_on_qps": True},
         {"NCCL_IB_QPS_PER_CONNECTION": "4", "NCCL_IB_SPLIT_DATA_ON_QPS": "1"}),
        # one QP: split mode cleared, also a stale true from an earlier run
        (1, {"job": {"qps_per_connection": 8, "split_data_on_qps": True}},
         {"qps_per_connection": 1, "split_data_on_qps": None},
         {"NCCL_IB_QPS_PER_CONNECTION": "1", "NCCL_IB_SPLIT_DATA_ON_QPS": None}),
        # no collective objective: no job values, the existing ones kept
        (None, {"job": {"qps_per_connection": 2}}, {"qps_per_connection": 2},
         {"NCCL_IB_QPS_PER_CONNECTION": "2", "NCCL_IB_SPLIT_DATA_ON_QPS": None}),
    ],
)  # fmt: skip
def test_tune_override_reaches_the_job_environment(
    tmp_path: Path,
    qps: int | None,
    existing: dict[str, Any],
    job: dict[str, Any],
    variables: dict[str, str | None],
) -> None:
    from agent.app.tune import apply_steps, override_document
    from agent.intent.loader import load_fabric

    document = override_document(_Tuned(qps), existing)  # type: ignore[arg-type]
    assert document is not None and document["overrides"]["job"] == job
    fabric = tmp_path / "fabric.yml"
    fabric.write_text(
        yaml.safe_dump(
            {"name": "t", "profile": "nvidia-default", **document, "devices": [RXE]},
            sort_keys=False,
        )
    )
    intent = load_fabric(fabric).intent
    env = job_environment(intent, _facts(intent, "h1"))
    assert {k: env.variables.get(k) for k in variables} == variables
    steps = apply_steps(_Tuned(qps), fabric, None)  # type: ignore[arg-type]
    said = [s for s in steps if s.startswith("jobs:")]
    if qps is None:
        assert said == []
    else:
        assert said == [
            f"jobs: the override's job.qps_per_connection={qps} makes it the fabric's; "
            f"`roce-agent nccl {fabric}` then prints NCCL_IB_QPS_PER_CONNECTION={qps}"
            + (" NCCL_IB_SPLIT_DATA_ON_QPS=1" if qps > 1 else "")
            + " for the job's environment"
        ]
