"""The lab's own processes: started in a session of their own, known by a record, ended by PID.

A record is what the starter saved about a process (``pid``, ``argv``, ``launcher``): it is
signalled only while its PID still runs that command, so a recycled PID is never hit.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

TERM_GRACE_S = 3.0
POLL_S = 0.05
REAP_TRIES = 40
REAP_POLL_S = 0.025


def package_root() -> str:
    """Directory holding the ``lab`` package, so ``-m lab.vswitch`` works from any cwd."""
    return str(Path(__file__).resolve().parent.parent)


def spawn(
    command: list[str], *, stdout: IO[bytes] | int, stderr: IO[bytes] | int
) -> subprocess.Popen[bytes]:
    """Start ``command`` (a ``python -m lab.…`` module, maybe behind a launcher) in its own
    session: it outlives this command and ignores its terminal's ^C."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root(), env.get("PYTHONPATH")) if p)
    return subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        env=env,
        start_new_session=True,
    )


def _read_cmdline(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [part.decode(errors="replace") for part in raw.split(b"\0")[:-1]]


def pid_alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def is_our_process(pid: int, record: Mapping[str, Any]) -> bool:
    """The PID still runs the command the record was made for (not a recycled PID)."""
    cmdline = _read_cmdline(pid)
    if not cmdline:
        return False
    argv = list(record["argv"])
    # Before `ip netns exec` has exec'd, the wrapper's own command line is visible.
    return cmdline == argv or cmdline == list(record.get("launcher", [])) + argv


def running(record: Mapping[str, Any] | None) -> bool:
    """The recorded process runs (and is still the one recorded)."""
    if not record:
        return False
    pid = int(record["pid"])
    return pid_alive(pid) and is_our_process(pid, record)


def reap(pid: int) -> None:
    """Collect the exit status if the process is our child (when it was started in-process)."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def terminate(pids: list[int], grace: float = TERM_GRACE_S) -> dict[int, str]:
    """SIGTERM, then SIGKILL after ``grace`` seconds; {pid: how it ended}."""
    outcome = _signal_all(pids, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        for pid in pids:
            reap(pid)
        if not any(pid_alive(pid) for pid in pids):
            break
        time.sleep(POLL_S)
    for pid in pids:
        if pid_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                outcome[pid] = "SIGKILL"
    for pid in pids:
        _wait_gone(pid)
    return outcome


def _signal_all(pids: list[int], signum: signal.Signals) -> dict[int, str]:
    outcome: dict[int, str] = {}
    for pid in pids:
        try:
            os.kill(pid, signum)
            outcome[pid] = signum.name
        except ProcessLookupError:
            outcome[pid] = "already-exited"
    return outcome


def _wait_gone(pid: int) -> None:
    for _ in range(REAP_TRIES):
        reap(pid)
        if not pid_alive(pid):
            return
        time.sleep(REAP_POLL_S)


def stop(record: Mapping[str, Any]) -> dict[str, Any]:
    """End one recorded process by its PID, only if it still runs what was started."""
    pid = int(record["pid"])
    if not pid_alive(pid):
        reap(pid)
        return {"pid": pid, "how": "already-exited"}
    if not is_our_process(pid, record):
        return {"pid": pid, "how": "not-ours"}
    return {"pid": pid, "how": terminate([pid])[pid]}


def tail(path: Path, lines: int = 12) -> str:
    """The last ``lines`` lines of a log (empty if it cannot be read)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])
