"""The twin against htsim (C++): CPU for the same PFC-only N:1 incast, in fresh processes.

htsim is a packet-level network simulator in C++; Broadcom's csg-htsim repository has its
datacenter RoCE driver (``sim/datacenter/main_roce.cpp``: RoCE senders and sinks, PFC on
lossless input queues).  The bench fetches the pinned commit (:data:`HTSIM_COMMIT`) from
``--htsim-src`` (a URL or a local git directory; default :data:`HTSIM_REPO`) into ``--cache``
(default ``~/.cache/roce-agent-bench/htsim-<commit12>``), builds ``htsim_roce`` with its own
Makefiles (``sim/`` then ``sim/datacenter/``) once, and from then on only runs the binary; its
inputs (connection matrix, log file) go to a temp directory.  Line numbers below are at the
pinned commit.

The scenario, both tools: N senders -> 1 receiver, all on one switch, 100 Gb/s, 200 m cables,
4 158-byte frames (4 096-byte RoCE payload), PFC on the RoCE class, no ECN and no congestion
control, every sender busy for the whole run; N = ``--senders`` (8, 16), simulated
``--durations`` (10 ms, 100 ms).

- twin: ``agent.twin.network.star_fabric_yaml(N + 1, "100G", profile="pfc-only", mtu=4200,
  cable_m=200.0)`` and ``python -m agent twin FILE --scenario incast --senders N --duration D
  --payload 4096 -o json`` (exit 1, a lossless drop, is still a run).  Frames are
  4 096 + 62 bytes (Eth 14, IPv4 20, UDP 8, BTH 12, ICRC 4, FCS 4) and hold the wire for 20
  more (preamble, SFD, gap), so its ceiling is 4158/4178 = 99.52 % of line rate in frame
  bytes.  A cable is 5 ns/m: 1 us per hop each way, data and PFC frames alike; a PFC frame
  takes a 64-byte frame time and waits for the frame in flight.  ACKs are coalesced (one per
  16 frames).  Pause is XOFF with quanta 0xFFFF, refreshed, and XON.
- htsim: ``-mtu`` is the payload of a data packet and every RoCE packet is that plus
  ``RocePacket::ACKSIZE`` = 64 bytes (rocepacket.h:46, :68; roce.cpp:36 ``_mss =
  Packet::data_packet_size()``, set from ``-mtu`` at main_roce.cpp:192, :299), so ``-mtu 4094``
  is a 4 158-byte packet; a queue drains ``size * 8 / speed`` with no preamble or gap
  (queue.h:53-54, queue.cpp:13), so its ceiling is 100 % of line rate.  ``-linkspeed 100000``
  (Mb/s, main_roce.cpp:183-185) is every link and each sender's rate (main_roce.cpp:473).
  ``-hop_latency 1`` (us, main_roce.cpp:198-200) is every pipe, each direction
  (fat_tree_topology.cpp:774-775, :799), and the wire a PAUSE takes back (:796 into
  queue_lossless_input.cpp:54); a PAUSE has no serialisation, no quanta and no expiry: on
  until an explicit resume (queue_lossless_input.cpp:70-73, :100-103, :106-118), and it
  stops the host's queue and its senders (queue.cpp:431-463).  The sink ACKs every packet
  (roce.cpp:417-422).  No congestion control: a sender paces at a fixed
  ``(mss + 64) * 8 / rate`` (roce.cpp:77, :328-336; ``setRate``, roce.h:42, is never called
  by main_roce.cpp), has no window (roce.cpp:316-326) and ignores ECN in ACKs
  (roce.cpp:161-211); ``-queue_type lossless_input`` builds ``LosslessOutputQueue`` with
  ECN off (fat_tree_topology.cpp:682-683, queue_lossless_output.h:19, .cpp:121).  A flow of
  ``size 0`` keeps the default size 2^63 bytes (main_roce.cpp:478-480, roce.cpp:60), so it
  never ends; flows start at t=0 (roce.cpp:129-131).
- One switch in htsim: main_roce.cpp builds a fat tree (main_roce.cpp:368-370); with
  ``-tiers 2 -nodes K*K/2`` it has K leaves of K/2 hosts (fat_tree_topology.cpp:552-591) and
  hosts 0..K/2-1 on leaf 0 (``HOST_POD_SWITCH``, fat_tree_topology.h:117-119), so K = 2(N+1)
  puts the receiver (host 0) and senders 1..N on one leaf: 162 hosts for N=8, 578 for N=16;
  the rest of the fabric is idle but built (part of htsim's start-up and RSS, not its loop).
  A ``-topo`` file could build one leaf alone, but then the PAUSE wire latency is 0
  (``FatTreeTopology::load`` passes latency 0, fat_tree_topology.cpp:241, :262, :796).
  Routing ``-strat ecmp_host -paths 1`` (the switches' FIB; main_roce.cpp:269-271, :512-535).
- PFC thresholds from the twin's plan for that fabric (the switch port's ``BufferConfig``):
  the twin sends XOFF when an ingress holds more than ``xoff_bytes`` and, once paused, XON
  when a frame leaving brings it below ``xon_bytes`` or empties it (``PfcState.release`` in
  lossless/pfc.py: the second case matters where ``xon_bytes`` is 0); htsim pauses above
  ``high * mss`` and resumes below ``low * mss`` bytes (main_roce.cpp:304-305,
  queue_lossless_input.cpp:70, :100), and with ``low >= 1`` an empty ingress is below it.  The
  bench assumes an ingress holds whole data frames of one size (FRAME bytes on both sides),
  so both rules are counts of frames, and :func:`htsim_thresholds` picks
  ``-pfc_thresholds low high`` that pause on the same frame and resume at the same frame
  count, or stops with a :class:`BenchError` where htsim has no such pair.  ``-q`` (packets
  of ``mss``, main_roce.cpp:308) sizes every output queue for N ingresses at the twin's
  ``xoff + headroom`` each; htsim never drops there, it prints "LOSSLESS not working"
  (queue_lossless_output.cpp:89-91), counted below.

What each run says about itself (printed before the timings, so a reader sees two saturated
PFC-only incasts): the twin's JSON (goodput = frame bytes accepted in order / duration, PFC
frames, drops, ECN marks).  htsim prints no throughput (its ``New:`` count stays 0:
``_new_packets_sent`` is never incremented in roce.cpp, printed at main_roce.cpp:594-599) and
no pause or event count; with ``-log sink`` its sink logger samples every 0.25 ms
(main_roce.cpp:59, :339-342) each sink's cumulative ACK in payload bytes (loggers.cpp:1520-1545)
into the ``-o`` file (44-byte records after ``# TRACE``, logfile.cpp:67-78, :132-141); the
bench reads the latest sample time at which every sink has a record (:func:`htsim_delivered`):
frames = bytes / mss, throughput = frames * 4158 * 8 / that time.

Timing: each run is a fresh process; its CPU (user + sys) and peak RSS (``ru_maxrss``) are its
own ``wait4`` rusage, taken by a small C launcher (:data:`LAUNCHER_SOURCE`, built into the cache
with g++, which htsim needs anyway) because a child of this Python process would report this
process's RSS as its own; wall time is ``time.perf_counter`` around it.  Per case, one untimed
warm-up run of each tool (the twin's bytecode is cached, the binary in the page cache), then
``--rounds`` rounds, each: twin at D, htsim at D, twin at 1 us, htsim at 1 us (the same commands
with ``--duration 1us`` / ``-end 1``).  End to end = CPU at D; start-up = CPU at 1 us; loop =
(CPU at D - CPU at 1 us) per simulated ms (mins from mins, medians from medians), the same for
both; the twin's ``wall_s`` (``Engine.run`` alone) per simulated ms is a cross-check (the loop
also holds what else grows from 1 us to D, e.g. the twin's report over its samples).  Ratios
are twin / htsim, "not measured" where htsim's figure is 0 s (rusage counts whole clock
ticks) or less.  Goals, on medians: loop ratio <= 1.0 in every case, end-to-end ratio <= 1.5
at 10 ms (:data:`GOAL_E2E_AT_US`), the twin's start-up <= 0.15 s of CPU.  The twin is the
``agent`` this interpreter imports (children get ``PYTHONPATH`` = its checkout,
``PYTHONDONTWRITEBYTECODE`` dropped) run by ``--twin-python``.

    python bench/twin_vs_cpp.py [--rounds 5] [--senders 8,16] [--durations 10ms,100ms]
        [--htsim-src URL_OR_GIT_DIR] [--cache DIR] [--json FILE] [--twin-python PYTHON]
"""

from __future__ import annotations

import argparse
import datetime
import decimal
import json
import math
import os
import re
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import agent
from agent.twin.network import ROCE_FRAME_OVERHEAD, load_network, star_fabric_yaml
from agent.twin.workloads import MAX_SENDERS

HTSIM_REPO = "https://github.com/Broadcom/csg-htsim.git"
HTSIM_COMMIT = "841d9e7be46bb968eece766aa4b6c044c7799f67"
SPEED = "100G"
SPEED_BPS = 100_000_000_000
PAYLOAD = 4096
FRAME = PAYLOAD + ROCE_FRAME_OVERHEAD  # 4158
HTSIM_HEADER = 64  # RocePacket::ACKSIZE, added to -mtu on every RoCE packet (rocepacket.h:68)
CABLE_M = 200.0
TWIN_MTU = 4200
STARTUP_US = 1
LOG_RECORD = struct.Struct("<dIIIddd")  # logfile.cpp:72-78, written field by field: no padding
ROCE_SINK = 26  # Logger::ROCE_SINK (loggertypes.h:65)

GOAL_LOOP_RATIO = 1.0
GOAL_E2E_RATIO = 1.5
GOAL_E2E_AT_US = 10_000
GOAL_STARTUP_S = 0.15


class BenchError(Exception):
    """A step failed: the message says which and where."""


@dataclass(frozen=True)
class Case:
    senders: int
    duration: str  # as given: the twin's --duration
    duration_us: int

    @property
    def label(self) -> str:
        return f"{self.senders}:1, {self.duration}"

    @property
    def sim_ms(self) -> float:
        return self.duration_us / 1000


@dataclass(frozen=True)
class Sample:
    """One fresh process: its cost and what it said about the simulation."""

    cpu_s: float
    wall_s: float
    rss_kib: int
    report: dict[str, float | int | None]


@dataclass(frozen=True)
class HtsimParams:
    """htsim's options for one N:1 case (module docstring)."""

    senders: int
    nodes: int
    mss: int
    hop_us: float
    queue_pkts: int
    pfc_low: int
    pfc_high: int

    def argv(self, binary: Path, matrix: Path, log: Path, end_us: int) -> list[str]:
        return [
            str(binary),
            *("-nodes", str(self.nodes), "-tiers", "2", "-tm", str(matrix)),
            *("-end", str(end_us), "-mtu", str(self.mss), "-linkspeed", str(SPEED_BPS // 10**6)),
            *("-hop_latency", f"{self.hop_us:g}", "-q", str(self.queue_pkts)),
            *("-queue_type", "lossless_input"),
            *("-pfc_thresholds", str(self.pfc_low), str(self.pfc_high)),
            *("-strat", "ecmp_host", "-paths", "1", "-log", "sink", "-o", str(log)),
        ]

    def matrix(self) -> str:
        flows = [f"{s}->0 start 0 size 0" for s in range(1, self.senders + 1)]
        return "\n".join([f"Nodes {self.nodes}", f"Connections {self.senders}", *flows]) + "\n"


@dataclass
class CaseResult:
    case: Case
    htsim: HtsimParams
    samples: dict[str, list[Sample]] = field(default_factory=dict)

    def cpu(self, key: str) -> list[float]:
        return [s.cpu_s for s in self.samples[key]]


@dataclass(frozen=True)
class Setup:
    """What every run needs: the twin's command and environment, htsim's binary, a temp dir."""

    twin_python: str
    root: Path
    env: dict[str, str]
    binary: Path
    launcher: Path
    tmp: Path


# --- htsim: fetch and build ---------------------------------------------------------------


def _check(argv: Sequence[str], what: str, cwd: Path | None = None) -> str:
    try:
        done = subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True)
    except OSError as err:
        raise BenchError(f"{what}: `{' '.join(argv)}`: {err}") from err
    if done.returncode:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-20:])
        where = f" in {cwd}" if cwd else ""
        raise BenchError(f"{what}: `{' '.join(argv)}`{where}: exit {done.returncode}\n{tail}")
    return done.stdout


def htsim_checkout(src: str, cache: Path) -> Path:
    """``cache/src``: ``sim/`` of the pinned commit, cloned once.  A sparse checkout: only
    ``sim/``'s files are read, so a source that lacks others (large data) will do."""
    checkout = cache / "src"
    if (checkout / "sim" / "Makefile").exists():
        return checkout
    cache.mkdir(parents=True, exist_ok=True)
    staging = cache / "src.partial"
    shutil.rmtree(staging, ignore_errors=True)
    local = Path(src).expanduser()
    clone = ["git", "clone", "--quiet", "--no-checkout", "--sparse"]
    # a remote is cloned without blobs; the checkout then fetches only sim/'s
    clone += [str(local.resolve())] if local.exists() else ["--filter=blob:none", src]
    _check([*clone, str(staging)], f"htsim: cloning {src}")
    git = ["git", "-C", str(staging)]
    probe = [*git, "cat-file", "-e", f"{HTSIM_COMMIT}^{{commit}}"]
    has_commit = subprocess.run(probe, capture_output=True)
    if has_commit.returncode:
        _check([*git, "fetch", "--quiet", "origin", HTSIM_COMMIT], "htsim: fetching the commit")
    _check([*git, "sparse-checkout", "set", "sim"], "htsim: sparse checkout")
    detach = ["-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach"]
    _check([*git, *detach, HTSIM_COMMIT], f"htsim: checking out {HTSIM_COMMIT}")
    staging.rename(checkout)
    return checkout


def build_htsim(checkout: Path) -> Path:
    """``sim/datacenter/htsim_roce``, built with htsim's Makefiles unless it exists."""
    sim = checkout / "sim"
    binary = sim / "datacenter" / "htsim_roce"
    if binary.exists():
        return binary
    jobs = f"-j{os.cpu_count() or 1}"
    print(f"building htsim in {sim} (once; {jobs}) ...", flush=True)
    _check(["make", jobs, "-C", str(sim), "libhtsim.a"], "htsim: building libhtsim.a")
    _check(
        ["make", jobs, "-C", str(sim / "datacenter"), "htsim_roce"], "htsim: building htsim_roce"
    )
    if not binary.exists():
        raise BenchError(f"htsim: make succeeded but {binary} is missing")
    return binary


# Runs a command as its child and writes the command's own rusage (wait4) to a file.  Why not
# os.wait4 here: a process forked from this one (tens of MB, the agent imported) reports this
# process's RSS high-water mark as its own ru_maxrss -- Linux carries the old mm's peak across
# exec (fs/exec.c, exec_mmap -> setmax_mm_hiwater_rss) -- which would bury htsim's few MB.
# Forked from this small launcher instead, a command's ru_maxrss is its own (plus ~1 MB).
LAUNCHER_SOURCE = r"""
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s RUSAGE_FILE COMMAND [ARG...]\n", argv[0]);
        return 127;
    }
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); return 127; }
    if (pid == 0) { execvp(argv[2], argv + 2); perror(argv[2]); _exit(127); }
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) < 0) { perror("wait4"); return 127; }
    FILE *out = fopen(argv[1], "w");
    if (!out) { perror(argv[1]); return 127; }
    fprintf(out, "%ld.%06ld %ld.%06ld %ld\n", (long)ru.ru_utime.tv_sec, (long)ru.ru_utime.tv_usec,
            (long)ru.ru_stime.tv_sec, (long)ru.ru_stime.tv_usec, ru.ru_maxrss);
    fclose(out);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
"""


def build_launcher(cache: Path) -> Path:
    """The launcher, compiled with htsim's compiler into the cache (again if its source changed)."""
    source, binary = cache / "rusage-run.cpp", cache / "rusage-run"
    if binary.exists() and source.exists() and source.read_text() == LAUNCHER_SOURCE:
        return binary
    source.write_text(LAUNCHER_SOURCE)
    _check(["g++", "-O2", "-o", str(binary), str(source)], "building the rusage launcher")
    return binary


def compile_flags(checkout: Path) -> str:
    """The compiler and CFLAGS each Makefile builds with (asked of make itself)."""
    probe = "bench-print-flags:\n\t@echo $(CC) $(CFLAGS)\n"
    parts = []
    for sub in ("sim", "sim/datacenter"):
        argv = ["make", "-s", "--no-print-directory", "-C", str(checkout / sub)]
        argv += ["-f", "Makefile", "-f", "-", "bench-print-flags"]
        done = subprocess.run(argv, input=probe, capture_output=True, text=True)
        parts.append(f"{sub}/: {done.stdout.strip() or '?'}")
    version = subprocess.run(["g++", "--version"], capture_output=True, text=True)
    parts.append(version.stdout.splitlines()[0] if version.stdout else "g++ ?")
    return "; ".join(parts)


# --- the scenario on both sides -----------------------------------------------------------


def htsim_thresholds(xoff: int, xon: int, mss: int) -> tuple[int, int]:
    """``(low, high)`` in ``mss`` units so that htsim pauses on the same frame as the twin and
    resumes at the same frame count; htsim compares frame bytes with ``mss`` multiples.

    The twin pauses on the first count of FRAME-byte frames above ``xoff`` and resumes at the
    most frames still below ``xon``, or at 0 (it resumes when empty too).  htsim needs
    ``high > low >= 1`` (it asserts ``high > 0`` and ``high > low``; ``low`` 0 would never
    resume).  Where the twin resumes at the count just below the one it pauses on (``xoff``
    under one frame, or no multiple of FRAME from ``xon`` to ``xoff``: ``xon`` close to it),
    ``low * mss`` and ``high * mss`` must be two multiples of ``mss`` inside one frame,
    which only an ``mss`` well under a frame allows.  Where there is no such pair this raises
    :class:`BenchError` naming the thresholds, rather than return one that pauses or resumes
    on another frame: the bench's claim is the same scenario on both sides.

    The bench's fabric: xoff 27 856, xon 8 400, mss 4 094 -> ``(3, 7)``: the twin pauses on
    the 7th frame (6 x 4 158 = 24 948 <= 27 856 < 29 106) and htsim above 7 x 4 094 = 28 658
    bytes, on the 7th too; the twin resumes at 2 frames (8 316 < 8 400) and htsim below
    3 x 4 094 = 12 282 bytes, at 2 frames too.
    """
    pause_at = xoff // FRAME + 1
    resume_at = max(0, (xon - 1) // FRAME)  # the most frames still < xon; 0: when empty
    low = resume_at * FRAME // mss + 1
    # the least high that lets pause_at - 1 frames through, unless that is not above low
    high = max(-(-(pause_at - 1) * FRAME // mss), low + 1)
    pauses_on, resumes_at = high * mss // FRAME + 1, (low * mss - 1) // FRAME
    if (pauses_on, resumes_at) != (pause_at, resume_at):
        raise BenchError(
            f"htsim -pfc_thresholds for the twin's xoff_bytes {xoff} and xon_bytes {xon}: "
            f"Expected: low < high (x {mss} B) that pause on frame {pause_at} and resume at "
            f"{resume_at} frames of {FRAME} B, as the twin does Actual: none does; the "
            f"nearest, {low} {high}, pauses on frame {pauses_on} and resumes at {resumes_at}"
        )
    return low, high


def htsim_params(fabric: Path, senders: int) -> HtsimParams:
    """htsim's options from the twin's own plan for ``fabric`` (its switch port)."""
    net = load_network(fabric)
    port = next(iter(net.switches.values())).ports[0]
    if port.buffer is None:
        raise BenchError(f"{fabric}: the switch port has no PFC buffer (not a lossless profile)")
    mss = FRAME - HTSIM_HEADER
    low, high = htsim_thresholds(port.buffer.xoff_bytes, port.buffer.xon_bytes, mss)
    per_ingress = port.buffer.xoff_bytes + port.buffer.headroom_bytes
    leaf_hosts = senders + 1
    return HtsimParams(
        senders=senders,
        nodes=2 * leaf_hosts * leaf_hosts,  # K = 2 (N + 1): K * K / 2 hosts, K / 2 a leaf
        mss=mss,
        hop_us=port.propagation_s * 1e6,
        queue_pkts=math.ceil(senders * per_ingress / mss),
        pfc_low=low,
        pfc_high=high,
    )


def twin_fabric(tmp: Path, senders: int) -> Path:
    path = tmp / f"star-{senders + 1}-{SPEED}.yml"
    text = star_fabric_yaml(senders + 1, SPEED, profile="pfc-only", mtu=TWIN_MTU, cable_m=CABLE_M)
    path.write_text(text)
    return path


def twin_argv(setup: Setup, fabric: Path, senders: int, duration: str) -> list[str]:
    run = ["--scenario", "incast", "--senders", str(senders), "--duration", duration]
    out = ["--payload", str(PAYLOAD), "-o", "json"]
    return [setup.twin_python, "-m", "agent", "twin", str(fabric), *run, *out]


# --- running -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Finished:
    cpu_s: float
    wall_s: float
    rss_kib: int
    returncode: int
    stdout: str
    stderr: str


def run_child(setup: Setup, argv: list[str], env: dict[str, str] | None, cwd: Path) -> Finished:
    """One fresh process under the launcher, which writes the command's own ``wait4`` rusage."""
    usage = setup.tmp / "rusage.txt"
    usage.unlink(missing_ok=True)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        try:
            done = subprocess.run(
                [str(setup.launcher), str(usage), *argv], stdout=out, stderr=err, env=env, cwd=cwd
            )
        except OSError as error:
            raise BenchError(f"`{' '.join(argv)}`: {error}") from error
        wall = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    try:
        user, system, rss = usage.read_text().split()
    except (OSError, ValueError) as error:
        raise BenchError(f"`{' '.join(argv)}` in {cwd}: no rusage ({error})\n{stderr}") from error
    return Finished(float(user) + float(system), wall, int(rss), done.returncode, stdout, stderr)


def _failed(what: str, argv: list[str], cwd: Path, done: Finished) -> BenchError:
    tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
    return BenchError(f"{what}: `{' '.join(argv)}` in {cwd}: exit {done.returncode}\n{tail}")


TWIN_FIELDS = ("events", "wall_s", "goodput_bps", "pfc_frames", "lossless_drops")
TWIN_FIELDS_MORE = ("max_paused_fraction", "ce_fraction", "cnps_sent")


def run_twin(setup: Setup, fabric: Path, senders: int, duration: str) -> Sample:
    argv = twin_argv(setup, fabric, senders, duration)
    done = run_child(setup, argv, setup.env, setup.root)
    # exit 1: a lossless class dropped frames -- still a run, still timed
    if done.returncode not in (0, 1):
        raise _failed(f"twin {senders}:1 {duration}", argv, setup.root, done)
    try:
        data: dict[str, Any] = json.loads(done.stdout)
        report = {key: data[key] for key in (*TWIN_FIELDS, *TWIN_FIELDS_MORE)}
    except (ValueError, KeyError) as err:
        raise _failed(f"twin {senders}:1 {duration}: JSON ({err})", argv, setup.root, done) from err
    return Sample(done.cpu_s, done.wall_s, done.rss_kib, report)


def _sink_rounds(data: bytes, start: int) -> dict[float, dict[int, float]]:
    """Each sample time's cumulative ACK by sink id, from the records after ``start``; a
    record cut short at the end is left out, a record repeated (same sink and time) kept once."""
    rounds: dict[float, dict[int, float]] = {}
    for offset in range(start, len(data) - LOG_RECORD.size + 1, LOG_RECORD.size):
        when, kind, sink, _, cum_ack, _, _ = LOG_RECORD.unpack_from(data, offset)
        if kind == ROCE_SINK:
            rounds.setdefault(when, {})[sink] = cum_ack
    return rounds


def htsim_delivered(log: Path, mss: int) -> tuple[float | None, float]:
    """(frame bits per second at the receiver, at the latest complete sink sample; its time).

    Complete: every sink that reported at all has a record at that time.  The logger writes
    a round sink by sink, so a log whose end was not all written can hold part of one, and
    summing it would take some sinks' bytes for the receiver's whole; a record repeated
    counts once for the same reason.  None (and time 0) when no complete sample is later than
    t = 0.
    """
    data = log.read_bytes()
    start = data.find(b"# TRACE\n")
    if start < 0:
        raise BenchError(f"htsim log {log}: no '# TRACE' line")
    rounds = _sink_rounds(data, start + len(b"# TRACE\n"))
    sinks = {sink for acked in rounds.values() for sink in acked}
    complete = [when for when, acked in rounds.items() if when > 0 and acked.keys() == sinks]
    if not complete:
        return None, 0.0
    last = max(complete)
    return sum(rounds[last].values()) / mss * FRAME * 8 / last, last


def run_htsim(setup: Setup, params: HtsimParams, end_us: int) -> Sample:
    matrix = setup.tmp / f"incast-{params.senders}.cm"
    log = setup.tmp / f"htsim-{params.senders}.dat"
    argv = params.argv(setup.binary, matrix, log, end_us)
    done = run_child(setup, argv, None, setup.tmp)
    if done.returncode:
        raise _failed(f"htsim {params.senders}:1 {end_us} us", argv, setup.tmp, done)
    rtx = re.search(r"^New: \d+ Rtx: (\d+)$", done.stdout, re.MULTILINE)
    if rtx is None:
        raise _failed("htsim: no 'New: .. Rtx: ..' line at the end", argv, setup.tmp, done)
    delivered, sampled_s = htsim_delivered(log, params.mss)
    report: dict[str, float | int | None] = {
        "delivered_bps": delivered,
        "sampled_s": sampled_s,
        "rtx_packets": int(rtx.group(1)),
        "overflow_warnings": done.stdout.count("LOSSLESS not working"),
    }
    return Sample(done.cpu_s, done.wall_s, done.rss_kib, report)


def measure_case(setup: Setup, case: Case, rounds: int) -> CaseResult:
    fabric = twin_fabric(setup.tmp, case.senders)
    params = htsim_params(fabric, case.senders)
    (setup.tmp / f"incast-{case.senders}.cm").write_text(params.matrix())
    result = CaseResult(case, params)
    runs: dict[str, Callable[[], Sample]] = {
        "twin": lambda: run_twin(setup, fabric, case.senders, case.duration),
        "htsim": lambda: run_htsim(setup, params, case.duration_us),
        "twin-1us": lambda: run_twin(setup, fabric, case.senders, f"{STARTUP_US}us"),
        "htsim-1us": lambda: run_htsim(setup, params, STARTUP_US),
    }
    runs["twin"]()  # warm-up: bytecode written, files in the page cache
    runs["htsim"]()
    for _ in range(rounds):
        for key, run in runs.items():
            result.samples.setdefault(key, []).append(run())
    return result


# --- the report --------------------------------------------------------------------------


def _mm(values: Sequence[float]) -> tuple[float, float]:
    return min(values), statistics.median(values)


def _fmt(pair: tuple[float, float], digits: int = 3) -> str:
    return f"{pair[0]:.{digits}f} / {pair[1]:.{digits}f}"


def loop_per_ms(result: CaseResult, tool: str) -> tuple[float, float]:
    """(min, median) of CPU seconds per simulated ms, start-up taken off (ms of CPU / ms)."""
    full, startup = _mm(result.cpu(tool)), _mm(result.cpu(f"{tool}-1us"))
    ms = result.case.sim_ms
    return (full[0] - startup[0]) / ms * 1000, (full[1] - startup[1]) / ms * 1000


# htsim's figure is not above 0: rusage counts whole clock ticks, so a short run can read 0 s
# and a loop (the difference of two runs) 0 or less; a ratio over it would divide by zero or
# pass a goal on noise
NOT_MEASURED = "not measured (0 s or less)"
NOT_READ = "not read"  # a report field the tool gave as null, or no run gave


def _over(twin: float, htsim: float) -> float | None:
    return twin / htsim if htsim > 0 else None


def ratio(
    twin: tuple[float, float], htsim: tuple[float, float]
) -> tuple[float | None, float | None]:
    """twin / htsim, min and median; None where htsim's is not above 0 (:data:`NOT_MEASURED`)."""
    return _over(twin[0], htsim[0]), _over(twin[1], htsim[1])


def _fmt_ratio(pair: tuple[float | None, float | None]) -> str:
    if pair == (None, None):
        return NOT_MEASURED
    return " / ".join(NOT_MEASURED if v is None else f"{v:.2f}" for v in pair)


def _median_report(samples: list[Sample], key: str) -> float | None:
    values = [v for s in samples if (v := s.report.get(key)) is not None]
    return statistics.median(values) if values else None


def _show(value: float | None, spec: str) -> str:
    return NOT_READ if value is None else format(value, spec)


def _gbps(bps: float | None) -> str:
    return NOT_READ if bps is None else f"{bps / 1e9:.2f} ({bps / SPEED_BPS:.1%})"


def check_table(results: list[CaseResult]) -> None:
    print("\nscenario check (the timed runs at D; medians over the rounds): delivered frame")
    print("throughput at the receiver, Gb/s (% of line rate), PFC and what must stay 0")
    print(
        "| case | twin delivered | twin PFC frames | twin max paused | twin drops / ECN / CNPs "
        "| htsim delivered (to t) | htsim PAUSEs | htsim rtx / overflow |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        t, h = r.samples["twin"], r.samples["htsim"]
        zeros = "/".join(
            _show(_median_report(t, k), "g") for k in ("lossless_drops", "ce_fraction", "cnps_sent")
        )
        sampled = _median_report(h, "sampled_s")
        sampled_ms = NOT_READ if sampled is None else f"{sampled * 1000:g} ms"
        print(
            f"| {r.case.label} | {_gbps(_median_report(t, 'goodput_bps'))} "
            f"| {_show(_median_report(t, 'pfc_frames'), '.0f')} "
            f"| {_show(_median_report(t, 'max_paused_fraction'), '.1%')} | {zeros} "
            f"| {_gbps(_median_report(h, 'delivered_bps'))} (to {sampled_ms}) | not reported "
            f"| {_show(_median_report(h, 'rtx_packets'), '.0f')} / "
            f"{_show(_median_report(h, 'overflow_warnings'), '.0f')} |"
        )


def _rss_mib(samples: list[Sample]) -> float:
    return max(s.rss_kib for s in samples) / 1024


def _engine_per_ms(r: CaseResult) -> str:
    """The twin's ``wall_s`` (its engine alone) per simulated ms, min / median, in ms."""
    walls = [v for s in r.samples["twin"] if (v := s.report.get("wall_s")) is not None]
    return _fmt(_mm([v * 1000 / r.case.sim_ms for v in walls]), 2) if walls else NOT_READ


def main_row(r: CaseResult) -> str:
    twin, htsim = _mm(r.cpu("twin")), _mm(r.cpu("htsim"))
    twin_loop, htsim_loop = loop_per_ms(r, "twin"), loop_per_ms(r, "htsim")
    events = _show(_median_report(r.samples["twin"], "events"), ".0f")
    return (
        f"| {r.case.label} | {_fmt(twin)} | {_fmt(htsim)} | {_fmt_ratio(ratio(twin, htsim))} "
        f"| {_fmt(twin_loop, 2)} | {_engine_per_ms(r)} | {_fmt(htsim_loop, 2)} "
        f"| {_fmt_ratio(ratio(twin_loop, htsim_loop))} | {events} / - "
        f"| {_rss_mib(r.samples['twin']):.1f} / {_rss_mib(r.samples['htsim']):.1f} "
        f"| {_gbps(_median_report(r.samples['twin'], 'goodput_bps'))} / "
        f"{_gbps(_median_report(r.samples['htsim'], 'delivered_bps'))} |"
    )


def main_table(results: list[CaseResult], rounds: int) -> None:
    print(
        f"\nCPU (user + sys) of fresh processes, s; min / median of {rounds} rounds; loop = "
        "(CPU at D - CPU at 1 us) per simulated ms, in ms of CPU; ratios twin / htsim"
    )
    print(
        "| case | twin e2e CPU | htsim e2e CPU | ratio e2e | twin loop /ms "
        "| twin wall_s /ms | htsim loop /ms | ratio loop | events twin / htsim "
        "| peak RSS MiB twin / htsim | delivered twin / htsim |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(main_row(r))
    print("\nstart-up: the same commands at 1 us (CPU s, min / median; peak RSS MiB)")
    print("| case | twin CPU | htsim CPU | ratio | twin RSS | htsim RSS |")
    print("|---|---|---|---|---|---|")
    for r in results:
        twin, htsim = _mm(r.cpu("twin-1us")), _mm(r.cpu("htsim-1us"))
        print(
            f"| {r.case.senders}:1 (with {r.case.duration}) | {_fmt(twin)} | {_fmt(htsim)} "
            f"| {_fmt_ratio(ratio(twin, htsim))} | {_rss_mib(r.samples['twin-1us']):.1f} "
            f"| {_rss_mib(r.samples['htsim-1us']):.1f} |"
        )


def _goal(
    text: str, limit: float, values: dict[str, float | None], show: Callable[[float], str]
) -> None:
    """One goal over the cases: MISSED if a measured one is over ``limit``; else not measured
    if one is not; else met.  ``values`` by case label, None where not measured."""
    if not values:
        print(f"- {text}: no case run")
        return
    measured = [v for v in values.values() if v is not None]
    worst = max(measured, default=None)
    if worst is not None and worst > limit:
        verdict = "MISSED"
    elif len(measured) < len(values):
        verdict = "not measured"
    else:
        verdict = "met"
    cases = ", ".join(f"{k}: {NOT_MEASURED if v is None else show(v)}" for k, v in values.items())
    print(f"- {text}: {verdict} ({'' if worst is None else f'worst {worst:.3g}; '}{cases})")


def goals(results: list[CaseResult]) -> None:
    print("\ngoals (medians)")
    loops = {
        r.case.label: ratio(loop_per_ms(r, "twin"), loop_per_ms(r, "htsim"))[1] for r in results
    }
    _goal(f"loop ratio <= {GOAL_LOOP_RATIO} on every case", GOAL_LOOP_RATIO, loops, "{:.2f}".format)
    at = f"{GOAL_E2E_AT_US / 1000:g} ms"
    short = [r for r in results if r.case.duration_us == GOAL_E2E_AT_US]
    e2e = {r.case.label: ratio(_mm(r.cpu("twin")), _mm(r.cpu("htsim")))[1] for r in short}
    if e2e:
        _goal(f"e2e ratio <= {GOAL_E2E_RATIO} at {at}", GOAL_E2E_RATIO, e2e, "{:.2f}".format)
    else:
        print(f"- e2e ratio at {at}: no {at} case run")
    startup: dict[str, float | None] = {r.case.label: _mm(r.cpu("twin-1us"))[1] for r in results}
    _goal(
        f"twin start-up (1 us run) <= {GOAL_STARTUP_S} s CPU",
        GOAL_STARTUP_S,
        startup,
        "{:.3f} s".format,
    )


def print_setup(setup: Setup, flags: str, commit: str, results: list[CaseResult]) -> None:
    print(f"htsim {commit} ({setup.binary}); build: {flags}")
    print(f"twin: {setup.twin_python} -m agent, code {setup.root}")
    for r in {r.case.senders: r for r in results}.values():
        p = r.htsim
        print(
            f"htsim {r.case.senders}:1: {p.nodes} hosts (2-tier fat tree, "
            f"{p.senders + 1} on leaf 0), "
            f"-mtu {p.mss} ({p.mss + HTSIM_HEADER}-byte packets), -hop_latency {p.hop_us:g} us, "
            f"-pfc_thresholds {p.pfc_low} {p.pfc_high} (x {p.mss} B), -q {p.queue_pkts}"
        )


# --- command line ------------------------------------------------------------------------


DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)(us|ms|s)")
UNIT_US = {"us": 1, "ms": 1000, "s": 1_000_000}
SENDERS = re.compile(r"[0-9]+")


def parse_duration(text: str) -> int:
    """Whole microseconds (htsim's ``-end`` is an integer of us); decimal arithmetic, so a
    value that is whole in us (``1.001ms``) is taken and one that is not (``0.5us``) is not."""
    match = DURATION.fullmatch(text.strip())
    if not match:
        raise argparse.ArgumentTypeError(
            f"--durations: Expected: a duration with its unit, e.g. 10ms, 500us, 1s "
            f"Actual: {text!r}"
        )
    number, unit = match.groups()
    # room for every digit of the product, so nothing is rounded away before the check
    exact = decimal.Context(prec=len(number) + len(str(UNIT_US[unit])))
    value = exact.multiply(decimal.Decimal(number), UNIT_US[unit])
    if value < 1 or value != value.to_integral_value():
        raise argparse.ArgumentTypeError(
            f"--durations: Expected: a whole number of us, at least 1us Actual: {text!r} "
            f"({exact.normalize(value):f} us)"
        )
    return int(value)


def _items(option: str, text: str) -> list[str]:
    """The comma-separated values of ``option``, blanks left out; at least one."""
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items:
        raise argparse.ArgumentTypeError(
            f"{option}: Expected: one value or more, comma-separated Actual: {text!r}"
        )
    return items


def parse_senders(text: str) -> list[int]:
    """N of each N:1 incast: whole numbers the twin's ``--senders`` takes (1..MAX_SENDERS)."""
    senders = []
    for item in _items("--senders", text):
        if not SENDERS.fullmatch(item) or not 1 <= int(item) <= MAX_SENDERS:
            raise argparse.ArgumentTypeError(
                f"--senders: Expected: whole numbers 1-{MAX_SENDERS} (the twin's limit), "
                f"comma-separated Actual: {item!r}"
            )
        senders.append(int(item))
    return senders


def parse_durations(text: str) -> list[tuple[str, int]]:
    """Each simulated time as given (the twin's ``--duration``) and in whole us."""
    return [(item, parse_duration(item)) for item in _items("--durations", text)]


def code_root() -> Path:
    """The checkout whose ``agent`` this interpreter imports (``PYTHONPATH`` decides)."""
    return Path(agent.__file__).resolve().parents[1]


def child_env(root: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(root), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    )
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # children cache their bytecode
    return env


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds per case")
    parser.add_argument("--senders", default="8,16", help="N of the N:1 incasts, comma-separated")
    parser.add_argument(
        "--durations", default="10ms,100ms", help="simulated times, comma-separated"
    )
    parser.add_argument(
        "--htsim-src", default=HTSIM_REPO, help="htsim's git URL or a local git dir"
    )
    default_cache = f"~/.cache/roce-agent-bench/htsim-{HTSIM_COMMIT[:12]}"
    parser.add_argument(
        "--cache", type=Path, default=None, help=f"htsim's checkout and build ({default_cache})"
    )
    parser.add_argument("--json", type=Path, default=None, help="write every raw number here")
    parser.add_argument("--twin-python", default=sys.executable, help="interpreter for the twin")
    args = parser.parse_args(argv)
    try:
        args.senders = parse_senders(args.senders)
        args.durations = parse_durations(args.durations)
    except argparse.ArgumentTypeError as err:
        parser.error(str(err))
    if args.rounds < 1:
        parser.error(f"--rounds: Expected: 1 or more Actual: {args.rounds}")
    if args.cache is None:
        args.cache = Path.home() / ".cache" / "roce-agent-bench" / f"htsim-{HTSIM_COMMIT[:12]}"
    return args


def write_json(path: Path, meta: dict[str, Any], results: list[CaseResult]) -> None:
    cases = [
        {
            "case": asdict(r.case),
            "htsim_params": asdict(r.htsim),
            "samples": {k: [asdict(s) for s in v] for k, v in r.samples.items()},
        }
        for r in results
    ]
    path.write_text(json.dumps({"meta": meta, "cases": cases}, indent=1) + "\n")


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def interpreter_floor(setup: Setup, rounds: int) -> list[float]:
    """CPU of the twin's interpreter doing nothing (``python -c pass``, the same environment):
    what no Python command can go under, the floor of its end-to-end figures."""
    argv = [setup.twin_python, "-c", "pass"]
    run_child(setup, argv, setup.env, setup.root)  # warm-up, as for every case
    return [run_child(setup, argv, setup.env, setup.root).cpu_s for _ in range(rounds)]


def run(args: argparse.Namespace) -> None:
    checkout = htsim_checkout(args.htsim_src, args.cache)
    binary = build_htsim(checkout)
    commit = _check(["git", "-C", str(checkout), "rev-parse", "HEAD"], "htsim: its commit").strip()
    flags = compile_flags(checkout)
    root = code_root()
    started = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    load_start = _load()
    results = []
    with tempfile.TemporaryDirectory(prefix="twin-vs-cpp-") as tmp:
        launcher = build_launcher(args.cache)
        setup = Setup(args.twin_python, root, child_env(root), binary, launcher, Path(tmp))
        for senders in args.senders:
            for duration, duration_us in args.durations:
                case = Case(senders, duration, duration_us)
                print(f"measuring {case.label} ({args.rounds} rounds) ...", flush=True)
                results.append(measure_case(setup, case, args.rounds))
        floor = interpreter_floor(setup, args.rounds)
        print(
            f"\ntwin vs htsim, PFC-only N:1 incast at {SPEED}, {CABLE_M:g} m cables, "
            f"{FRAME}-byte frames; {started}; {os.cpu_count()} CPUs; "
            f"load average at start {load_start}, at end {_load()}"
        )
        print_setup(setup, flags, commit, results)
    check_table(results)
    main_table(results, args.rounds)
    print(
        f"\nthe interpreter alone (`{args.twin_python} -c pass`, the twin's environment): "
        f"CPU {_fmt(_mm(floor))} s (min / median of {args.rounds})"
    )
    goals(results)
    if args.json:
        meta = {
            "date": started,
            "loadavg_start": load_start,
            "loadavg_end": _load(),
            "htsim_commit": commit,
            "htsim_src": args.htsim_src,
            "compile_flags": flags,
            "code_root": str(root),
            "twin_python": args.twin_python,
            "rounds": args.rounds,
            "interpreter_cpu_s": floor,
        }
        write_json(args.json, meta, results)
        print(f"\nraw numbers: {args.json}")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    try:
        run(args)
    except BenchError as err:
        sys.exit(f"twin_vs_cpp: {err}")


if __name__ == "__main__":
    main()
