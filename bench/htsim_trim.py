"""The twin's packet trimming against htsim's: trims and message completion times of an N:1 incast.

Issue #47, item 6.  htsim (Broadcom's csg-htsim, C++; the commit the bench was written and
measured against is :data:`HTSIM_COMMIT`) has two trimming transports: NDP
(``sim/ndp.cpp``, driver ``sim/datacenter/main_ndp.cpp``) and EQDS (``sim/eqds.cpp``,
``main_eqds.cpp``); its switch queue ``CompositeQueue`` (``sim/compositequeue.cpp``) trims.
Broadcom's tree has no UEC transport; spcl/HTSIM (a fork of the UEC consortium's htsim,
:data:`UEC_COMMIT`) has one, ``htsim/sim/uec.cpp`` with NSCC, driver ``main_uec.cpp``, on the
same ``CompositeQueue``.  The bench does not fetch or build either: ``--htsim`` is a built
csg-htsim tree (its root, ``sim/`` or ``sim/datacenter/``) or the ``htsim_ndp`` binary, with
``htsim_eqds`` beside it; ``--uec`` (optional) a built spcl/HTSIM tree or ``htsim_uec``::

    git clone https://github.com/Broadcom/csg-htsim && cd csg-htsim && git checkout <commit>
    make -j2 -C sim libhtsim.a && make -j2 -C sim/datacenter htsim_ndp htsim_eqds
    git clone https://github.com/spcl/HTSIM && cd HTSIM && git checkout <commit>
    cmake -S htsim/sim -B htsim/sim/build -DCMAKE_BUILD_TYPE=Release
    make -j2 -C htsim/sim/build htsim_uec

The scenario, both tools: N senders -> 1 receiver on one switch, 400 Gb/s, one message of
``--frames`` full frames (512: 2 MiB of RoCE payload) per sender, all posted at t=0; the
receiver's downlink is the only bottleneck.  Per N (``--senders``, default 4,8,16):

- twin: a one-switch fabric built here (:func:`fabric_yaml`: SONiC, profile nvidia-default,
  ``overrides: {mode: lossy-trim, trim: {size_bytes: 64}}``), the engine run in this
  process on N :class:`~agent.twin.flows.FlowSpec` of ``size_bytes`` one message each, payload
  4 096 (frames of 4 158 bytes, FCS included, +20 on the wire: preamble, SFD, gap),
  selective repeat, ``paths="spray"`` (what ``twin --mode lossy-trim`` runs); the run ends
  when every message is in.  A lossy-trim RoCE queue over its limit (the plan's lossy
  ``queue_limit_bytes``) trims the arriving frame to 64 bytes and queues it in the trimmed
  packets' strict queue; the responder NAKs that PSN and the sender resends it at once.
  Twice: DCQCN off (every sender at line rate throughout, retransmissions first) and DCQCN
  on (the profile's ECN and DCQCN).  trims = ``trim_facts(engine).trimmed``.
- htsim: ``-tiers 2 -nodes 2(N+1)^2`` builds a fat tree whose leaf 0 holds hosts 0..N (the
  receiver 0, senders 1..N: the other leaves idle), ``-strat ecmp_host -paths 1``,
  ``-linkspeed 400000``, ``-hop_latency`` the twin's cable delay, ``-queue_type composite``.
  NDP: ``-mtu 4094`` (a data packet is that + ``NdpPacket::ACKSIZE`` 64 = 4 158 bytes, no
  preamble or gap; a trimmed one is 64), each flow ``frames * 4094`` bytes, ``-q`` the
  twin's limit in frames, rounded up to 4 094-byte units.  EQDS: ``-mtu 4158`` is the
  packet (payload 4 094 + a 64-byte header), ``-q`` the same frames.  ``CompositeQueue``
  trims when a data packet would take its low-priority queue over ``-q``: the arriving one,
  or with probability 1/2 the last one queued (one trim either way), and queues the 64-byte
  header in its high-priority queue (up to 2x ``-q``), served first.  Transport runs:
  ``ndp-bdp`` (``-cwnd`` one bandwidth-delay product: NDP's design, the first window
  unsolicited, then every packet pulled by the receiver at 99 % of its line),
  ``ndp-unpaced`` (``-cwnd`` the whole message: every packet sent unsolicited at line rate,
  retransmissions pulled), ``eqds`` (``-cwnd`` one BDP; receiver credits), ``uec-nscc``
  (``htsim_uec`` with its defaults: NSCC, the sender's window cut on ECN -- marked on the
  receiver's ToR port between 0.2 and 0.8 BDP -- and on trims, ``-trimsize`` 64; no
  ``-cwnd``: NSCC's own start).  NDP and EQDS print each flow's ``finished at`` (us; flows
  start at 0); htsim_uec's are commented out, so the bench reads its ``-o`` log's FLOW_EVENT
  finish records (:func:`log_finish_us`).  All print ``New: .. Rtx: ..``; main_ndp.cpp
  does not print ``CompositeQueue::num_stripped()``, so trims = Rtx: each trimmed header
  reaching the sink is NACKed and retransmitted once, and nothing else retransmits unless an
  RTO fires (NDP: min RTO 50 ms, ``NdpSrc::setMinRTO(50000)`` in main_ndp.cpp, far past these
  runs; EQDS prints its own, 214 us here) or a header is dropped (the high queue's 2x
  ``-q``; ``Bounced`` and ``Total RTOs`` are noted where htsim prints them).  A build that
  prints ``Stripped: N`` (an outside validation patch counting every ``_num_stripped++``;
  tests/data/htsim/README.md) is checked against Rtx, and its count is taken.  For UEC,
  trims = its ``NACKs`` (checked against Rtx: its min RTO is 15 us + 6 queue drains).

The table: per N and model, trims (and per frame of the messages), retransmissions, message
completion p50 and max (nearest rank), the receiver's line time (N * frames * wire bytes * 8
/ rate, each tool's own wire bytes), the time trimmed frames hold that line (trims * their
wire bytes * 8 / rate: a trimmed frame goes on to the receiver, ahead of data), the rest of
max (max - line - trimmed: the path's latency, idle time) and max over the line time.  htsim
times a flow at its sender (the last ACK back: one path latency, ~2 us here, after the
receiver has it), the twin a message at its responder.  Then the ratios twin / htsim for the
pairs whose senders come closest: twin DCQCN off against ndp-unpaced (no congestion
control: every frame first sent at line rate), twin DCQCN on against ndp-bdp and against
uec-nscc (a sender that backs off).  What differs is printed with the table
(:data:`DIFFERENCES`).

    python bench/htsim_trim.py --htsim PATH [--uec PATH] [--senders 4,8,16] [--frames 512]
        [--cable-m 200] [--htsim-commit SHA] [--uec-commit SHA] [--no-eqds] [--json FILE]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import os
import re
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # `python bench/htsim_trim.py` from a checkout
    sys.path.insert(0, str(REPO))

from agent.twin.network import ROCE_FRAME_OVERHEAD  # noqa: E402 -- after the sys.path insert above

HTSIM_COMMIT = "841d9e7be46bb968eece766aa4b6c044c7799f67"
UEC_COMMIT = "8a33f33ee20669387041429816a07af7614f1230"  # spcl/HTSIM
SPEED = "400G"
SPEED_BPS = 400_000_000_000
PAYLOAD = 4096
FRAME = PAYLOAD + ROCE_FRAME_OVERHEAD  # 4 158
WIRE_GAP = 20  # the twin's preamble, SFD and inter-frame gap (agent/twin/frames.py)
TWIN_WIRE = FRAME + WIRE_GAP
HTSIM_HEADER = 64  # NdpPacket::ACKSIZE and EQDS's header: added to NDP's -mtu, in EQDS's
NDP_MTU = FRAME - HTSIM_HEADER  # 4 094: a 4 158-byte NDP packet
EQDS_MTU = FRAME  # EQDS's -mtu is the packet
TRIM_BYTES = 64  # the twin's trim size, htsim's header
PORT_MTU = 9100  # the fabric's port MTU: RoCE MTU 4096
PROFILE = "nvidia-default"
US = 1e-6


class BenchError(Exception):
    """A step failed: the message says which and where."""


# --- the scenario ------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    senders: int
    frames: int  # full frames per message
    cable_m: float

    def line_us(self, wire_bytes: int) -> float:
        """The receiver's downlink busy for every frame once: the least max completion."""
        return self.senders * self.frames * wire_bytes * 8 / SPEED_BPS / US


@dataclass(frozen=True)
class HtsimRun:
    """One htsim transport run: its label, binary name, ``-mtu``, ``-q`` and ``-cwnd`` (None:
    the driver's own default)."""

    label: str
    binary: str
    mtu: int
    mss: int  # payload bytes a packet carries: the flow's size is frames * mss
    queue: int
    cwnd: int | None

    def argv(self, binary: Path, case: Case, hop_us: float, files: tuple[Path, Path]) -> list[str]:
        matrix, log = files
        leaf = case.senders + 1
        end_us = max(1000, math.ceil(20 * case.line_us(FRAME)))
        return [
            str(binary),
            *("-nodes", str(2 * leaf * leaf), "-tiers", "2", "-tm", str(matrix)),
            *("-end", str(end_us), "-mtu", str(self.mtu), "-linkspeed", str(SPEED_BPS // 10**6)),
            *("-hop_latency", f"{hop_us:g}", "-q", str(self.queue)),
            *(() if self.cwnd is None else ("-cwnd", str(self.cwnd))),
            *("-queue_type", "composite", "-strat", "ecmp_host", "-paths", "1"),
            *("-o", str(log)),
        ]


def matrix_text(case: Case, mss: int) -> str:
    """htsim's connection matrix: senders 1..N -> host 0, ``frames * mss`` bytes at t=0."""
    leaf = case.senders + 1
    size = case.frames * mss
    flows = [f"{s}->0 start 0 size {size}" for s in range(1, case.senders + 1)]
    return "\n".join([f"Nodes {2 * leaf * leaf}", f"Connections {case.senders}", *flows]) + "\n"


def queue_frames(limit_bytes: int) -> int:
    """Full frames the twin's lossy queue holds: it trims a frame that would take it over."""
    return limit_bytes // FRAME


def htsim_queue(frames: int, unit: int) -> int:
    """htsim's ``-q`` (units of ``unit`` bytes) that holds ``frames`` packets of FRAME bytes
    and not one more: ``q * unit`` in ``[frames * FRAME, (frames + 1) * FRAME)``."""
    q = -(-frames * FRAME // unit)
    if not frames * FRAME <= q * unit < (frames + 1) * FRAME:
        raise BenchError(f"htsim -q for {frames} frames: no multiple of {unit} B holds exactly")
    return q


def bdp_packets(hop_us: float) -> int:
    """One bandwidth-delay product in packets: 4 wire delays (sender -> switch -> receiver
    and back) plus a data packet and a header serialised on two hops each."""
    rtt_s = 4 * hop_us * US + 2 * (FRAME + HTSIM_HEADER) * 8 / SPEED_BPS
    return math.ceil(rtt_s * SPEED_BPS / 8 / FRAME)


def htsim_runs(case: Case, frames_queued: int, hop_us: float) -> list[HtsimRun]:
    bdp = bdp_packets(hop_us)
    ndp_q = htsim_queue(frames_queued, NDP_MTU)
    eqds_q = htsim_queue(frames_queued, EQDS_MTU)
    return [
        HtsimRun("ndp-bdp", "htsim_ndp", NDP_MTU, NDP_MTU, ndp_q, bdp),
        HtsimRun("ndp-unpaced", "htsim_ndp", NDP_MTU, NDP_MTU, ndp_q, case.frames),
        HtsimRun("eqds", "htsim_eqds", EQDS_MTU, EQDS_MTU - HTSIM_HEADER, eqds_q, bdp),
        HtsimRun("uec-nscc", "htsim_uec", EQDS_MTU, EQDS_MTU - HTSIM_HEADER, eqds_q, None),
    ]


def fabric_yaml(hosts: int, cable_m: float) -> str:
    """A one-switch lossy-trim fabric: ``leaf1`` (SONiC: it trims) and hosts h1..h<hosts>."""
    lines = [
        "name: htsim-trim-star",
        f"profile: {PROFILE}",
        "defaults:",
        "  username: netops",
        "  credentials: {password_env: TWIN_UNUSED}",
        "overrides:",
        "  mode: lossy-trim",
        f"  trim: {{size_bytes: {TRIM_BYTES}}}",
        "devices:",
        "  - {name: leaf1, platform: sonic, role: leaf, host: leaf1,",
    ]
    port = f"speed: {SPEED}, cable_m: {cable_m:g}, mtu: {PORT_MTU}"
    ports = ", ".join(
        f'{{name: Ethernet{i}, {port}, peer: "h{i}:eth0"}}' for i in range(1, hosts + 1)
    )
    lines.append(f"     ports: [{ports}]}}")
    lines += [
        f"  - {{name: h{i}, platform: linux_host, role: host, host: h{i}, ports: "
        f'[{{name: eth0, {port}, peer: "leaf1:Ethernet{i}"}}]}}'
        for i in range(1, hosts + 1)
    ]
    return "\n".join(lines) + "\n"


# --- outcomes and their table -------------------------------------------------------------


@dataclass
class Outcome:
    """One model's run of one case: trims, retransmissions, each message's completion (us)."""

    model: str
    senders: int
    trims: int
    retransmitted: int
    completions_us: list[float]
    wire_bytes: int  # a full frame on the model's wire
    trim_wire_bytes: int  # a trimmed frame on the model's wire
    notes: list[str] = field(default_factory=list)
    cpu_s: float = 0.0

    @property
    def p50_us(self) -> float | None:
        return nearest_rank(self.completions_us, 0.5)

    @property
    def max_us(self) -> float | None:
        return max(self.completions_us) if self.completions_us else None


def nearest_rank(values: Sequence[float], fraction: float) -> float | None:
    """The smallest value with at least ``fraction`` of the values at or below it (as the
    twin's :func:`agent.twin.trimming.percentile`); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(round(fraction * len(ordered), 9)))
    return ordered[min(rank, len(ordered)) - 1]


def ratio(num: float | None, den: float | None) -> float | None:
    """``num / den``; None where either is missing or ``den`` is 0."""
    if num is None or den is None or den == 0:
        return None
    return num / den


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def outcome_row(case: Case, o: Outcome) -> list[str]:
    done = f"{len(o.completions_us)}/{case.senders}"
    return [
        f"{case.senders}:1",
        o.model,
        str(o.trims),
        _x(o.trims / (case.senders * case.frames)),
        str(o.retransmitted),
        done,
        _us(o.p50_us),
        _us(o.max_us),
        _us(case.line_us(o.wire_bytes)),
        _us(header_us(o)),
        _us(None if o.max_us is None else o.max_us - case.line_us(o.wire_bytes) - header_us(o)),
        _x(ratio(o.max_us, case.line_us(o.wire_bytes))),
    ]


def header_us(o: Outcome) -> float:
    """The receiver's downlink busy with trimmed frames (they reach the receiver too)."""
    return o.trims * o.trim_wire_bytes * 8 / SPEED_BPS / US


OUTCOME_HEADER = (
    "| incast | model | trims | trims a frame | retransmitted | messages done | p50 us | max us "
    "| line us | trimmed frames us | rest us | max / line |"
)
# (twin model, htsim model): the pairs whose senders behave alike
PAIRS = (
    ("twin-dcqcn-off", "ndp-unpaced"),
    ("twin-dcqcn-on", "ndp-bdp"),
    ("twin-dcqcn-on", "uec-nscc"),
)


def pair_rows(case: Case, by_model: dict[str, Outcome]) -> list[list[str]]:
    rows = []
    for twin, htsim in PAIRS:
        a, b = by_model.get(twin), by_model.get(htsim)
        if a is None or b is None:
            continue
        rows.append(
            [
                f"{case.senders}:1",
                f"{twin} / {htsim}",
                f"{a.trims} / {b.trims}",
                _x(ratio(a.trims, b.trims)),
                _x(ratio(a.p50_us, b.p50_us)),
                _x(ratio(a.max_us, b.max_us)),
            ]
        )
    return rows


PAIR_HEADER = "| incast | twin / htsim | trims | trims ratio | p50 ratio | max ratio |"


def markdown(header: str, rows: list[list[str]]) -> str:
    cells = header.count("|") - 1
    return "\n".join([header, "|" + "---|" * cells, *("| " + " | ".join(r) + " |" for r in rows)])


# --- htsim: run and read ----------------------------------------------------------------


FINISHED = re.compile(r"^Flow (\S+) .*\bfinished at ([0-9.eE+-]+) ", re.MULTILINE)
TOTALS = re.compile(r"^New: (\d+) Rtx: (\d+)(?: RTS: \d+)? Bounced: (\d+)(.*)$", re.MULTILINE)
NACKS = re.compile(r"\bNACKs: (\d+)")
STRIPPED = re.compile(r"^Stripped: (\d+)\s*$", re.MULTILINE)
RTOS = re.compile(r"^Total RTOs: (\d+)", re.MULTILINE)
QUEUE = re.compile(r"^Tier 0 QueueSize Down (\d+) bytes", re.MULTILINE)


@dataclass(frozen=True)
class HtsimOutput:
    """What an htsim NDP or EQDS run printed: each finished flow's time (us), its totals."""

    finished_us: dict[str, float]
    new: int
    rtx: int
    bounced: int
    stripped: int | None
    rtos: int
    queue_bytes: int | None
    nacks: int | None = None  # htsim_uec's NACKs sent (one per trimmed header at the sink)


def parse_htsim(text: str) -> HtsimOutput:
    """Read htsim_ndp's or htsim_eqds's stdout; :class:`BenchError` without its totals."""
    totals = TOTALS.search(text)
    if totals is None:
        raise BenchError("htsim: Expected: a `New: .. Rtx: .. Bounced: ..` line Actual: none")
    stripped = STRIPPED.search(text)
    rtos = RTOS.findall(text)
    queue = QUEUE.search(text)
    nacks = NACKS.search(totals.group(4))
    return HtsimOutput(
        finished_us={name: float(at) for name, at in FINISHED.findall(text)},
        new=int(totals.group(1)),
        rtx=int(totals.group(2)),
        bounced=int(totals.group(3)),
        stripped=None if stripped is None else int(stripped.group(1)),
        rtos=int(rtos[-1]) if rtos else 0,
        queue_bytes=None if queue is None else int(queue.group(1)),
        nacks=None if nacks is None else int(nacks.group(1)),
    )


LOG_RECORD = struct.Struct("<dIIIddd")  # logfile.cpp: time (s), type, id, event, 3 values
FLOW_EVENT, FLOW_FINISHED = 50, 5001  # spcl/HTSIM loggertypes.h: Logger::FLOW_EVENT


def log_finish_us(data: bytes) -> dict[int, float]:
    """Each flow's finish time (us) from an htsim ``-o`` log: the binary records after
    ``# TRACE`` of type FLOW_EVENT, event 5001 (spcl/HTSIM writes one per flow as it
    completes; its ``finished at`` lines are commented out).  Keyed by the flow's log id."""
    marker = data.find(b"# TRACE\n")
    if marker < 0:
        return {}
    body = data[marker + len(b"# TRACE\n") :]
    done = {}
    for offset in range(0, len(body) - len(body) % LOG_RECORD.size, LOG_RECORD.size):
        at, kind, ident, event, *_ = LOG_RECORD.unpack_from(body, offset)
        if kind == FLOW_EVENT and event == FLOW_FINISHED:
            done[ident] = at / US
    return done


def htsim_outcome(label: str, case: Case, out: HtsimOutput) -> Outcome:
    """trims = Rtx (module docstring), with what would make that untrue noted."""
    notes = []
    if out.stripped is not None and out.stripped != out.rtx:
        notes.append(f"Stripped {out.stripped} != Rtx {out.rtx}")
    if out.nacks is not None and out.nacks != out.rtx:
        notes.append(f"NACKs {out.nacks} != Rtx {out.rtx}")
    if out.bounced:
        notes.append(f"{out.bounced} headers bounced")
    if out.rtos:
        notes.append(f"{out.rtos} RTOs (their retransmissions are in Rtx)")
    if len(out.finished_us) < case.senders:
        notes.append(f"{case.senders - len(out.finished_us)} flows unfinished at -end")
    trims = next(n for n in (out.stripped, out.nacks, out.rtx) if n is not None)
    return Outcome(
        model=label,
        senders=case.senders,
        trims=trims,
        retransmitted=out.rtx,
        completions_us=sorted(out.finished_us.values()),
        wire_bytes=FRAME,
        trim_wire_bytes=HTSIM_HEADER,
        notes=notes,
    )


def find_binaries(path: Path) -> dict[str, Path]:
    """``htsim_ndp`` and ``htsim_eqds`` from a tree root, ``sim/``, ``sim/datacenter/`` or
    the ``htsim_ndp`` binary itself; :class:`BenchError` naming the build step if absent."""
    path = path.expanduser().resolve()
    folder = path.parent if path.is_file() else path
    for sub in (Path("."), Path("datacenter"), Path("sim/datacenter")):
        ndp = folder / sub / "htsim_ndp"
        if ndp.is_file():
            eqds = ndp.with_name("htsim_eqds")
            return {"htsim_ndp": ndp, **({"htsim_eqds": eqds} if eqds.is_file() else {})}
    raise BenchError(
        f"--htsim {path}: Expected: a built csg-htsim tree (sim/datacenter/htsim_ndp) or the "
        "htsim_ndp binary Actual: none there; build it with `make -C sim libhtsim.a && "
        "make -C sim/datacenter htsim_ndp htsim_eqds` (the bench fetches and builds nothing)"
    )


def find_uec(path: Path) -> Path:
    """``htsim_uec`` of a built spcl/HTSIM tree (CMake: ``htsim/sim/build/datacenter/``), from
    the tree's root, ``htsim/sim``, its build folder or the binary itself."""
    path = path.expanduser().resolve()
    if path.is_file():
        return path
    for sub in ("htsim/sim/build/datacenter", "sim/build/datacenter", "build/datacenter", "."):
        if (path / sub / "htsim_uec").is_file():
            return path / sub / "htsim_uec"
    raise BenchError(
        f"--uec {path}: Expected: a built spcl/HTSIM tree (htsim/sim/build/datacenter/htsim_uec) "
        "or the binary Actual: none there; build it with `cmake -S htsim/sim -B "
        "htsim/sim/build -DCMAKE_BUILD_TYPE=Release && make -C htsim/sim/build htsim_uec`"
    )


def run_htsim(binary: Path, run: HtsimRun, case: Case, hop_us: float, tmp: Path) -> Outcome:
    matrix, log = tmp / f"{run.label}-{case.senders}.cm", tmp / f"{run.label}-{case.senders}.log"
    matrix.write_text(matrix_text(case, run.mss))
    argv = run.argv(binary, case, hop_us, (matrix, log))
    before = os.times()
    done = subprocess.run(argv, capture_output=True, text=True, cwd=tmp)
    after = os.times()
    if done.returncode:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-10:])
        raise BenchError(f"htsim: `{' '.join(argv)}`: exit {done.returncode}\n{tail}")
    out = parse_htsim(done.stdout)
    if not out.finished_us and log.is_file():  # htsim_uec: the log's flow events
        finished = {f"flow {k}": v for k, v in log_finish_us(log.read_bytes()).items()}
        out = dataclasses.replace(out, finished_us=finished)
    outcome = htsim_outcome(run.label, case, out)
    outcome.cpu_s = (after.children_user + after.children_system) - (
        before.children_user + before.children_system
    )
    return outcome


# --- the twin ----------------------------------------------------------------------------


@dataclass(frozen=True)
class TwinSetup:
    """The twin's plan for the case's fabric: the lossy limit and the cable's delay."""

    fabric: Path
    limit_bytes: int
    hop_s: float
    trim_bytes: int


def twin_setup(case: Case, tmp: Path) -> TwinSetup:
    from agent.twin.network import load_network

    fabric = tmp / f"star-{case.senders + 1}.yml"
    fabric.write_text(fabric_yaml(case.senders + 1, case.cable_m))
    net = load_network(fabric)
    if net.mode != "lossy-trim":
        raise BenchError(f"{fabric}: Expected: mode lossy-trim Actual: {net.mode}")
    port = next(iter(net.switches.values())).ports[0]
    if port.buffer is None:
        raise BenchError(f"{fabric}: the switch port has no buffer plan")
    trim = port.qos.trim if port.qos is not None else None
    return TwinSetup(
        fabric=fabric,
        limit_bytes=port.buffer.queue_limit_bytes,
        hop_s=port.propagation_s,
        trim_bytes=trim.size_bytes if trim is not None else 0,
    )


def run_twin(case: Case, setup: TwinSetup, dcqcn: bool) -> Outcome:
    """The twin's engine on the case: one message per sender, until every one is in."""
    from agent.twin.engine import Engine
    from agent.twin.flows import FlowSpec
    from agent.twin.network import load_network
    from agent.twin.trimming import trim_facts
    from lossless.clock import TICKS_PER_SECOND

    net = load_network(setup.fabric)
    size = case.frames * PAYLOAD
    specs = [
        FlowSpec(src=f"h{i}", dst="h1", udp_sport=49150 + i, size_bytes=size)
        for i in range(2, case.senders + 2)
    ]
    done: list[float] = []

    def on_message(engine: Any, flow: Any, tag: object, tick: int) -> None:
        done.append(tick / TICKS_PER_SECOND / US)
        if len(done) == case.senders:
            engine.finish()

    engine = Engine(
        net, specs, recovery="selective-repeat", paths="spray", payload_bytes=PAYLOAD,
        reaction_point=dcqcn, on_message=on_message,
    )  # fmt: skip
    started = time.process_time()
    engine.run(max(1e-3, 20 * case.line_us(TWIN_WIRE) * US))
    cpu = time.process_time() - started
    facts = trim_facts(engine)
    notes = [f"{facts.trim_dropped} trimmed frames dropped"] if facts.trim_dropped else []
    if len(done) < case.senders:
        notes.append(f"{case.senders - len(done)} messages not in at the end")
    return Outcome(
        model="twin-dcqcn-on" if dcqcn else "twin-dcqcn-off",
        senders=case.senders,
        trims=facts.trimmed,
        retransmitted=facts.retransmitted,
        completions_us=sorted(done),
        wire_bytes=TWIN_WIRE,
        trim_wire_bytes=setup.trim_bytes + WIRE_GAP,
        notes=notes,
        cpu_s=cpu,
    )


# --- command line ------------------------------------------------------------------------


def parse_senders(text: str) -> list[int]:
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items or not all(item.isdigit() and 1 <= int(item) <= 64 for item in items):
        raise argparse.ArgumentTypeError(
            f"--senders: Expected: whole numbers 1-64, comma-separated Actual: {text!r}"
        )
    return [int(item) for item in items]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--htsim", type=Path, required=True,
        help="a built csg-htsim tree (or its htsim_ndp binary); nothing is fetched or built",
    )  # fmt: skip
    parser.add_argument("--htsim-commit", default=HTSIM_COMMIT, help="printed as htsim's commit")
    parser.add_argument("--senders", default="4,8,16", help="N of the N:1 incasts")
    parser.add_argument("--frames", type=int, default=512, help="full frames per message")
    parser.add_argument("--cable-m", type=float, default=200.0, help="every cable (m)")
    parser.add_argument("--no-eqds", action="store_true", help="leave htsim's EQDS out")
    parser.add_argument(
        "--uec", type=Path, default=None,
        help="also spcl/HTSIM's UEC transport: a built tree or its htsim_uec binary",
    )  # fmt: skip
    parser.add_argument("--uec-commit", default=UEC_COMMIT, help="printed as spcl/HTSIM's commit")
    parser.add_argument("--json", type=Path, default=None, help="write every number here")
    args = parser.parse_args(argv)
    try:
        args.senders = parse_senders(args.senders)
    except argparse.ArgumentTypeError as err:
        parser.error(str(err))
    if args.frames < 1 or not args.cable_m > 0:
        parser.error(
            f"--frames, --cable-m: Expected: above 0 Actual: {args.frames}, {args.cable_m}"
        )
    return args


def mapping_lines(case: Case, setup: TwinSetup, runs: list[HtsimRun]) -> list[str]:
    frames_queued = queue_frames(setup.limit_bytes)
    hop_us = setup.hop_s / US
    by = {r.label: r for r in runs}
    ndp, eqds = by["ndp-bdp"], by["eqds"]
    return [
        f"speed {SPEED}: twin port speed | htsim -linkspeed {SPEED_BPS // 10**6}",
        f"cable {case.cable_m:g} m: twin {hop_us:g} us a hop | htsim -hop_latency {hop_us:g}",
        f"frame: twin {PAYLOAD} + {ROCE_FRAME_OVERHEAD} = {FRAME} B (+20 on the wire) | htsim "
        f"NDP -mtu {NDP_MTU} + {HTSIM_HEADER} = {FRAME} B, EQDS -mtu {EQDS_MTU} (no preamble)",
        f"message: {case.frames} frames | twin {case.frames * PAYLOAD} B payload, htsim "
        f"{case.frames * NDP_MTU} B",
        f"queue: twin lossy limit {setup.limit_bytes} B = {frames_queued} frames | htsim NDP "
        f"-q {ndp.queue} (x {NDP_MTU} B), EQDS and UEC -q {eqds.queue} (x {EQDS_MTU} B)",
        f"trimmed frame: twin {setup.trim_bytes} B (+20 on the wire), strict queue | htsim "
        f"{HTSIM_HEADER} B, the queue's high-priority half (<= 2x -q)",
        f"windows: htsim -cwnd {ndp.cwnd} (one BDP; ndp-bdp, eqds), {case.frames} (ndp-unpaced)"
        ", NSCC's own (uec-nscc) | twin: none (rate-paced: line rate, or DCQCN's)",
        "topology: twin one switch | htsim 2-tier fat tree, the N+1 hosts on leaf 0, "
        "-strat ecmp_host -paths 1 (one path: spraying is moot in both)",
    ]


DIFFERENCES = (
    "What differs: NDP and EQDS are receiver-driven (after the first window a sender sends "
    "only what the receiver pulls, about one packet per packet it takes in, so retransmissions "
    "do not overload the queue again); UEC's NSCC is a sender window cut on ECN and on trims. "
    "The twin's RoCE NICs are rate-paced (line rate, or DCQCN's rate) and resend a NAKed frame "
    "at once, so retransmissions compete with new frames and may be trimmed again; with DCQCN "
    "on, each trim's NAK cuts the rate as a CNP does (the twin's assumption). htsim's queue "
    "trims the arriving packet or, half the time, the last one queued; the twin trims the "
    "arriving frame. Trimmed frames go on to the receiver ahead of data in both (the 'trimmed "
    "frames us' column: the receiver's line they take). The twin's wire carries 20 more bytes "
    "a frame (preamble, SFD, gap) than htsim's. htsim's finish times are at the sender (the last "
    "ACK back, ~2 us after the receiver has the data), the twin's at the responder. Spraying "
    "is moot on one switch in both."
)


def run_case(case: Case, binaries: dict[str, Path], tmp: Path) -> tuple[list[Outcome], list[str]]:
    """Every model's run of the case, and the parameter mapping it ran with."""
    setup = twin_setup(case, tmp)
    runs = htsim_runs(case, queue_frames(setup.limit_bytes), setup.hop_s / US)
    outcomes = [run_twin(case, setup, dcqcn) for dcqcn in (False, True)]
    for run in runs:
        if run.binary in binaries:
            outcomes.append(run_htsim(binaries[run.binary], run, case, setup.hop_s / US, tmp))
    return outcomes, mapping_lines(case, setup, runs)


def report(cases: dict[int, Case], results: dict[int, list[Outcome]]) -> None:
    """The outcome table, the pairs' ratios, each run's notes and what differs."""
    rows = [outcome_row(cases[n], o) for n, outs in results.items() for o in outs]
    print("\n" + markdown(OUTCOME_HEADER, rows))
    pairs = [
        row
        for n, outs in results.items()
        for row in pair_rows(cases[n], {o.model: o for o in outs})
    ]
    print("\nratios twin / htsim:\n" + markdown(PAIR_HEADER, pairs))
    for n, outs in results.items():
        for o in outs:
            if o.notes:
                print(f"note {n}:1 {o.model}: {'; '.join(o.notes)}")
    print("\n" + DIFFERENCES)


def run(args: argparse.Namespace) -> None:
    binaries = find_binaries(args.htsim)
    if args.no_eqds:
        binaries.pop("htsim_eqds", None)
    if args.uec is not None:
        binaries["htsim_uec"] = find_uec(args.uec)
        print(f"UEC: spcl/HTSIM {args.uec_commit} ({binaries['htsim_uec']})")
    started = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    print(
        f"twin vs htsim {args.htsim_commit} ({binaries['htsim_ndp'].parent}), lossy-trim N:1 "
        f"incast at {SPEED}, {args.frames} frames a message; {started}; {os.cpu_count()} CPUs"
    )
    results: dict[int, list[Outcome]] = {}
    shown: list[str] = []
    with tempfile.TemporaryDirectory(prefix="htsim-trim-") as tmp:
        for senders in args.senders:
            print(f"running {senders}:1 ...", flush=True)
            case = Case(senders, args.frames, args.cable_m)
            results[senders], mapping = run_case(case, binaries, Path(tmp))
            if mapping != shown:  # the same for every N unless the plan changes with it
                print("\n".join(["parameters (twin | htsim):", *(f"  {m}" for m in mapping)]))
                shown = mapping
    report({n: Case(n, args.frames, args.cable_m) for n in args.senders}, results)
    if args.json:
        data = {
            "date": started,
            "htsim_commit": args.htsim_commit,
            "htsim": str(binaries["htsim_ndp"]),
            "frames": args.frames,
            "cable_m": args.cable_m,
            "outcomes": [asdict(o) for outs in results.values() for o in outs],
        }
        args.json.write_text(json.dumps(data, indent=1) + "\n")
        print(f"\nraw numbers: {args.json}")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    try:
        run(args)
    except BenchError as err:
        sys.exit(f"htsim_trim: {err}")


if __name__ == "__main__":
    main()
