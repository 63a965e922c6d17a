"""The lab switch's host key: created once, whole, even by processes starting together."""

from __future__ import annotations

import multiprocessing
import stat
from pathlib import Path

from lab.mgmt.persistence import HOST_KEY, load_or_create_host_key


def _fingerprint(state_dir: str) -> str:
    return str(load_or_create_host_key(Path(state_dir)).get_fingerprint())


def test_processes_starting_together_share_one_complete_key(tmp_path: Path) -> None:
    with multiprocessing.get_context("fork").Pool(8) as pool:
        prints = pool.map(_fingerprint, [str(tmp_path)] * 16)
    assert len(set(prints)) == 1
    assert _fingerprint(str(tmp_path)) == prints[0]
    assert stat.S_IMODE((tmp_path / HOST_KEY).stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == [HOST_KEY]  # no private copies left


def test_an_existing_key_is_kept(tmp_path: Path) -> None:
    first = _fingerprint(str(tmp_path))
    assert _fingerprint(str(tmp_path)) == first
