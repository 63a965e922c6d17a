"""A stalling host: stop every process in one lab host's network namespace for MS ms out of
every PERIOD ms (SIGSTOP, then SIGCONT), as a host whose probe process is descheduled would.

Started by ``roce-agent lab fault add host-stall HOST --delay 30ms`` in the lab's own (root)
namespace -- never inside the one it stops -- and ended by PID (SIGTERM) on ``fault remove``
or ``lab down``; it continues every process it stopped before it exits, and ``fault remove``
continues every process of that namespace once more afterwards. Prints ``stalling`` once the
first stall is over.

Only processes of that namespace are signalled, each by a pidfd opened before its namespace is
checked (``pidfd_open(2)``, ``pidfd_send_signal(2)``): a PID that ends and is reused by a
process elsewhere between the listing and the signal is never hit.

The kernel still receives (and stamps) frames while the processes are stopped; only user
space reads them late. That is the fault the probes' kernel receive timestamps tell apart
from a slow link.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from pathlib import Path

NETNS_DIR = Path("/run/netns")


class _Stop(Exception):
    """SIGTERM or SIGINT: end the stall now."""


def _raise_stop(_signum: int, _frame: object) -> None:
    raise _Stop


def _namespace_id(path: Path) -> tuple[int, int]:
    info = path.stat()
    return info.st_dev, info.st_ino


def namespace_pidfds(netns: str) -> list[int]:
    """pidfds of the processes whose network namespace is ``netns`` (not this one's)."""
    wanted = _namespace_id(NETNS_DIR / netns)
    me = os.getpid()
    fds = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            fd = os.pidfd_open(int(entry.name))
        except OSError:
            continue  # gone already
        try:
            # Checked after the pidfd is open: the fd names this very process from now on.
            if _namespace_id(entry / "ns" / "net") == wanted:
                fds.append(fd)
                continue
        except OSError:
            pass
        os.close(fd)
    return fds


def _signal(fds: list[int], signum: int) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):  # exited meanwhile
            signal.pidfd_send_signal(fd, signum)


def continue_all(netns: str) -> int:
    """SIGCONT every process of ``netns``; how many there were."""
    fds = namespace_pidfds(netns)
    try:
        _signal(fds, signal.SIGCONT)
    finally:
        for fd in fds:
            os.close(fd)
    return len(fds)


def stall(netns: str, ms: float, period_ms: float) -> int:
    """Stall until SIGTERM/SIGINT; how many stalls there were."""
    stalls = 0
    stopped: list[int] = []
    try:
        while True:
            stopped = namespace_pidfds(netns)
            _signal(stopped, signal.SIGSTOP)
            time.sleep(ms / 1000)
            _signal(stopped, signal.SIGCONT)
            done, stopped = stopped, []
            for fd in done:
                os.close(fd)
            stalls += 1
            if stalls == 1:
                print("stalling", flush=True)
            time.sleep(max(0.0, (period_ms - ms) / 1000))
    except _Stop:
        pass
    finally:
        # Whatever was stopped when the signal came is continued, and every process of the
        # namespace once more (one that a pidfd missed must not stay stopped).
        _signal(stopped, signal.SIGCONT)
        for fd in stopped:
            with contextlib.suppress(OSError):
                os.close(fd)
        with contextlib.suppress(OSError):
            continue_all(netns)
    return stalls


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.faults_stall", description=__doc__)
    parser.add_argument("--netns", required=True)
    parser.add_argument("--ms", type=float, required=True)
    parser.add_argument("--period-ms", type=float, default=100.0)
    args = parser.parse_args(argv)
    if not 0 < args.ms < args.period_ms <= 60_000:
        parser.error("--ms/--period-ms: Expected: 0 < ms < period-ms <= 60000")
    if not (NETNS_DIR / args.netns).exists():
        print(f"error: no network namespace {args.netns!r} in {NETNS_DIR}", file=sys.stderr)
        return 2
    if _namespace_id(NETNS_DIR / args.netns) == _namespace_id(Path("/proc/self/ns/net")):
        print("error: run outside the namespace it stalls", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _raise_stop)
    signal.signal(signal.SIGINT, _raise_stop)
    stalls = stall(args.netns, args.ms, args.period_ms)
    print(f"stopped: {stalls} stalls of {args.ms:g} ms", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
