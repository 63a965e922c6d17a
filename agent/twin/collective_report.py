"""A collective's report and its verdict: what the twin measured of one job (time, algbw and
busbw as nccl-tests prints them, the fabric's pauses, marks and losses, the ECMP collisions)
and what to do about it (:func:`judge_collective`). :mod:`agent.twin.collectives` runs the
job and fills it in."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent.intent.units import format_speed
from agent.twin.trimming import TrimFacts
from agent.twin.verdicts import PAUSED_CEILING, Verdict
from agent.twin.workloads import MAX_QPS
from common.plain import plain

LINE_RATE_FLOOR = 0.90  # a busbw below this share of the NIC's line rate is a verdict

NOT_MODELLED: tuple[str, ...] = (
    "compute and reduction time, and their overlap with communication",
    "intra-host NVLink transfers (instantaneous; one rank per GPU NIC, none without a NIC)",
    "NCCL's LL and LL128 protocols (Simple only)",
    "NVLS, CollNet and PAT algorithms, and NCCL's own choice between ring and tree (the "
    "job's algorithm; all-to-all as pairwise flows)",
    "NCCL's own choice of the number of channels (the job's channels per NIC, rings duplicated "
    "onto the same NICs as NCCL does)",
    "GPUDirect RDMA details (PCIe, registration) and NCCL's per-step latency",
)


@dataclass(frozen=True)
class Collision:
    """A fabric link (switch to switch) on which the job's own ECMP hashing asks for more than
    the link carries: ``load`` = the connections' demand there / the link's speed (> 1)."""

    link: str
    connections: tuple[str, ...]
    qps: int
    load: float
    # The job asks more of the sending switch's links to switches together (or of the
    # receiving switch's, into it) than they carry: no hashing and no QP count avoids the
    # overload; the placement or the fabric must change.
    oversubscribed: bool = False


@dataclass(frozen=True)
class LinkLoad:
    """A switch port the job used: utilisation over the collective's time, its queue."""

    port: str
    speed_bps: int
    utilisation: float
    queue_p99_bytes: int
    queue_peak_bytes: int
    paused_fraction: float
    ecn_marked: int


@dataclass(frozen=True)
class CollectiveReport:
    fabric: str
    profile: str
    workload: str
    ranks: int
    hosts: list[str]  # each rank's endpoint (HOST:PORT on a multi-NIC host)
    speed_bps: int
    rails: int  # NICs per host, one channel each (1: one-NIC hosts, one ring)
    size_bytes: int  # nccl-tests' size (nccl_tests_size of the request)
    qps: int
    split_data_on_qps: bool
    channels: int  # ring channels per NIC (1 for all-to-all)
    seed: int
    time_s: float  # the last byte in order; the run's end when not completed
    algbw_Bps: float  # bytes/s, 0 when not completed
    busbw_Bps: float
    line_rate_fraction: float  # busbw / busbw_bound_Bps (the NICs' line rate)
    completed: bool
    delivered_fraction: float  # of the job's bytes, in order
    lossless_drops: int
    lossy_drops: int
    pfc_frames: int
    ce_fraction: float
    cnps: int
    retx_bytes: int
    timeouts: int
    max_paused_fraction: float
    busiest_port: str | None
    queue_p99_bytes: int  # of the busiest port
    queue_peak_bytes: int
    links: list[LinkLoad]  # busiest first
    collisions: list[Collision]
    jain: float | None  # over the connections' goodput (bytes / their own finish time)
    events: int
    wall_s: float
    verdict: Verdict
    notes: list[str] = field(default_factory=list)
    not_modelled: list[str] = field(default_factory=lambda: list(NOT_MODELLED))
    job: str = ""  # its name in a job file (several jobs side by side); "" for one collective
    algorithm: str = "ring"  # NCCL's for an all-reduce: ring or tree
    # The RoCE class's mode, path choice, trims, retransmissions, reordering and per-message
    # completion times (agent.twin.trimming); flat in the JSON.
    trim: TrimFacts | None = None

    @property
    def passed(self) -> bool:
        """The lossless promise held (as the scenario mode's exit code)."""
        return self.lossless_drops == 0

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = plain(self)
        data.update(data.pop("trim") or {})
        data["passed"] = self.passed
        data["algbw_GBps"] = self.algbw_Bps / 1e9
        data["busbw_GBps"] = self.busbw_Bps / 1e9
        return data


def _gbs(value: float) -> str:
    return f"{value / 1e9:.2f} GB/s"


def _why_slow(r: CollectiveReport) -> str:
    """What held it back, of what the report measured."""
    why = []
    if r.collisions:
        why.append(f"{len(r.collisions)} ECMP collision(s), first {r.collisions[0].link}")
    if r.cnps:
        why.append(f"{r.cnps} CNPs cut the QPs' DCQCN rates (run `roce-agent tune --dcqcn`)")
    if r.max_paused_fraction > PAUSED_CEILING:
        why.append(f"pauses up to {r.max_paused_fraction:.0%} of the run")
    if r.timeouts:
        why.append(f"{r.timeouts} retransmission timeouts")
    return " -- " + "; ".join(why) if why else ""


def _knob(r: CollectiveReport, field: str, value: object = None) -> str:
    """How the user sets ``field``: twin's option, or the job file's field of job ``r.job``."""
    if r.job:
        shown = "true" if field == "split_data_on_qps" else value
        return f"{field}" + (f": {shown}" if shown is not None else "") + f" in job {r.job}"
    option = "--" + field.replace("_", "-")
    return option + (f" {value}" if value is not None else "")


def _collision_verdict(r: CollectiveReport, worst: Collision, share: str) -> Verdict:
    split = (
        ""
        if r.split_data_on_qps
        else f" with {_knob(r, 'split_data_on_qps')} (NCCL_IB_SPLIT_DATA_ON_QPS=1: every "
        "message over all QPs at once)"
    )
    return Verdict(
        "ecmp-collision",
        f"ECMP collision: {worst.link} carries {', '.join(worst.connections)} "
        f"({worst.load:.0%} of its speed); {share} -- more QPs per connection spread each "
        f"connection over more paths: {_knob(r, 'qps_per_connection', min(MAX_QPS, 2 * r.qps))} "
        f"(NCCL_IB_QPS_PER_CONNECTION){split}",
    )


def nic_rate(r: CollectiveReport) -> str:
    """What busbw is measured against (:func:`busbw_bound_Bps`), in words."""
    speed = format_speed(r.speed_bps)
    if r.algorithm == "tree":
        nics = f"{r.rails} x {speed}" if r.rails > 1 else speed
        return f"{nics} (the trees' busiest host at line rate)"
    if r.rails == 1:
        return speed
    if r.workload == "alltoall":
        return f"{speed} x {r.ranks - 1}/{r.ranks - r.rails} (one NIC per GPU, NVLink for its host)"
    if r.workload == "sendrecv":
        return f"{speed} (each GPU's buffer over its own NIC)"
    return f"{r.rails} x {speed}"


def judge_collective(r: CollectiveReport) -> Verdict:
    """The collective's verdict, first match: lost frames, not finished, an ECMP collision
    that costs bandwidth (hashing, else the job oversubscribes a switch's fabric links),
    pauses, below line rate, healthy."""
    share = f"busbw {_gbs(r.busbw_Bps)} = {r.line_rate_fraction:.0%} of {nic_rate(r)}"
    if r.lossless_drops:
        return Verdict(
            "lossless-loss",
            f"lossless loss: {r.lossless_drops} frames of a no-drop priority lost "
            f"({r.retx_bytes} bytes retransmitted) -- check the headroom (`roce-agent plan`)",
        )
    if not r.completed:
        return Verdict(
            "incomplete",
            f"{r.workload} did not finish in {r.time_s * 1e3:g} ms ({r.delivered_fraction:.0%} "
            f"delivered){_why_slow(r)}: raise --duration to see it end",
        )
    slow = r.line_rate_fraction < LINE_RATE_FLOOR
    hashed = [c for c in r.collisions if not c.oversubscribed]
    if hashed and slow:
        return _collision_verdict(r, hashed[0], share)
    if r.collisions and slow:
        worst = r.collisions[0]
        return Verdict(
            "oversubscribed",
            f"oversubscribed: the job asks more of the fabric links around {worst.link} than "
            f"they carry together ({worst.load:.0%} of it); {share} -- "
            f"no QP count spreads that: place the ranks on fewer leaves ({_knob(r, 'hosts')}) or "
            "add uplinks",
        )
    if r.max_paused_fraction > PAUSED_CEILING:
        return Verdict(
            "pfc-bound",
            f"pfc-bound: a port or NIC was paused {r.max_paused_fraction:.0%} of the run; "
            f"{share} -- ECN/DCQCN do not keep the queues below the pause threshold: run "
            "`roce-agent tune`",
        )
    if slow:
        return Verdict(
            "below-line-rate",
            f"below line rate: {share} (busiest {r.busiest_port}) -- run `roce-agent tune`",
        )
    return Verdict("healthy", f"healthy: {share}, nothing lost, no collision that costs bandwidth")
