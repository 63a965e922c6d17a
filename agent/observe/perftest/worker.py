"""The host side of a perftest run (worker role ``perftest``): one server or one client.

It runs where perftest runs (over SSH on real hosts, in the VM on the lab's RDMA hosts):
finds the RoCEv2 GID of the port (sysfs, :mod:`agent.observe.perftest.gid`), reads the NIC's
hw_counters and ``ethtool -S`` pause counters, starts ``ib_*_bw`` with the argv of
:mod:`agent.observe.perftest.command`, waits for it, reads the counters again, and returns
perftest's own text (stdout, stderr, the ``--out_json`` file) with the two readings. The
agent parses and judges them (:mod:`agent.observe.perftest.scenario`): the host needs no more of the
agent than this module and the readers it imports.

A server says READY once perftest listens on its TCP port (``/proc/net/tcp``), so the agent
starts the clients only then; a client says READY once its counters are read, then waits for
the agent's GO on its standard input (:meth:`agent.observe.probes.runner.ProbeHandle.go`): all
clients of an incast start within milliseconds of each other, as a collective's do, however
long each host took to get ready (a Python start in a TCG lab VM takes seconds).
"""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agent.observe.hostnic import (
    NicReadError,
    parse_ethtool_stats,
    pause_from_stats,
    read_hw_counters,
    run_ethtool,
)
from agent.observe.perftest.command import COMMAND_FIELDS, PerftestCommand
from agent.observe.perftest.gid import gid_index

SYSFS = Path("/sys")
MAX_STDOUT_CHARS = 64 * 1024
MAX_STDERR_CHARS = 16 * 1024
MAX_JSON_BYTES = 1 << 20
LISTEN_POLL_S = 0.05
TCP_LISTEN = "0A"  # st of a listening socket in /proc/net/tcp (include/net/tcp_states.h)
# What perftest may take beyond -D: connecting, the drain of what was posted, the report
# exchange. A TCG VM needs seconds for each.
RUN_GRACE_S = 60.0
MAX_START_WAIT_S = 60.0


@dataclass(frozen=True)
class PerftestSpec:
    """One side of one pair, as the agent sends it (JSON)."""

    side: Literal["server", "client"]
    test: Literal["write", "read", "send"]
    device: str
    netdev: str
    qps: int
    message_bytes: int
    duration_s: int
    tcp_port: int
    ib_port: int = 1
    ipv4: str | None = None  # this host's address on netdev: picks the GID
    tclass: int | None = None
    bidirectional: bool = False
    server_address: str | None = None  # clients only
    qp_timeout: int | None = None
    tx_depth: int | None = None
    wait_for_go: bool = False  # clients: start perftest on the agent's GO line, not at once

    def __post_init__(self) -> None:
        if self.side not in ("server", "client"):
            raise ValueError(f"side: Expected: server or client Actual: {self.side!r:.40}")
        if (self.side == "client") != (self.server_address is not None):
            raise ValueError("server_address: Expected: set for clients only")


def read_nic(
    device: str,
    ib_port: int,
    netdev: str,
    sysfs: Path = SYSFS,
    ethtool: Callable[[str], str] = run_ethtool,
) -> dict[str, Any]:
    """The port's hw_counters (only those it has) and its netdev's per-priority pause frames
    (None when the driver reports none), as JSON."""
    hw = read_hw_counters(sysfs).get((device, str(ib_port)), {})
    try:
        pause = pause_from_stats(parse_ethtool_stats(ethtool(netdev)))
    except NicReadError as exc:
        return {"hw": hw, "pause": None, "pause_error": str(exc)}
    return {
        "hw": hw,
        "pause": None
        if pause is None
        else {"rx": list(pause.rx_frames), "tx": list(pause.tx_frames)},
    }


def listening(port: int, proc_net: Path = Path("/proc/net")) -> bool:
    """True when a TCP socket listens on ``port`` (IPv4 or IPv6)."""
    wanted = f":{port:04X}"
    for name in ("tcp", "tcp6"):
        try:
            lines = (proc_net / name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 3 and fields[1].endswith(wanted) and fields[3] == TCP_LISTEN:
                return True
    return False


def wait_for_go(timeout: float = MAX_START_WAIT_S) -> None:
    """Block until the agent's GO line arrives on stdin (ValueError after ``timeout`` or on
    end of input: the agent is gone, nothing is started)."""
    ready, _, _ = select.select([sys.stdin], [], [], timeout)
    line = sys.stdin.readline() if ready else ""
    if line.strip() != "GO":
        raise ValueError(f"Expected: GO on stdin within {timeout:g} s Actual: {line.strip()!r:.40}")


def _tail(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[-limit:]


def run_perftest(spec: PerftestSpec, ready: Callable[[], None]) -> dict[str, Any]:
    if spec.side == "server" and listening(spec.tcp_port):
        # READY means "this server listens": with the port taken, that would be a lie.
        raise ValueError(
            f"TCP port {spec.tcp_port}: Expected: free for perftest's exchange Actual: "
            "something on this host listens on it (set validation.perftest.base_tcp_port)"
        )
    index = gid_index(SYSFS, spec.device, spec.ib_port, spec.netdev, spec.ipv4)
    with tempfile.TemporaryDirectory(prefix="roce_perftest_") as scratch:
        json_path = str(Path(scratch) / "report.json")
        command = PerftestCommand(
            **{name: getattr(spec, name) for name in COMMAND_FIELDS},
            gid_index=index,
            json_path=json_path,
        )
        if shutil.which(command.binary) is None:
            raise ValueError(
                f"{command.binary}: Expected: perftest installed on this host (Debian/Ubuntu "
                "package perftest) Actual: not on PATH"
            )
        argv = (
            command.server_argv()
            if spec.side == "server"
            else command.client_argv(spec.server_address or "")
        )
        before = read_nic(spec.device, spec.ib_port, spec.netdev)
        if spec.side == "client":
            ready()
            if spec.wait_for_go:
                wait_for_go()
        started = time.time()
        process = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=scratch,
            env={**os.environ, "LC_ALL": "C"},
        )  # fmt: skip
        error = None
        if spec.side == "server":
            while process.poll() is None and not listening(spec.tcp_port):
                time.sleep(LISTEN_POLL_S)
            ready()  # listening, or exited: either way the agent learns it now
        try:
            stdout, stderr = process.communicate(timeout=spec.duration_s + RUN_GRACE_S)
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, stderr = process.communicate()
            error = f"{command.binary} did not finish within {spec.duration_s + RUN_GRACE_S:g} s"
        after = read_nic(spec.device, spec.ib_port, spec.netdev)
        report = Path(json_path)
        json_text = None
        if report.is_file() and report.stat().st_size <= MAX_JSON_BYTES:
            json_text = report.read_text(errors="replace")
    return {
        "role": "perftest",
        "side": spec.side,
        "argv": argv,
        "gid_index": index,
        "returncode": process.returncode,
        # Not "error": that key is the runner's, for a worker that could not run at all.
        "run_error": error,
        "stdout": _tail(stdout, MAX_STDOUT_CHARS),
        "stderr": _tail(stderr, MAX_STDERR_CHARS),
        "json": json_text,
        "started_at": started,
        "elapsed_s": round(time.time() - started, 3),
        "nic_before": before,
        "nic_after": after,
    }
