"""What a run of the twin's engine may be told besides its fabric and flows -- the seed, the
NICs' DCQCN values, their loss recovery and its timeout, the switches' path choice (per flow,
sprayed, adaptive), the RoCE payload, DCQCN on or off --
the defaults of the loss recovery, and the check of its values.

:class:`agent.twin.engine.EngineOptions` adds what only a caller of the engine itself sets
(pause-ignoring NICs, a storm, the sampling and the callbacks); the scenario, collective and
tune runs pass these on (:mod:`agent.twin.results`, :mod:`agent.twin.collectives`).
Compiled with the engine (:mod:`lossless.compiled`), though nothing here runs per event.
"""

from __future__ import annotations

import math
from typing import Final, Literal, TypedDict

from agent.twin.network import TwinError

# The retransmission timeout: InfiniBand's local ACK timeout is 4.096 us x 2^timeout (IBA vol.
# 1, the QP's "timeout" attribute; the Linux RC implementations compute the same, e.g.
# drivers/infiniband/hw/qib/qib_rc.c).  NCCL sets timeout = NCCL_IB_TIMEOUT, default 20
# (https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-ib-timeout; NCCL's
# src/transport/net_ib.cc: NCCL_PARAM(IbTimeout, "IB_TIMEOUT", 20)): 4.29 s.
IB_TIMEOUT_UNIT_S: Final = 4.096e-6
NCCL_IB_TIMEOUT: Final = 20
DEFAULT_RTO_S: Final = IB_TIMEOUT_UNIT_S * 2**NCCL_IB_TIMEOUT
Recovery = Literal["go-back-n", "selective-repeat"]
RECOVERIES: tuple[Recovery, ...] = ("go-back-n", "selective-repeat")
# How a switch picks among equal-cost next hops: per flow (the ECMP hash of the 5-tuple, what
# a RoCE fabric does today), per packet at random (spraying, as UEC pairs with trimming), or
# per packet the member whose egress queue for the frame's class is shortest (a simple
# adaptive routing; ties broken at random).
Paths = Literal["flow", "spray", "adaptive"]
PATHS: tuple[Paths, ...] = ("flow", "spray", "adaptive")


class RunOptions(TypedDict, total=False):
    """What every run of the twin may be told: its seed, the NICs' DCQCN values on top of
    the fabric's (``dcqcn_override``), and their loss recovery (``recovery``, ``rto_s``)."""

    seed: int
    dcqcn_override: dict[str, int] | None
    recovery: Recovery
    rto_s: float
    paths: Paths


class TrafficOptions(RunOptions, total=False):
    """A scenario's run may also set the RoCE payload per frame (None: the ports' RoCE MTU)
    and turn the NICs' DCQCN off (``reaction_point=False``: CNPs are counted, no rate cut)."""

    payload_bytes: int | None
    reaction_point: bool


def check_recovery(recovery: Recovery, rto_s: float) -> None:
    """A :class:`TwinError` naming the option when the loss recovery or its timeout is not one
    the engine runs (the value may come from an untyped caller)."""
    if recovery not in RECOVERIES:
        raise TwinError(
            f"twin --recovery: Expected: one of {', '.join(RECOVERIES)} Actual: {recovery!r}"
        )
    if not (math.isfinite(rto_s) and rto_s > 0):
        raise TwinError(f"twin --rto: Expected: a time above 0 s Actual: {rto_s!r}")


def check_paths(paths: str, recovery: Recovery) -> None:
    """A :class:`TwinError` naming the option when the path choice is not one of
    :data:`PATHS`, or when frames sprayed over several paths (they arrive out of order) meet
    go-back-N, which takes every reordering for a loss."""
    if paths not in PATHS:
        raise TwinError(f"twin --paths: Expected: one of {', '.join(PATHS)} Actual: {paths!r}")
    if paths != "flow" and recovery != "selective-repeat":
        raise TwinError(
            f"twin --paths {paths}: Expected: with --recovery selective-repeat (frames of a "
            f"flow take several paths and arrive out of order) Actual: --recovery {recovery}"
        )
