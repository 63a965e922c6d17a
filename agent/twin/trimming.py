"""What a run of the twin says about lossy RoCE with packet trimming (issue #47): the trims
and their drops, the retransmissions, the reorder depth, the messages' completion times, and
the receiver the twin assumes.

The switches trim with the shared model (:func:`lossless.queues.enqueue` answers TRIMMED,
:func:`lossless.queues.admit_trimmed`); the engine cuts the frame, re-marks it and the
responder answers it (:meth:`agent.twin.engine.Engine._trimmed_rx`).  docs/trimming.md, "The
twin's model", says what is modelled and from which sources.  Not compiled: read once per
report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from lossless.clock import TICKS_PER_SECOND

if TYPE_CHECKING:
    from agent.twin.engine import Engine
    from agent.twin.flows import Flow

# The assumption every lossy-trim report carries: what the twin's NIC does with a trimmed
# frame, and what a RoCE NIC shipping today does instead.
TRIM_RECEIVER: Final = (
    "the twin's NICs react to a trimmed frame as the Ultra Ethernet transport specifies "
    "(UE Specification 1.0, 2025; Hoefler et al., arXiv:2508.08906): the responder NAKs "
    "exactly that PSN and the sender resends it at once (selective repeat), cutting its rate "
    "as on a CNP (a trim is a congestion signal, as to UEC's NSCC). A RoCE NIC of "
    "today fails the trimmed frame's ICRC/length check and drops it: the loss is found only "
    "by the PSN gap or the timeout, and trimming gains it nothing"
)


@dataclass(frozen=True)
class TrimFacts:
    """A run's mode and path choice, its trims (``trimmed``: frames cut at a switch, sent or
    dropped at the trim queue; ``trim_dropped``: those dropped there), retransmitted frames,
    the reorder depth (the most frames one flow's responder held out of order at once, the
    largest over the flows) and the messages' completion times (p50, p99, max, in seconds;
    None without a message)."""

    mode: str
    paths: str
    trimmed: int
    trim_dropped: int
    retransmitted: int
    reorder_depth: int
    completion_p50_s: float | None
    completion_p99_s: float | None
    completion_max_s: float | None
    trim_receiver: str | None


def percentile(values: list[int], fraction: float) -> int:
    """The nearest-rank percentile of ``values`` (not empty): the smallest value with at
    least ``fraction`` of the values at or below it."""
    ordered = sorted(values)
    rank = max(1, -(-int(fraction * 1000) * len(ordered) // 1000))
    return ordered[min(rank, len(ordered)) - 1]


def trim_facts(engine: Engine, flows: list[Flow] | None = None) -> TrimFacts:
    """The facts of a finished run; ``flows``: the flows whose trims, retransmissions,
    reordering and message completions are counted (default every flow; a job's own in a run
    of several)."""
    own = engine.flows if flows is None else flows
    trimmed = sum(f.trimmed for f in own)
    trim_dropped = sum(f.trim_dropped for f in own)
    times = [ticks for flow in own for ticks in flow.completions]
    mode = engine.network.mode
    return TrimFacts(
        mode=mode,
        paths=engine.settings.paths,
        trimmed=trimmed,
        trim_dropped=trim_dropped,
        retransmitted=sum(f.retx_packets for f in own),
        reorder_depth=max((f.ooo_peak for f in own), default=0),
        completion_p50_s=percentile(times, 0.5) / TICKS_PER_SECOND if times else None,
        completion_p99_s=percentile(times, 0.99) / TICKS_PER_SECOND if times else None,
        completion_max_s=max(times) / TICKS_PER_SECOND if times else None,
        trim_receiver=TRIM_RECEIVER if mode == "lossy-trim" else None,
    )
