"""When a stream's sample is published, and how often it counts as a poll: one sample, one
poll, whether its notifications arrive together, in parts, or late (table-driven over the
arrival patterns); a path is worked out once per stream; a fleet's first subscriptions wait
their turn for a start slot."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from agent.device.gnmi import profile_for
from agent.device.gnmi.base import Folder, GnmiPath, GnmiProfile
from agent.device.gnmi.stream import COALESCE_S, Endpoint, StreamFailure, Subscriber
from agent.device.state import Counters
from exporters import telemetry
from exporters.telemetry import GnmiTarget, GnmiTelemetry
from tests.unit.gnmi_support import notification, sync

SONIC = profile_for("sonic")
NVUE = profile_for("cumulus_nvue")
assert SONIC is not None and NVUE is not None
ENDPOINT = Endpoint("leaf1", "127.0.0.1:1", "u", "p")
INTERVAL_S = 1.0
T0 = 1_800_000_000 * 10**9  # a fixed sample time; the subscriber's clock is set to it


def ports(rx: int) -> tuple[str, dict[str, bytes]]:
    fields = {"Ethernet0": {"SAI_PORT_STAT_PFC_3_RX_PKTS": str(rx)}}
    return "COUNTERS/Ethernet*", {"json_ietf_val": json.dumps(fields).encode()}


def queues(packets: int) -> tuple[str, dict[str, bytes]]:
    fields = {"Ethernet0:3": {"SAI_QUEUE_STAT_PACKETS": str(packets)}}
    return "COUNTERS/Ethernet*/Queues", {"json_ietf_val": json.dumps(fields).encode()}


def nvue_leaf(rx: int) -> tuple[str, dict[str, int]]:
    path = (
        "/qos/interfaces/interface[interface-id=swp1]/switch-priority[priority=3]"
        "/state/counters/in-pause-pkts"
    )
    return path, {"uint_val": rx}


# (what arrives, seconds after the previous message) -> (snapshots, of them new samples)
Step = tuple[Any, float]


def sonic(updates: list[tuple[str, Any]], offset_s: float) -> Any:
    return notification(updates, T0 + int(offset_s * 1e9), target="COUNTERS_DB")


def nvue(updates: list[tuple[str, Any]], offset_s: float) -> Any:
    return notification(updates, T0 + int(offset_s * 1e9))


ARRIVALS: list[tuple[str, GnmiProfile, list[Step], int, int]] = [
    ("sonic, both tables together", SONIC,
     [(sonic([ports(1)], 0), 0), (sonic([queues(1)], 0.001), 0), (sync(), 0),
      (sonic([ports(2)], 1), 0), (sonic([queues(2)], 1.001), 0),
      (sonic([ports(3)], 2), 0), (sonic([queues(3)], 2.001), 0)], 3, 3),
    ("sonic, the queue table late (the loop behind)", SONIC,
     [(sonic([ports(1)], 0), 0), (sonic([queues(1)], 0.001), 0), (sync(), 0),
      (sonic([ports(2)], 1), 0), (sonic([queues(2)], 1.001), 4 * COALESCE_S),
      (sonic([ports(3)], 2), 0), (sonic([queues(3)], 2.001), 4 * COALESCE_S)], 5, 3),
    ("sonic, a table missing from a sample", SONIC,
     [(sonic([ports(1)], 0), 0), (sonic([queues(1)], 0.001), 0), (sync(), 0),
      (sonic([ports(2)], 1), 0), (sonic([ports(3)], 2), 0), (sonic([queues(3)], 2.001), 0)],
     3, 3),
    ("nvue, one leaf a notification", NVUE,
     [(nvue([nvue_leaf(1)], 0), 0), (sync(), 0),
      (nvue([nvue_leaf(2)], 1), 0), (nvue([nvue_leaf(2)], 1.002), 0),
      (nvue([nvue_leaf(3)], 2), 0), (nvue([nvue_leaf(3)], 2.002), 0)], 3, 3),
    ("nvue, a sample's leaves split by the loop", NVUE,
     [(nvue([nvue_leaf(1)], 0), 0), (sync(), 0),
      (nvue([nvue_leaf(2)], 1), 0), (nvue([nvue_leaf(2)], 1.002), 4 * COALESCE_S),
      (nvue([nvue_leaf(3)], 2), 0)], 4, 3),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "profile", "steps", "snapshots", "samples"), ARRIVALS, ids=[a[0] for a in ARRIVALS]
)
def test_one_sample_counts_once_however_it_arrives(
    case: str, profile: GnmiProfile, steps: list[Step], snapshots: int, samples: int
) -> None:
    published: list[tuple[Counters, bool]] = []

    async def main() -> None:
        subscriber = Subscriber(
            ENDPOINT, profile, INTERVAL_S, lambda c, new: published.append((c, new)),
            clock=lambda: T0 / 1e9,
        )  # fmt: skip
        for response, delay_s in steps:
            await asyncio.sleep(delay_s)
            subscriber.apply(response)
        await asyncio.sleep(4 * COALESCE_S)
        subscriber.cancel()

    asyncio.run(main())
    assert (len(published), sum(new for _, new in published)) == (snapshots, samples)
    final = published[-1][0].interfaces
    name = "Ethernet0" if profile is SONIC else "swp1"
    assert final[name].pfc_rx[3] == 3  # the last sample's value, whole


def test_a_sonic_sample_is_published_when_complete_not_after_a_timer() -> None:
    published: list[bool] = []

    async def main() -> None:
        subscriber = Subscriber(
            ENDPOINT, SONIC, INTERVAL_S, lambda c, new: published.append(new),
            clock=lambda: T0 / 1e9,
        )  # fmt: skip
        subscriber.apply(sonic([ports(1), queues(1)], 0))
        subscriber.apply(sync())
        subscriber.apply(sonic([ports(2)], 1))
        subscriber.apply(sonic([queues(2)], 1.001))
        assert published == [True, True]  # no wait for the coalescing timer
        subscriber.cancel()

    asyncio.run(main())


class CountingProfile(type(NVUE)):  # type: ignore[misc]
    asked: list[str]

    def folder(self, path: GnmiPath) -> Folder:
        self.asked.append(path.text())
        return super().folder(path)


def test_each_path_is_worked_out_once_per_stream() -> None:
    profile = CountingProfile()
    profile.asked = []

    async def main() -> None:
        subscriber = Subscriber(
            ENDPOINT, profile, INTERVAL_S, lambda c, new: None, clock=lambda: T0 / 1e9
        )
        for second in range(5):
            subscriber.apply(nvue([nvue_leaf(second)], second))
            subscriber.apply(sync())
        subscriber.cancel()
        with pytest.raises(StreamFailure, match="not subscribed"):
            subscriber.apply(nvue([("/system/state/hostname", {"string_val": "x"})], 5))
        with pytest.raises(StreamFailure, match="not subscribed"):  # refused again, not kept
            subscriber.apply(nvue([("/system/state/hostname", {"string_val": "x"})], 5))

    asyncio.run(main())
    assert len(profile.asked) == 1


@pytest.mark.parametrize("fleet", [1, 5, telemetry.START_CONCURRENCY * 3 + 1])
def test_first_subscriptions_hold_a_start_slot_until_their_first_sample(
    fleet: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No more than START_CONCURRENCY subscriptions wait for a first sample at once; each
    frees its slot at its first sample (or its failure), so every switch gets its turn."""
    waiting: set[str] = set()
    most = 0
    synced: list[str] = []

    async def subscribe_once(subscriber: Subscriber) -> None:
        nonlocal most
        name = subscriber.endpoint.device
        waiting.add(name)
        most = max(most, len(waiting))
        await asyncio.sleep(0.01)
        waiting.discard(name)
        if name.endswith("7"):
            raise StreamFailure("timeout", "no answer")  # a failure frees its slot too
        synced.append(name)
        assert subscriber.on_sync is not None
        subscriber.on_sync()
        await asyncio.sleep(3600)  # streams on

    monkeypatch.setattr(telemetry, "subscribe_once", subscribe_once)
    monkeypatch.setattr(telemetry, "START_SPREAD_S", 0.0)
    targets = [
        GnmiTarget(Endpoint(f"leaf{i}", "127.0.0.1:1", "u", "p"), SONIC, 1.0) for i in range(fleet)
    ]
    exporter_store = _Store()
    gnmi = GnmiTelemetry(exporter_store, targets)  # type: ignore[arg-type]
    gnmi.start()
    try:
        for _ in range(500):
            if len(synced) >= sum(not t.endpoint.device.endswith("7") for t in targets):
                break
            time.sleep(0.01)
    finally:
        gnmi.stop()
    assert len(synced) == sum(not t.endpoint.device.endswith("7") for t in targets)
    assert most <= telemetry.START_CONCURRENCY
    if fleet > telemetry.START_CONCURRENCY:
        assert most == telemetry.START_CONCURRENCY


class _Store:
    """Takes what the telemetry records about failures (the test reads ``synced``)."""

    def record_poll_failure(self, device: str, reason: str, duration: Any, detail: str) -> None:
        pass
