"""The twin's network cache (agent.twin.netcache): a kept network is used only while loading
the fabric would give the same one, and the cache is never a way in or a reason to fail."""

from __future__ import annotations

import os
import pickle
import signal
from pathlib import Path

import pytest

from agent.errors import IntentError
from agent.twin import netcache
from agent.twin.network import load_network, star_fabric_yaml


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("ROCE_AGENT_CACHE_DIR", str(folder))
    monkeypatch.delenv("ROCE_AGENT_CACHE", raising=False)
    monkeypatch.delenv("ROCE_AGENT_PROFILES", raising=False)
    return folder


def _written(path: Path, text: str) -> Path:
    """A file written a while ago (one changed around a load is not kept: see below)."""
    path.write_text(text)
    os.utime(path, (1_700_000_000, 1_700_000_000))
    return path


def _fabric(folder: Path, hosts: int = 3, profile: str = "pfc-only") -> Path:
    return _written(folder / "fabric.yml", star_fabric_yaml(hosts, "100G", profile=profile))


def _kept(cache: Path) -> list[Path]:
    return sorted(cache.glob("twin-network-*.pickle"))


def _load_counting(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Spy on the loader: the fabric files it really loaded."""
    import agent.intent.loader as loader

    loads: list[Path] = []
    real = loader.load_fabric

    def counting(path: Path) -> loader.LoadedFabric:
        loads.append(path)
        return real(path)

    monkeypatch.setattr(loader, "load_fabric", counting)
    return loads


def test_a_kept_network_is_the_loaded_one(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fabric = _fabric(tmp_path)
    loads = _load_counting(monkeypatch)
    first = load_network(fabric)
    second = load_network(fabric)
    assert loads == [fabric]
    assert second == first
    assert len(_kept(cache)) == 1
    assert cache.stat().st_mode & 0o777 == 0o700
    assert _kept(cache)[0].stat().st_mode & 0o077 == 0


@pytest.mark.parametrize(
    "change",
    ["the fabric file", "the profile file", "a profile found first", "the environment"],
)
def test_a_change_that_matters_loads_again(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    fabric = tmp_path / "fabric.yml"
    profile = _written(tmp_path / "mine.yml", Path("playbooks/profiles/pfc-only.yml").read_text())
    mine = "pfc-only" if change == "a profile found first" else "./mine.yml"
    _written(fabric, star_fabric_yaml(3, "100G", profile=mine))
    loads = _load_counting(monkeypatch)
    before = load_network(fabric)
    if change == "the fabric file":
        fabric.write_text(star_fabric_yaml(4, "100G", profile="./mine.yml"))
    elif change == "the profile file":
        profile.write_text(profile.read_text().replace("name: pfc-only", "name: mine"))
    elif change == "a profile found first":
        # the same name, now next to the fabric: the loader would read this one
        (tmp_path / "profiles").mkdir()
        (tmp_path / "profiles" / "pfc-only.yml").write_text(
            Path("playbooks/profiles/pfc-only.yml").read_text().replace("pfc-only", "local")
        )
    else:
        monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path))
    after = load_network(fabric)
    assert loads == [fabric, fabric], change
    if change != "the environment":
        assert after != before


def test_off_keeps_nothing(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROCE_AGENT_CACHE", "off")
    fabric = _fabric(tmp_path)
    loads = _load_counting(monkeypatch)
    load_network(fabric)
    load_network(fabric)
    assert loads == [fabric, fabric]
    assert not cache.exists()


def test_a_folder_others_may_write_is_neither_read_nor_written(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fabric = _fabric(tmp_path)
    load_network(fabric)
    kept = _kept(cache)
    cache.chmod(0o777)
    loads = _load_counting(monkeypatch)
    load_network(fabric)
    assert loads == [fabric]
    cache.chmod(0o700)
    kept[0].chmod(0o666)
    load_network(fabric)
    assert loads == [fabric, fabric]


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_file_another_user_owns_is_not_read(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fabric = _fabric(tmp_path)
    load_network(fabric)
    os.chown(_kept(cache)[0], 65534, 65534)
    loads = _load_counting(monkeypatch)
    load_network(fabric)
    assert loads == [fabric]


@pytest.mark.parametrize(
    "content",
    [b"", b"\x80\x05torn", pickle.dumps({"not": "an entry"})],
    ids=["empty", "torn", "another object"],
)
def test_a_bad_kept_file_is_loaded_again_and_replaced(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bytes
) -> None:
    fabric = _fabric(tmp_path)
    expected = load_network(fabric)
    _kept(cache)[0].write_bytes(content)
    loads = _load_counting(monkeypatch)
    assert load_network(fabric) == expected
    assert loads == [fabric]


def test_a_bad_fabric_fails_every_time_and_is_not_kept(cache: Path, tmp_path: Path) -> None:
    fabric = tmp_path / "fabric.yml"
    fabric.write_text(star_fabric_yaml(3, "100G").replace("speed: 100G", "speed: 100Q", 1))
    for _ in range(2):
        with pytest.raises(IntentError, match="100Q"):
            load_network(fabric)
    assert _kept(cache) == []


def test_at_most_max_entries_kept_least_recently_used_first(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(netcache, "MAX_ENTRIES", 2)
    fabrics = []
    for hosts in (3, 4, 5):
        folder = tmp_path / str(hosts)
        folder.mkdir()
        fabrics.append(_fabric(folder, hosts))
    load_network(fabrics[0])
    (first,) = _kept(cache)
    os.utime(first, ns=(1, 1))
    load_network(fabrics[1])
    (second,) = set(_kept(cache)) - {first}
    load_network(fabrics[0])  # used again: now the most recent
    os.utime(second, ns=(2, 2))
    load_network(fabrics[2])
    assert len(_kept(cache)) == 2
    loads = _load_counting(monkeypatch)
    load_network(fabrics[0])
    load_network(fabrics[1])
    assert loads == [fabrics[1]]


@pytest.mark.parametrize("kind", ["a FIFO", "too large"])
def test_a_fabric_path_the_cache_will_not_read_goes_to_the_loader(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """Never a blocked read (a FIFO) nor an unbounded one: the loader's own error, at once."""
    fabric = tmp_path / "fabric.yml"
    if kind == "a FIFO":
        os.mkfifo(fabric)
        words = "FIFO"
    else:
        fabric.write_text(star_fabric_yaml(3, "100G") + "#" * (netcache.MAX_FABRIC_BYTES + 1))
        words = "too large"
    signal.signal(signal.SIGALRM, lambda *_: pytest.fail("blocked on the fabric path"))
    signal.alarm(20)
    try:
        with pytest.raises(IntentError, match=words):
            load_network(fabric)
    finally:
        signal.alarm(0)
    assert _kept(cache) == []


@pytest.mark.parametrize("changed", ["fabric", "profile"])
def test_a_file_changed_during_the_load_is_not_kept(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, changed: str
) -> None:
    """The loader may have read the new text while the key holds the old: nothing is kept."""
    import agent.intent.loader as loader

    profile = _written(tmp_path / "mine.yml", Path("playbooks/profiles/pfc-only.yml").read_text())
    fabric = _written(tmp_path / "fabric.yml", star_fabric_yaml(3, "100G", profile="./mine.yml"))
    real = loader.load_fabric

    def edited_meanwhile(path: Path) -> loader.LoadedFabric:
        loaded = real(path)
        target = fabric if changed == "fabric" else profile
        target.write_text(target.read_text() + "# edited\n")
        return loaded

    monkeypatch.setattr(loader, "load_fabric", edited_meanwhile)
    load_network(fabric)
    assert _kept(cache) == []
