"""Parsers of the host pre-flight sources (agent/observe/hostparse.py) on the recorded outputs
of tests/data/hosts (README there names each one's source), plus property tests: outputs
generated in the same formats at values not recorded, and hostile text, which must give a
:class:`HostParseError` naming the source (never another exception, never a value)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.intent.sizing import IB_MTUS, IBOE_MTU_OVERHEAD, roce_mtu
from agent.observe.hostparse import (
    HostParseError,
    bridges_between,
    parse_dcb_app_dscp,
    parse_dcb_pfc,
    parse_devlink_param,
    parse_gpu_bus_ids,
    parse_ibv_devinfo,
    parse_lspci_acs,
    parse_mtu,
    parse_pci_paths,
    parse_rdma_device,
    parse_traffic_class,
)

HOSTS = Path(__file__).resolve().parents[1] / "data" / "hosts"


def text(name: str) -> str:
    return (HOSTS / name).read_text()


@pytest.mark.parametrize(
    ("name", "cap", "enabled"),
    [("dcb_pfc_man_example.txt", 8, (6, 7)), ("dcb_pfc_prio3.txt", 8, (3,))],
)
def test_dcb_pfc(name: str, cap: int, enabled: tuple[int, ...]) -> None:
    parsed = parse_dcb_pfc(text(name))
    assert (parsed.pfc_cap, parsed.enabled) == (cap, enabled)


@pytest.mark.parametrize(
    ("name", "table"),
    [
        ("dcb_app_man_example.txt", {0: (0,), 24: (2, 3), 48: (6,)}),
        ("dcb_app_roce.txt", {26: (3,), 48: (6,)}),
        ("dcb_app_empty.txt", {}),
    ],
)
def test_dcb_app(name: str, table: dict[int, tuple[int, ...]]) -> None:
    assert parse_dcb_app_dscp(text(name)) == table


@pytest.mark.parametrize(
    ("name", "exists", "forced"),
    [
        ("traffic_class_106.txt", True, 106),
        ("traffic_class_236.txt", True, 236),
        ("traffic_class_unset.txt", True, None),
        ("traffic_class_absent.txt", False, None),
    ],
)
def test_traffic_class(name: str, exists: bool, forced: int | None) -> None:
    parsed = parse_traffic_class(text(name))
    assert (parsed.exists, parsed.global_tclass) == (exists, forced)


def test_traffic_class_rules_after_the_global_one() -> None:
    # traffic_class_show prints the global line, then one line per rule (tclass_print_*)
    parsed = parse_traffic_class("Global tclass=106\ndst_ip=10.0.0.0/8,tclass=104\n")
    assert parsed.global_tclass == 106 and parsed.rules == ("dst_ip=10.0.0.0/8,tclass=104",)


@pytest.mark.parametrize(
    ("name", "value"),
    [("devlink_enable_roce_true.txt", "true"), ("devlink_enable_roce_false.txt", "false")],
)
def test_devlink_enable_roce(name: str, value: str) -> None:
    assert parse_devlink_param(text(name), "enable_roce") == {"driverinit": value}


@pytest.mark.parametrize(
    ("name", "layer", "rxe", "driver", "pci"),
    [
        ("rdma_device_rxe.txt", "Ethernet", True, None, None),
        ("rdma_device_mlx5.txt", "Ethernet", False, "mlx5_core", "0000:06:00.0"),
        ("rdma_device_ib.txt", "InfiniBand", False, "mlx5_core", "0000:06:00.0"),
    ],
)
def test_rdma_device(name: str, layer: str, rxe: bool, driver: str | None, pci: str | None) -> None:
    parsed = parse_rdma_device(text(name))
    assert (parsed.link_layer, parsed.is_rxe, parsed.driver, parsed.pci) == (
        layer, rxe, driver, pci,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("name", "max_mtu", "active", "layer"),
    [
        ("ibv_devinfo_rxe.txt", 4096, 1024, None),
        ("ibv_devinfo_mlx5_azure.txt", 4096, 1024, "Ethernet"),
    ],
)
def test_ibv_devinfo(name: str, max_mtu: int, active: int, layer: str | None) -> None:
    port = parse_ibv_devinfo(text(name))[1]
    assert (port.state, port.max_mtu, port.active_mtu, port.link_layer) == (
        "PORT_ACTIVE", max_mtu, active, layer,
    )  # fmt: skip


def test_gpu_bus_ids_become_sysfs_names() -> None:
    assert parse_gpu_bus_ids(text("nvidia_smi_bus_ids.txt")) == ["0000:05:00.0", "0000:85:00.0"]


def test_pci_paths_and_the_bridges_between_a_gpu_and_its_nic() -> None:
    paths = parse_pci_paths(text("pci_paths_plx.txt"))
    assert paths.rdma == {"mlx5_0": "0000:06:00.0"}
    gpu, nic = paths.chain("0000:05:00.0"), paths.chain("0000:06:00.0")
    assert gpu is not None and nic is not None
    # the switch's upstream port where they meet, and the two downstream ports
    assert bridges_between(gpu, nic) == ["0000:03:00.0", "0000:04:08.0", "0000:04:10.0"]


@pytest.mark.parametrize(
    ("name", "bridge", "enabled"),
    [
        ("lspci_acs_on.txt", "0000:04:08.0", ["ReqRedir", "CmpltRedir"]),
        ("lspci_acs_on.txt", "0000:00:03.0", ["SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd"]),
        ("lspci_acs_off.txt", "0000:04:08.0", []),
    ],
)
def test_lspci_acs(name: str, bridge: str, enabled: list[str]) -> None:
    functions = parse_lspci_acs(text(name))
    assert functions[bridge].enabled == enabled
    assert functions["0000:03:00.0"].flags is None  # the upstream port has no ACS capability
    assert functions["0000:05:00.0"].description.startswith("3D controller: NVIDIA")


def test_lspci_without_root_shows_access_denied() -> None:
    functions = parse_lspci_acs(text("lspci_no_root.txt"))
    assert all(f.access_denied and f.flags is None for f in functions.values())


@pytest.mark.parametrize(
    ("netdev_mtu", "ib_mtu"),
    [(9000, 4096), (4192, 4096), (4191, 2048), (1500, 1024), (1280, 1024), (351, None)],
)
def test_roce_mtu(netdev_mtu: int, ib_mtu: int | None) -> None:
    assert roce_mtu(netdev_mtu) == ib_mtu


HOSTILE = [
    (parse_dcb_pfc, "pfc-cap 8\nprio-pfc 0:off 1:on\n", "one entry for each priority"),
    (parse_dcb_pfc, "pfc-cap 8 macsec-bypass off delay 0\n", "a prio-pfc line"),
    (parse_dcb_pfc, "prio-pfc 0:maybe\n", "PRIO:on|off"),
    (parse_dcb_app_dscp, "dscp-prio CS3:3\n", "numeric DSCP:PRIO"),
    (parse_dcb_app_dscp, "Attribute read: Operation not supported\n", "dscp-prio DSCP:PRIO"),
    (parse_dcb_app_dscp, "dscp-prio 64:3\n", "DSCP 0-63"),
    (parse_traffic_class, "Global tclass=999\n", "Global tclass=0-255"),
    (parse_traffic_class, "cat: Permission denied\n", "Global tclass=N"),
    (parse_devlink_param, "pci/0000:06:00.0:\n  name other type generic\n", "enable_roce"),
    (parse_rdma_device, "garbage\n", "link_layer="),
    (parse_mtu, "9000 bytes\n", "a number"),
    (parse_ibv_devinfo, "No IB devices found\n", "a port: block"),
    (parse_gpu_bus_ids, "GPU 0: NVIDIA A100\n", "DOMAIN:BUS:DEVICE.FUNCTION"),
    (parse_pci_paths, "pci /sys/devices/virtual/net/lo\n", "a sysfs PCI device path"),
    (parse_lspci_acs, "00:01.0 PCI bridge: x\n", "DOMAIN:BUS:DEV.FN"),
    (parse_lspci_acs, "0000:00:01.0 PCI bridge: x\n\t\tACSCtl:\tSrcValid?\n", "Name+ or Name-"),
]


@pytest.mark.parametrize(("parser", "bad", "words"), HOSTILE)
def test_hostile_text_is_an_error_naming_the_source(parser: object, bad: str, words: str) -> None:
    with pytest.raises(HostParseError, match=None) as raised:
        if parser is parse_devlink_param:
            parse_devlink_param(bad, "enable_roce")
        else:
            parser(bad)  # type: ignore[operator]
    assert words in str(raised.value) and "Expected" in str(raised.value)


# --------------------------------------------------------------------------- properties

PRIORITIES = st.sets(st.integers(0, 7))


@given(enabled=PRIORITIES, cap=st.integers(0, 8), delay=st.integers(0, 65535))
def test_dcb_pfc_property(enabled: set[int], cap: int, delay: int) -> None:
    # dcb_pfc_print: "pfc-cap %d macsec-bypass %s delay %d", then "prio-pfc " + "N:on|off "
    prio = " ".join(f"{p}:{'on' if p in enabled else 'off'}" for p in range(8))
    output = f"pfc-cap {cap} macsec-bypass off delay {delay} \nprio-pfc {prio} \n"
    assert parse_dcb_pfc(output).enabled == tuple(sorted(enabled))


@given(st.lists(st.tuples(st.integers(0, 63), st.integers(0, 7)), max_size=64))
def test_dcb_app_property(pairs: list[tuple[int, int]]) -> None:
    output = ("dscp-prio " + " ".join(f"{d}:{p}" for d, p in pairs) + "\n") if pairs else ""
    table = parse_dcb_app_dscp(output)
    assert sorted((d, p) for d, ps in table.items() for p in ps) == sorted(pairs)


FLAGS = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl",
         "DirectTrans")  # fmt: skip


@given(
    on=st.lists(st.sets(st.sampled_from(FLAGS)), min_size=1, max_size=6),
    bus=st.integers(0, 255),
)
def test_lspci_acs_property(on: list[set[str]], bus: int) -> None:
    # show_device's address line, tab-indented details, cap_acs's two lines, a blank line
    blocks = []
    for function, flags in enumerate(on):
        ctl = " ".join(f"{f}{'+' if f in flags else '-'}" for f in FLAGS)
        blocks.append(
            f"0000:{bus:02x}:{function:02x}.0 PCI bridge: Vendor Device\n"
            "\tCapabilities: [148 v1] Access Control Services\n"
            f"\t\tACSCap:\t{ctl}\n\t\tACSCtl:\t{ctl}\n\tKernel driver in use: pcieport\n"
        )
    parsed = parse_lspci_acs("\n".join(blocks))
    for function, flags in enumerate(on):
        got = parsed[f"0000:{bus:02x}:{function:02x}.0"].enabled
        assert got == [f for f in FLAGS if f in flags]


BDF = st.builds(
    lambda b, d, f: f"0000:{b:02x}:{d:02x}.{f}", st.integers(0, 255), st.integers(0, 31),
    st.integers(0, 7),
)  # fmt: skip


@given(
    functions=st.lists(BDF, min_size=2, max_size=10, unique=True),
    split=st.tuples(st.integers(0, 4), st.integers(1, 3)),
)
def test_bridges_between_property(functions: list[str], split: tuple[int, int]) -> None:
    # a real tree: every function appears once; the chains share a prefix, then part
    shared, below = min(split[0], len(functions) - 2), split[1]
    common, rest = functions[:shared], functions[shared:]
    gpu_chain = (*common, *rest[: min(below, len(rest) - 1)])
    nic_chain = (*common, *rest[len(gpu_chain) - shared :])
    bridges = bridges_between(gpu_chain, nic_chain)
    assert gpu_chain[-1] not in bridges and nic_chain[-1] not in bridges  # endpoints excluded
    below_gpu, below_nic = set(gpu_chain[shared:-1]), set(nic_chain[shared:-1])
    assert set(bridges) == below_gpu | below_nic | ({common[-1]} if common else set())
    assert len(bridges) == len(set(bridges))


@given(st.integers(0, 70000))
def test_roce_mtu_property(netdev_mtu: int) -> None:
    mtu = roce_mtu(netdev_mtu)
    if mtu is None:
        assert netdev_mtu < IB_MTUS[0] + IBOE_MTU_OVERHEAD
    else:
        assert mtu in IB_MTUS and mtu + IBOE_MTU_OVERHEAD <= netdev_mtu
        bigger = [m for m in IB_MTUS if m > mtu]
        assert not bigger or bigger[0] + IBOE_MTU_OVERHEAD > netdev_mtu


@given(st.text(max_size=300))
def test_garbage_never_escapes_as_another_exception(garbage: str) -> None:
    for parser in (parse_dcb_pfc, parse_dcb_app_dscp, parse_traffic_class, parse_rdma_device,
                   parse_mtu, parse_ibv_devinfo, parse_gpu_bus_ids, parse_pci_paths,
                   parse_lspci_acs):  # fmt: skip
        with contextlib.suppress(HostParseError):
            parser(garbage)
    with contextlib.suppress(HostParseError):
        parse_devlink_param(garbage, "enable_roce")
