"""The agent's gNMI client against the lab switch's gNMI server (both real, over TLS, in one
process over a fake data plane): for each NOS, the counters the agent reads are the data
plane's, under the NOS's port names -- the two sides were written from the vendors' documents
independently, so this is where a path or shape that only one side believes in shows.
Seeded random counters, not hand-picked ones."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import pytest

from agent.device.gnmi import profile_for
from agent.device.gnmi.stream import Endpoint, Subscriber, subscribe_once
from agent.device.state import Counters
from lab.mgmt.names import nos_port_name
from tests.unit.lab_gnmi_support import (
    PASSWORD,
    PORTS,
    SERVER_NAME,
    USER,
    dataplane,
    make_pki,
    serving,
)

PLATFORMS = {"sonic": "sonic", "nvue": "cumulus_nvue", "eos": "arista_eos"}


def fill(snapshot: dict[str, Any], rng: random.Random) -> None:
    """Random counters in the data plane's shape; the watchdog stormed on one queue."""
    for port in snapshot["ports"].values():
        for key in ("rx_xoff", "rx_xon", "tx_xoff", "tx_xon"):
            port["pfc"][key] = [rng.randrange(10**6) for _ in range(8)]
        for queue in port["queues"].values():
            for key in ("tx_packets", "tx_bytes", "tail_drops", "ecn_marked", "watermark_bytes"):
                queue[key] = rng.randrange(10**9)
            queue["watchdog"]["storms_detected"] = rng.randrange(5)
    stormed = snapshot["ports"][PORTS[1]]["queues"]["3"]["watchdog"]
    stormed["state"] = "stormed"
    stormed["storms_detected"] = stormed["storms_restored"] + 1


async def read_once(port: int, ca_pem: bytes, nos: str, wanted: int = 2) -> list[Counters]:
    profile = profile_for(PLATFORMS[nos])
    assert profile is not None
    endpoint = Endpoint("leaf1", f"127.0.0.1:{port}", USER, PASSWORD, SERVER_NAME, ca_pem)
    got: list[Counters] = []
    task = asyncio.create_task(
        subscribe_once(Subscriber(endpoint, profile, 0.2, lambda c, _new: got.append(c)))
    )
    for _ in range(200):
        if len(got) >= wanted or task.done():
            break
        await asyncio.sleep(0.05)
    if task.done():
        task.result()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return got


def expected_pfc(port: dict[str, Any], direction: str) -> list[int]:
    return [
        a + b
        for a, b in zip(
            port["pfc"][f"{direction}_xoff"], port["pfc"][f"{direction}_xon"], strict=True
        )
    ]


@pytest.mark.parametrize("seed", [1, 7, 2026])
@pytest.mark.parametrize("nos", ["sonic", "nvue", "eos"])
def test_the_agent_reads_the_data_plane_through_each_nos(
    tmp_path: Path, nos: str, seed: int
) -> None:
    pki = make_pki(tmp_path / "pki")
    dp = dataplane()
    fill(dp.counters_snapshot, random.Random(seed))

    async def scenario() -> list[Counters]:
        async with serving(pki, nos, dp) as served:
            return await read_once(served.port, pki.ca.cert.read_bytes(), nos)

    got = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert got, "no snapshot"
    counters = got[-1]
    for index, dp_name in enumerate(PORTS, start=1):
        port = dp.counters_snapshot["ports"][dp_name]
        read = counters.interfaces[nos_port_name(nos, index)]
        assert list(read.pfc_rx) == expected_pfc(port, "rx")
        assert list(read.pfc_tx) == expected_pfc(port, "tx")
        for q, queue in read.queues.items():
            source = port["queues"][str(q)]
            assert (queue.tx_packets, queue.tx_bytes, queue.ecn_marked_packets) == (
                source["tx_packets"],
                source["tx_bytes"],
                source["ecn_marked"],
            )
        assert 3 in read.queues  # the lossless queue is reported
    stormed_port = counters.interfaces[nos_port_name(nos, 2)]
    if nos == "nvue":
        assert "watchdog" in counters.unread  # Cumulus publishes none: not read, not 0
    else:
        assert stormed_port.watchdog[3].stormed
