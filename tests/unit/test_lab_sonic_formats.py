"""The lab's SONiC show output cannot drift from the real format.

For every show command the agent's SONiC driver parses: (1) the driver parses the expected
output of sonic-utilities' own tests (copied verbatim, tests/data/platforms/sonic/upstream/,
see SOURCE.md) to the values those tests put in; (2) the lab's tabulate-``simple`` renderer
reproduces those upstream tables byte for byte from their cells; (3) the lab switch's output for
the same command, filled from a known data-plane counter snapshot, parses to the same structure
(same header cells) and to the snapshot's values.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from agent.device.platforms._common import text_tables
from agent.device.platforms.sonic import Sonic
from lab.mgmt.sonic.text import simple_table
from tests.unit.platform_helpers import ROOT
from tests.unit.sonic_lab_helpers import LabSonic, run

UPSTREAM = ROOT / "tests" / "data" / "platforms" / "sonic" / "upstream"

# driver key -> (lab command, upstream expected output)
COMMANDS = {
    "pfc": ("show pfc counters", "show_pfc_counters_output.txt"),
    "queue": ("show queue counters", "show_queue_counters.txt"),
    "wred": ("show queue wredcounters", "show_wred_queue_counters.txt"),
    "watermark": ("show queue watermark unicast", "show_queue_wm_unicast_output.txt"),
    "pg_drop": ("show priority-group drop counters", "show_pg_dropped_packet_stat.txt"),
    "pfcwd": ("pfcwd show stats", "pfcwd_show_stats_output.txt"),
}
PG_WATERMARKS = {
    "headroom": ("show priority-group watermark headroom", "show_pg_wm_hdrm_output.txt"),
    "shared": ("show priority-group watermark shared", "show_pg_wm_shared_output.txt"),
}


def upstream(name: str) -> str:
    return (UPSTREAM / name).read_text()


def test_driver_reads_the_upstream_outputs() -> None:
    outputs = {key: upstream(f) for key, (_, f) in COMMANDS.items()}
    counters = Sonic.counters_from_text("sw", 0.0, outputs)
    eth0 = counters.interfaces["Ethernet0"]
    assert eth0.pfc_rx == (1200, 201, 202, 203, 204, 205, 206, 207)
    assert counters.interfaces["Ethernet8"].pfc_tx == (1810, 811, 812, 813, 814, 815, 816, 817)
    assert (eth0.queues[1].tx_packets, eth0.queues[1].tx_bytes) == (60, 43)
    assert eth0.queues[1].dropped_packets == 39
    assert eth0.queues[5].ecn_marked_packets == 35
    assert eth0.queues[0].watermark_bytes == 2057328
    assert counters.interfaces["Ethernet4"].queues[3].watermark_bytes == 1986
    assert eth0.headroom_drops == (800, 801, 802, 803, 804, 805, 806, 807)
    stormed = eth0.watchdog[3]
    assert (stormed.storms_detected, stormed.storms_restored, stormed.stormed) == (1, 0, True)
    assert counters.interfaces["Ethernet4"].watchdog[3].stormed is False
    marks = Sonic.pg_watermarks_from_text(
        upstream("show_pg_wm_hdrm_output.txt"), upstream("show_pg_wm_shared_output.txt")
    )
    assert marks["Ethernet8"]["headroom"] == (800, 801, 802, 803, 804, 805, 806, 807)
    assert marks["Ethernet0"]["shared"][0] == int(
        upstream("show_pg_wm_shared_output.txt").splitlines()[3].split()[1]
    )


UPSTREAM_FILES = sorted(p.name for p in UPSTREAM.glob("*.txt"))


@pytest.mark.parametrize("name", UPSTREAM_FILES)
def test_lab_table_renderer_reproduces_upstream_tables(name: str) -> None:
    text = upstream(name)
    blocks = text.rstrip("\n").split("\n\n")
    rendered = []
    for block in blocks:
        lines = block.splitlines()
        rule = next(i for i, line in enumerate(lines) if line.startswith("---"))
        header, rows = text_tables(block)[0]
        rendered.append("\n".join([*lines[: rule - 1], simple_table(header, rows)]))
    assert "\n\n".join(rendered) == text.rstrip("\n")


def _snapshot() -> dict[str, Any]:
    """A data-plane counter snapshot with a distinct number in every cell the shows read."""

    def queues(base: int) -> dict[str, Any]:
        return {
            str(q): {
                "tx_packets": base + 10 * q,
                "tx_bytes": 1000 * (base + q),
                "tail_drops": q,
                "ecn_marked": 100 + q,
                "watermark_bytes": 2000 + q,
                "watchdog": {
                    "state": "stormed" if q == 3 else "operational",
                    "storms_detected": 2 if q == 3 else 0,
                    "storms_restored": 1 if q == 3 else 0,
                    "dropped_packets": 7 if q == 3 else 0,
                },
            }
            for q in range(8)
        }

    def port(base: int) -> dict[str, Any]:
        return {
            "pfc": {
                "rx_xoff": [base + p for p in range(8)],
                "rx_xon": [1] * 8,
                "tx_xoff": [2 * base + p for p in range(8)],
                "tx_xon": [0] * 8,
            },
            "ingress": {
                "watermark_bytes": [29000 + 1000 * p for p in range(8)],
                "headroom_drops": [base + 50 + p for p in range(8)],
            },
            "queues": queues(base),
        }

    return {"ports": {"eth1": port(1000), "eth2": port(3000)}}


def _lab_outputs() -> dict[str, str]:
    async def scenario() -> dict[str, str]:
        lab = await LabSonic().start()
        lab.dataplane.counters_snapshot = _snapshot()
        commands = {**COMMANDS, **{f"pg_{k}": v for k, v in PG_WATERMARKS.items()}}
        return {key: await lab.run(command) for key, (command, _) in commands.items()}

    result: dict[str, str] = run(scenario())
    return result


ALL = {**COMMANDS, **{f"pg_{k}": v for k, v in PG_WATERMARKS.items()}}


@pytest.mark.parametrize("key", sorted(ALL))
def test_lab_output_has_the_upstream_table_shape(key: str) -> None:
    lab_tables = text_tables(_lab_outputs()[key])
    real_tables = text_tables(upstream(ALL[key][1]))
    # queue and WRED counters print one table per port (upstream: 3 ports, the lab switch: 2)
    per_port = key in ("queue", "wred")
    assert len(lab_tables) == (2 if per_port else len(real_tables))
    for index, (lab_header, _) in enumerate(lab_tables):
        real_header = real_tables[0 if per_port else index][0]
        # upstream watermark tables have queues UC8/UC9; the lab switch has 8 queues
        assert real_header[: len(lab_header)] == lab_header
    lab_titles = [line for line in _lab_outputs()[key].splitlines() if line.endswith(":")]
    real_titles = [line for line in upstream(ALL[key][1]).splitlines() if line.endswith(":")]
    assert set(lab_titles) == set(real_titles)
    assert len(lab_titles) == (len(lab_tables) if lab_titles and per_port else len(real_titles))


def test_lab_output_parses_to_the_data_plane_counters() -> None:
    counters = Sonic.counters_from_text("leaf1", time.time(), _lab_outputs())
    eth4 = counters.interfaces["Ethernet4"]  # data-plane eth2
    assert eth4.pfc_rx == tuple(3000 + p + 1 for p in range(8))
    assert eth4.pfc_tx == tuple(6000 + p for p in range(8))
    assert eth4.queues[2].tx_packets == 3020 and eth4.queues[2].tx_bytes == 3_002_000
    assert eth4.queues[3].dropped_packets == 3 + 7  # tail + watchdog drops
    assert eth4.queues[6].ecn_marked_packets == 106
    assert eth4.queues[7].watermark_bytes == 2007
    assert eth4.headroom_drops == tuple(3050 + p for p in range(8))
    storm = eth4.watchdog[3]
    assert (storm.storms_detected, storm.storms_restored, storm.stormed) == (2, 1, True)
    assert set(counters.interfaces) == {"Ethernet0", "Ethernet4"}


def test_lab_pg_watermarks_split_at_xoff() -> None:
    outputs = _lab_outputs()
    marks = Sonic.pg_watermarks_from_text(outputs["pg_headroom"], outputs["pg_shared"])
    # fake_switch_config: xoff 30000 bytes; ingress watermarks 29000 + 1000 * priority
    assert marks["Ethernet0"]["shared"] == (29000, 30000, 30000, 30000, 30000, 30000, 30000, 30000)
    assert marks["Ethernet0"]["headroom"] == (0, 0, 1000, 2000, 3000, 4000, 5000, 6000)
