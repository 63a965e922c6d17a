"""exporters/probe_files.py case by case: what is read, what is skipped and why, with no
read that can block or grow without bound (the process-level case with every kind at once
is tests/hostile/test_exporter.py)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from exporters import probe_files
from exporters.probe_files import Skipped, candidates, read_result
from tests.unit.special_files import directory, fifo, named, unix_socket


def write(text: str | bytes) -> Callable[[Path], Path]:
    def make(folder: Path) -> Path:
        path = folder / "x.json"
        path.write_bytes(text.encode() if isinstance(text, str) else text)
        return path

    return make


def link(target: str) -> Callable[[Path], Path]:
    def make(folder: Path) -> Path:
        path = folder / "x.json"
        path.symlink_to(target)
        return path

    return make


CASES = [
    ("a result", write('{"scenario": "pairwise", "flows": []}'), None),
    ("a symlink to /dev/zero", link("/dev/zero"), "symlink"),
    ("a symlink to a good file", link("/etc/hostname"), "symlink"),
    ("a FIFO", named(fifo, "x.json"), "not_regular"),
    ("a unix socket", named(unix_socket, "x.json"), "not_regular"),
    ("a directory", named(directory, "x.json"), "not_regular"),
    ("over the size cap", write(b" " * (probe_files.MAX_FILE_BYTES + 1)), "too_large"),
    ("at the size cap", write(b" " * (probe_files.MAX_FILE_BYTES - 2) + b"{}"), None),
    ("not JSON", write("{nope"), "not_json"),
    ("nested 200 000 deep", write("[" * 200_000), "not_json"),
    ("not UTF-8", write(b'{"a": "\xff"}'), "not_json"),
]


@pytest.mark.parametrize(("case", "make", "reason"), CASES, ids=[c[0] for c in CASES])
def test_what_is_read_and_what_is_skipped(
    tmp_path: Path, case: str, make: Callable[[Path], Path], reason: str | None
) -> None:
    path = make(tmp_path)
    started = time.monotonic()
    if reason is None:
        assert read_result(path) is not None
    else:
        with pytest.raises(Skipped) as skipped:
            read_result(path)
        assert skipped.value.reason == reason and skipped.value.detail, case
    assert time.monotonic() - started < 2  # nothing waits for a writer or reads for ever


def test_a_file_slower_than_its_deadline_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(probe_files, "FILE_DEADLINE_S", 0.0)
    path = tmp_path / "slow.json"
    path.write_text(json.dumps({"pad": "x" * 200_000}))
    with pytest.raises(Skipped) as skipped:
        read_result(path)
    assert skipped.value.reason == "timeout"


def test_candidates_are_stamped_without_following_links_and_capped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(probe_files, "MAX_FILES_PER_POLL", 3)
    for n in range(5):
        (tmp_path / f"{n}.json").write_text("{}")
    (tmp_path / "z.json").symlink_to("/dev/zero")
    (tmp_path / "notes.txt").write_text("ignored")
    found = candidates(tmp_path)
    assert [p.name for p, _ in found] == ["0.json", "1.json", "2.json"]
    monkeypatch.setattr(probe_files, "MAX_FILES_PER_POLL", 10)
    stamps = dict(candidates(tmp_path))
    assert stamps[tmp_path / "z.json"][1] == len("/dev/zero")  # the link's own size
    assert os.path.islink(tmp_path / "z.json")
