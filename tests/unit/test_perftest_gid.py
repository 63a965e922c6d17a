"""RoCE v2 GID choice (agent.observe.perftest.gid) on fake sysfs trees and show_gids output.

Trees: tests/data/perftest/sysfs (README there); tests/data/sysfs is the exporter's recorded
mlx5 tree, which has no GID table at all.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.observe.perftest.gid import (
    GidEntry,
    GidSelectionError,
    check_netdev,
    check_rdma_device,
    gid_index,
    parse_show_gids,
    read_gid_table,
    select_gid,
    tclass_for,
)

DATA = Path(__file__).resolve().parents[1] / "data"
SYSFS = DATA / "perftest" / "sysfs"
SHOW_GIDS = (DATA / "perftest" / "show_gids_mlx5.txt").read_text()

# (device, netdev, ipv4) -> index
CHOICES = [
    ("rxe0", "eth1", None, 1),
    ("rxe0", "eth1", "198.18.99.1", 1),
    ("mlx5_0", "ens1f0np0", None, 3),
    ("mlx5_0", "ens1f0np0", "198.18.0.11", 3),
    ("mlx5_1", "ens1f1np1", "198.18.1.11", 3),
    ("mlx5_1", "ens1f1np1", "198.18.1.111", 5),
    ("mlx5_1", "ens1f1np1.100", None, 7),
    ("mlx5_1", "ens1f1np1.100", "198.18.2.11", 7),
]


@pytest.mark.parametrize(("device", "netdev", "ipv4", "index"), CHOICES)
def test_sysfs_choice(device: str, netdev: str, ipv4: str | None, index: int) -> None:
    assert gid_index(SYSFS, device, 1, netdev, ipv4) == index


@pytest.mark.parametrize(("device", "netdev", "ipv4", "index"), CHOICES[2:])
def test_show_gids_agrees_with_sysfs(
    device: str, netdev: str, ipv4: str | None, index: int
) -> None:
    entry = select_gid(parse_show_gids(SHOW_GIDS), device=device, port=1, netdev=netdev, ipv4=ipv4)
    assert entry.index == index
    assert entry.source == "show_gids"


def test_show_gids_rows_equal_the_sysfs_table() -> None:
    parsed = parse_show_gids(SHOW_GIDS)
    from_sysfs = read_gid_table(SYSFS, "mlx5_0", 1) + read_gid_table(SYSFS, "mlx5_1", 1)

    def key(entry: GidEntry) -> tuple[object, ...]:
        return (entry.device, entry.port, entry.index, entry.gid, entry.version, entry.netdev)

    assert [key(e) for e in parsed] == [key(e) for e in from_sysfs]
    assert len(parsed) == 12


def test_sysfs_table_skips_unused_slots() -> None:
    table = read_gid_table(SYSFS, "rxe0", 1)
    assert [(e.index, e.version, e.netdev) for e in table] == [(0, "v2", "eth1"), (1, "v2", "eth1")]
    assert str(table[1].ipv4) == "198.18.99.1"
    assert table[0].ipv4 is None
    assert table[1].describe() == "index 1 198.18.99.1 RoCE v2 eth1"


def _tree(root: Path, slots: dict[int, tuple[str, str | None, str | None]]) -> Path:
    base = root / "class" / "infiniband" / "mlx5_7" / "ports" / "1"
    for sub in ("gids", "gid_attrs/types", "gid_attrs/ndevs"):
        (base / sub).mkdir(parents=True)
    for index, (gid, kind, ndev) in slots.items():
        (base / "gids" / str(index)).write_text(gid + "\n")
        if kind == "EINVAL":  # a read that fails: a directory where a file should be
            (base / "gid_attrs" / "types" / str(index)).mkdir()
        elif kind is not None:
            (base / "gid_attrs" / "types" / str(index)).write_text(kind + "\n")
        if ndev is not None:
            (base / "gid_attrs" / "ndevs" / str(index)).write_text(ndev + "\n")
    return root


V4 = "0000:0000:0000:0000:0000:ffff:c612:0a0b"


def test_unreadable_type_is_never_chosen(tmp_path: Path) -> None:
    root = _tree(tmp_path, {0: (V4, "EINVAL", "eth9"), 1: (V4, "RoCE v2", "eth9")})
    assert [e.version for e in read_gid_table(root, "mlx5_7", 1)] == [None, "v2"]
    assert gid_index(root, "mlx5_7", 1, "eth9") == 1


def test_roce_v1_only_is_an_error(tmp_path: Path) -> None:
    root = _tree(tmp_path, {0: (V4, "IB/RoCE v1", "eth9")})
    with pytest.raises(GidSelectionError) as caught:
        gid_index(root, "mlx5_7", 1, "eth9")
    assert str(caught.value) == (
        "mlx5_7 port 1 netdev eth9: Expected: one RoCE v2 GID with an IPv4 address "
        "Actual: index 0 198.18.10.11 RoCE v1 eth9"
    )


def test_garbage_in_gid_files_is_skipped(tmp_path: Path) -> None:
    root = _tree(tmp_path, {0: ("not a gid", "RoCE v2", "eth9"), 1: (V4, "RoCE v2", "eth9")})
    assert [e.index for e in read_gid_table(root, "mlx5_7", 1)] == [1]


# (device, netdev, ipv4, fragments of the message)
ERRORS = [
    (
        "mlx5_1", "ens1f1np1", None,
        ["mlx5_1 port 1 netdev ens1f1np1", "Expected: one RoCE v2 IPv4 GID", "Actual: 2:",
         "index 3 198.18.1.11 RoCE v2 ens1f1np1", "index 5 198.18.1.111 RoCE v2 ens1f1np1"],
    ),
    (
        "mlx5_0", "ens1f0np0", "198.18.0.99",
        ["mlx5_0 port 1 netdev ens1f0np0", "Expected: a RoCE v2 GID for 198.18.0.99",
         "index 2 198.18.0.11 RoCE v1 ens1f0np0", "index 3 198.18.0.11 RoCE v2 ens1f0np0"],
    ),
    (
        "mlx5_0", "eth7", None,
        ["mlx5_0 port 1 netdev eth7", "Actual: index 0 fe80::e42:a1ff:fe5c:1a0b RoCE v1"],
    ),
    (
        "mlx5_9", "eth1", None,
        ["mlx5_9 port 1 netdev eth1", "Expected: a GID table at", "No such file or directory"],
    ),
]  # fmt: skip


@pytest.mark.parametrize(("device", "netdev", "ipv4", "fragments"), ERRORS)
def test_errors_name_device_port_netdev_and_gids(
    device: str, netdev: str, ipv4: str | None, fragments: list[str]
) -> None:
    with pytest.raises(GidSelectionError) as caught:
        gid_index(SYSFS, device, 1, netdev, ipv4)
    for fragment in fragments:
        assert fragment in str(caught.value)


def test_recorded_mlx5_tree_without_gids() -> None:
    """The exporter's recorded tree has hw_counters and ndevs but no gids/: say so."""
    with pytest.raises(GidSelectionError, match=r"mlx5_0 port 1 netdev ens1f0np0: Expected: a GID"):
        gid_index(DATA / "sysfs", "mlx5_0", 1, "ens1f0np0")


def test_wrong_port() -> None:
    with pytest.raises(GidSelectionError, match="mlx5_0 port 2"):
        gid_index(SYSFS, "mlx5_0", 2, "ens1f0np0")


def test_entries_of_other_devices_are_ignored() -> None:
    table = parse_show_gids(SHOW_GIDS)
    with pytest.raises(GidSelectionError, match="Actual: no GIDs"):
        select_gid(table, device="mlx5_2", port=1, netdev="ens1f0np0")


@pytest.mark.parametrize(
    "name", ["../../etc", "mlx5_0/1", "", "mlx5 0", "0mlx5", "a" * 65, "mlx5_0\n"]
)
def test_device_names_that_could_leave_sysfs_are_refused(name: str) -> None:
    with pytest.raises(GidSelectionError):
        check_rdma_device(name)
    with pytest.raises(GidSelectionError):
        gid_index(SYSFS, name, 1, "eth1")


@pytest.mark.parametrize("name", ["", ".", "..", "eth/1", "a" * 16, "eth 1"])
def test_bad_netdev_names(name: str) -> None:
    with pytest.raises(GidSelectionError, match="netdev: Expected"):
        check_netdev(name)


@pytest.mark.parametrize("port", [0, 256, -1, True])
def test_bad_ports(port: int) -> None:
    with pytest.raises(GidSelectionError, match="RDMA port: Expected: 1-255"):
        read_gid_table(SYSFS, "rxe0", port)


HEADER = SHOW_GIDS.splitlines()[:2]


# name -> (text, fragment of the message)
SHOW_GIDS_GARBAGE = {
    "cut short": ("\n".join(SHOW_GIDS.splitlines()[:-1]), "n_gids_found=<count> line"),
    "count mismatch": (SHOW_GIDS.replace("n_gids_found=12", "n_gids_found=13"),
                       "Expected: 13 GID rows (n_gids_found) Actual: 12"),
    "bad count": (SHOW_GIDS.replace("n_gids_found=12", "n_gids_found=lots"),
                  "line 15: Expected: n_gids_found=<count>"),
    "short row": ("\n".join([*HEADER, "mlx5_0\t1", "n_gids_found=1"]),
                  "line 3: Expected: DEV PORT INDEX GID"),
    "bad gid": ("\n".join([*HEADER, "mlx5_0\t1\t3\tnot-a-gid\t\tv2\teth1", "n_gids_found=1"]),
                "line 3: Expected: INDEX and a GID"),
    "ipv4 disagrees with the gid": (SHOW_GIDS.replace("198.18.0.11  \tv2", "198.18.0.12  \tv2"),
                                    "line 6: IPv4 column: Expected: 198.18.0.11"),
    "extra column": (SHOW_GIDS.replace("v2\tens1f0np0", "v2\tens1f0np0\tjunk", 1),
                     "line 4: Expected: ... VER DEV"),
    "bad device": ("\n".join([*HEADER, f"../x\t1\t3\t{V4}\t\tv2\teth1", "n_gids_found=1"]),
                   "line 3: invalid RDMA device"),
    "too big": ("x" * (2**20 + 1), "at most 1048576 bytes"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(SHOW_GIDS_GARBAGE))
def test_show_gids_garbage(name: str) -> None:
    text, fragment = SHOW_GIDS_GARBAGE[name]
    with pytest.raises(GidSelectionError) as caught:
        parse_show_gids(text)
    assert fragment in str(caught.value)


def test_show_gids_without_netdev_or_version() -> None:
    """A row whose type and ndev files could not be read (show_gids prints them empty)."""
    entries = parse_show_gids("\n".join([*HEADER, f"rxe0\t1\t1\t{V4}\t198.18.10.11  \t\t",
                                         "n_gids_found=1"]))  # fmt: skip
    assert (entries[0].version, entries[0].netdev) == (None, None)
    with pytest.raises(GidSelectionError, match="RoCE v2"):
        select_gid(entries, device="rxe0", port=1, netdev="eth1")


# --------------------------------------------------------------------------- --tclass

TCLASS = [(26, True, 106), (26, False, 104), (0, True, 2), (0, False, 0), (63, True, 254),
          (46, True, 186), (24, True, 98)]  # fmt: skip


@pytest.mark.parametrize(("dscp", "ecn", "tclass"), TCLASS)
def test_tclass_table(dscp: int, ecn: bool, tclass: int) -> None:
    assert tclass_for(dscp, ecn) == tclass


def test_tclass_default_is_ecn_capable() -> None:
    assert tclass_for(26) == 106  # NVIDIA's --tclass=106 for DSCP 26


@pytest.mark.parametrize("dscp", [-1, 64, 300, True, 26.0])
def test_tclass_refuses_non_dscp(dscp: object) -> None:
    with pytest.raises(ValueError, match="DSCP: Expected: 0-63"):
        tclass_for(dscp)  # type: ignore[arg-type]


@given(st.integers(0, 63), st.booleans())
def test_tclass_is_the_tos_byte(dscp: int, ecn: bool) -> None:
    tclass = tclass_for(dscp, ecn)
    assert tclass >> 2 == dscp
    assert tclass & 0b11 == (0b10 if ecn else 0b00)  # ECT(0), never CE or ECT(1)
    assert 0 <= tclass <= 255
