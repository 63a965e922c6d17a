"""Sharding a fabric across agents: every device in exactly one shard, stable when N changes."""

from __future__ import annotations

import pytest

from agent.intent.shard import WHOLE, Shard, ShardError, parse_shard, shard_index

DEVICES = [f"leaf{i}" for i in range(1, 751)] + [f"spine{i}" for i in range(1, 251)]


@pytest.mark.parametrize("shards", [1, 2, 3, 4, 7, 16])
def test_every_device_in_exactly_one_shard_and_shards_balanced(shards: int) -> None:
    owners = [[s for s in range(1, shards + 1) if Shard(s, shards).owns(d)] for d in DEVICES]
    assert all(len(o) == 1 for o in owners)
    sizes = [sum(1 for o in owners if o == [s]) for s in range(1, shards + 1)]
    assert max(sizes) <= 1.25 * len(DEVICES) / shards, sizes


@pytest.mark.parametrize("shards", [1, 2, 3, 4, 9])
def test_adding_one_shard_moves_only_what_the_new_shard_takes(shards: int) -> None:
    before = {d: shard_index(d, shards) for d in DEVICES}
    after = {d: shard_index(d, shards + 1) for d in DEVICES}
    moved = [d for d in DEVICES if before[d] != after[d]]
    assert all(after[d] == shards + 1 for d in moved)  # nothing moves between old shards
    assert len(moved) <= 1.5 * len(DEVICES) / (shards + 1)
    assert {d for d in DEVICES if after[d] == shards + 1} == set(moved)


def test_the_split_is_the_same_everywhere() -> None:
    # Fixed values: another host or Python run must compute the same owners (no hash(),
    # which is salted per process).
    assert [shard_index(f"leaf{i}", 4) for i in range(1, 9)] == [2, 2, 4, 4, 2, 4, 4, 1]
    assert WHOLE.select(DEVICES) == DEVICES


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1/1", Shard(1, 1)), ("2/4", Shard(2, 4)), (" 3 / 3 ", Shard(3, 3))],
)
def test_parse(text: str, expected: Shard) -> None:
    assert parse_shard(text) == expected
    assert str(parse_shard(text)) == f"{expected.index}/{expected.count}"


@pytest.mark.parametrize("text", ["0/4", "5/4", "1/0", "2", "a/b", "-1/2", "1/5000", "1/2/3", ""])
def test_bad_specs_are_refused_by_name(text: str) -> None:
    with pytest.raises(ShardError, match="Expected: K/N"):
        parse_shard(text)


def test_probe_owned_by_its_target_hosts_shard() -> None:
    hosts = [f"gpu{i:02d}" for i in range(64)]
    for target in hosts:
        owners = [k for k in range(1, 5) if Shard(k, 4).owns_probe(target)]
        assert owners == [shard_index(target, 4)]
