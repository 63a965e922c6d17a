"""The lab switch's host key: created once, whole, even by processes starting together."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

from lab.mgmt.persistence import HOST_KEY, load_or_create_host_key

REPO = Path(__file__).resolve().parents[2]

# Each process imports, says so, and waits for one line on stdin, so all of them reach the key
# at once. Separate interpreters, not a fork of this worker: a fork of a process that has run
# gRPC or other threads can hang in the child before it does anything.
_FINGERPRINT = (
    "import sys\n"
    "from pathlib import Path\n"
    "from lab.mgmt.persistence import load_or_create_host_key\n"
    "print('ready', flush=True)\n"
    "sys.stdin.readline()\n"
    "print(load_or_create_host_key(Path(sys.argv[1])).get_fingerprint())\n"
)
PROCESSES = 12


def _fingerprint(state_dir: Path) -> str:
    return str(load_or_create_host_key(state_dir).get_fingerprint())


def test_processes_starting_together_share_one_complete_key(tmp_path: Path) -> None:
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", _FINGERPRINT, str(tmp_path)],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(PROCESSES)
    ]
    for process in processes:
        assert process.stdout is not None and process.stdout.readline() == "ready\n"
    for process in processes:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    outputs = [process.communicate(timeout=120)[0] for process in processes]
    assert [process.returncode for process in processes] == [0] * PROCESSES
    prints = {output.strip() for output in outputs}
    assert len(prints) == 1
    assert _fingerprint(tmp_path) == prints.pop()
    assert stat.S_IMODE((tmp_path / HOST_KEY).stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == [HOST_KEY]  # no private copies left


def test_an_existing_key_is_kept(tmp_path: Path) -> None:
    first = _fingerprint(tmp_path)
    assert _fingerprint(tmp_path) == first
