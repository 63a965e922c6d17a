"""Hostile captures for ``probe analyze`` (issue #42 item 8): pcapng blocks that are not
packets used to be read without any cap (a 200 MB file of interface blocks: 782 MB, 30 s;
``--max-frames`` and ``--max-bytes`` counted packets only). Each case runs the real command
in a forked process under 2 GiB (tests/unit/bounded_cli.py) and must end within 5 s under
1.5 GB: exit 2 naming the file and the byte offset, or a warning that a cap stopped it.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from agent.observe.probes.pcap import MAX_OTHER_BLOCKS
from tests.unit.bounded_cli import BoundedCli, bounded_runner
from tests.unit.test_capture_hostile import block, frames, pcapng

SHB = block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
IDB = block(1, struct.pack("<HHI", 1, 0, 262144))
NRB = block(4, struct.pack("<HH", 0, 0))  # an empty name resolution block
CUSTOM = block(0x00000BAD, b"\x00" * 16)  # a custom block, copied as is
SECONDS, MEMORY = 5.0, 1.5e9
cli = pytest.fixture(scope="module", name="cli")(bounded_runner)


def interface_flood(path: Path, size: int) -> Path:
    """The issue's file: a section header, then interface blocks until ``size`` bytes."""
    with path.open("wb") as out:
        out.write(SHB)
        chunk = IDB * 50_000
        for _ in range(size // len(chunk)):
            out.write(chunk)
    return path


def written(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    ("case", "make", "offset"),
    [
        ("200 MB of interface blocks", lambda p: interface_flood(p, 200 << 20),
         len(SHB) + (MAX_OTHER_BLOCKS - 1) * len(IDB)),
        ("name resolution blocks", lambda p: written(p, SHB + IDB + NRB * MAX_OTHER_BLOCKS),
         len(SHB) + len(IDB) + (MAX_OTHER_BLOCKS - 2) * len(NRB)),
        ("custom blocks", lambda p: written(p, SHB + CUSTOM * (MAX_OTHER_BLOCKS + 5)),
         len(SHB) + (MAX_OTHER_BLOCKS - 1) * len(CUSTOM)),
    ],
)  # fmt: skip
def test_too_many_blocks_that_are_not_packets_is_a_located_error(
    tmp_path: Path, cli: BoundedCli, case: str, make: object, offset: int
) -> None:
    path = make(tmp_path / "hostile.pcapng")  # type: ignore[operator]
    run = cli.run("probe", "analyze", str(path), "--output", "json")
    assert run.code == 2, (case, run.stderr[-1000:])
    assert f"{path}: byte {offset}: too many pcapng blocks that are not packets" in run.stderr, (
        case,
        run.stderr[-1000:],
    )
    assert run.seconds < SECONDS and run.max_rss_kb * 1024 < MEMORY, (case, run.seconds)
    assert "Traceback" not in run.stderr


def test_the_byte_cap_counts_blocks_that_are_not_packets(tmp_path: Path, cli: BoundedCli) -> None:
    """300 KB of a custom block before the packets: --max-bytes 100000 stops before them."""
    big = block(0x00000BAD, b"\x00" * 300_000)
    data = pcapng([1], ((0, i * 0.001, f) for i, f in enumerate(frames())))
    path = written(tmp_path / "big-block.pcapng", data[: len(SHB)] + big + data[len(SHB) :])
    run = cli.run("probe", "analyze", str(path), "--output", "json", "--max-bytes", "100000")
    assert run.code == 0, run.stderr[-1000:]
    assert "byte cap reached: the first 0 frames and 1 other pcapng blocks" in run.stderr
    assert run.seconds < SECONDS and run.max_rss_kb * 1024 < MEMORY
