"""The exporter split by ``--shard K/N``: every switch served by exactly one shard, exporter
series from the first scrape, a bad spec exits 2; and the fast text path's formatting."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.utils import floatToGoString

from agent.app.cli import main
from agent.device.state import Counters, InterfaceCounters, QueueCounters
from agent.intent.loader import load_fabric
from agent.intent.shard import WHOLE, Shard
from exporters.exporter import Exporter, ExporterOptions
from exporters.fasttext import _n, device_block, render_text
from exporters.store import FabricIndex, IntendedClass, SnapshotStore, SwitchInventory

SWITCHES = [f"leaf{i:02d}" for i in range(40)]
HOSTS = [f"h{i}" for i in range(6)]


def store_for(shard: Shard) -> SnapshotStore:
    classes = tuple(IntendedClass("Ethernet1", p, pfc=p == 3, ecn=p == 3) for p in range(8))
    return SnapshotStore(
        "dc1",
        [SwitchInventory(name, ("Ethernet1",), classes) for name in SWITCHES],
        FabricIndex(device_names=[*SWITCHES, *HOSTS]),
        shard=shard,
    )


def served(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


@pytest.mark.parametrize("count", [1, 2, 3, 4, 7])
def test_every_switch_is_served_by_exactly_one_shard(count: int) -> None:
    seen: list[str] = []
    owned_total = 0
    for index in range(1, count + 1):
        text = render_text(store_for(Shard(index, count)).snapshot()).decode()
        up = served(text, "roce_device_up")
        seen += [dict(labels)["device"] for labels in up]
        assert served(text, "roce_exporter_shard_info") == {
            (("fabric", "dc1"), ("shard", f"{index}/{count}")): 1.0
        }
        devices = served(text, "roce_exporter_devices")
        assert list(devices) == [(("fabric", "dc1"),)]
        owned_total += int(devices[(("fabric", "dc1"),)])
        # the plan of a switch is served by its shard only
        intended = {dict(labels)["device"] for labels in served(text, "roce_intended_class_info")}
        assert intended == {dict(labels)["device"] for labels in up}
    assert sorted(seen) == SWITCHES  # each exactly once
    assert owned_total == len(SWITCHES) + len(HOSTS)  # sums to the fabric's device count
    if count > 1:
        assert 0 < len(store_for(Shard(1, count)).snapshot().devices) < len(SWITCHES)


def test_a_shard_refuses_updates_for_another_shards_device() -> None:
    from exporters.store import StoreError

    shard = Shard(1, 2)
    other = next(name for name in SWITCHES if not shard.owns(name))
    store = store_for(shard)
    with pytest.raises(StoreError, match=rf"no switch named '{other}' in fabric dc1 shard 1/2"):
        store.update_counters(other, Counters(device=other, collected_at=0), 0.1)
    with pytest.raises(StoreError, match="shard 1/2"):
        store.update_drift(other, 1)


@pytest.fixture
def fabric_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ROCE_SHARD_TEST_PASSWORD", "x")
    ports = [{"name": "Ethernet1", "speed": "10M", "cable_m": 1, "mtu": 9000}]
    fabric = {
        "name": "sharded",
        "profile": "nvidia-default",
        "defaults": {
            "username": "admin",
            "credentials": {"password_env": "ROCE_SHARD_TEST_PASSWORD"},
        },
        "devices": [
            {
                "name": f"leaf{i}",
                "platform": "arista_eos",
                "role": "leaf",
                "host": "127.0.0.1",
                "port": 2300 + i,
                "ports": ports,
            }
            for i in range(12)
        ],
    }
    path = tmp_path / "fabric.yml"
    path.write_text(yaml.safe_dump(fabric))
    return path


@pytest.mark.parametrize("shard", [WHOLE, Shard(1, 3), Shard(2, 3), Shard(3, 3)])
def test_the_exporter_polls_only_its_shards_switches(fabric_file: Path, shard: Shard) -> None:
    intent = load_fabric(fabric_file).intent
    exporter = Exporter(intent, ExporterOptions(listen=None, host_nic=False, shard=shard))
    expected = [d.name for d in intent.devices if shard.owns(d.name)]
    assert exporter.switches == expected
    assert [job.name for job in exporter.jobs] == expected  # type: ignore[attr-defined]
    assert sorted(exporter.store.snapshot().devices) == sorted(expected)
    text = exporter.exposition_text().decode()
    assert f'roce_exporter_shard_info{{fabric="sharded",shard="{shard}"}} 1.0' in text


@pytest.mark.parametrize("spec", ["0/3", "4/3", "3", "a/b", "1/0", "-1/2", "1/5000"])
def test_a_bad_shard_exits_2_naming_the_option(fabric_file: Path, spec: str) -> None:
    result = CliRunner().invoke(main, ["exporter", "--fabric", str(fabric_file), "--shard", spec])
    assert result.exit_code == 2, result.output
    assert "--shard" in result.output and "Expected: K/N" in result.output
    assert "Traceback" not in result.output


def test_integers_are_formatted_as_floatToGoString_does() -> None:
    rng = random.Random(14)
    values = [0, 1, 999_999, 1_000_000, 1_000_001, 1_200_000, 10**7, 10**15, 2**53 - 1, 2**53]
    values += [2**53 + 1, 10**20, 123_456_789_012_345_678]
    values += [rng.randrange(10 ** rng.randrange(1, 19)) for _ in range(5000)]
    for value in values:
        assert _n(value) == floatToGoString(value), value


def test_a_scrape_after_a_poll_shows_the_new_values() -> None:
    """Blocks are formatted once per view and reused; a new poll must never serve old text."""
    store = store_for(WHOLE)
    for tx in (5, 7_000_000):
        store.update_counters(
            "leaf00",
            Counters(
                device="leaf00",
                collected_at=0,
                interfaces={"Ethernet1": InterfaceCounters(queues={3: QueueCounters(tx_bytes=tx)})},
            ),
            0.1,
        )
        text = render_text(store.snapshot()).decode()
        labels = (("device", "leaf00"), ("fabric", "dc1"), ("interface", "Ethernet1"))
        assert served(text, "roce_queue_transmitted_bytes_total")[(*labels, ("queue", "3"))] == tx

    def block() -> tuple[bytes, ...]:
        return device_block("dc1", store.snapshot().devices["leaf00"])

    formatted = block()
    store.record_poll_failure("leaf00", "timeout", 1.0)
    store.update_drift("leaf00", 2)
    # same counters: the formatted lines are reused, not formatted again
    assert all(new is old for new, old in zip(block(), formatted, strict=True))
    text = render_text(store.snapshot()).decode()
    assert served(text, "roce_device_up")[(("device", "leaf00"), ("fabric", "dc1"))] == 0
    assert served(text, "roce_queue_transmitted_bytes_total")[(*labels, ("queue", "3"))] == tx
