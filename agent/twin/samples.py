"""The twin's time series: one sample of the queues, pauses and flows of a run (:class:`Watch`).

The engine takes a sample every sampling interval (more densely over the onset) and
:mod:`agent.twin.results` shapes the series for the report and the plot.  Compiled with the
engine (:mod:`lossless.compiled`): a run takes up to 2 000 samples of every port and flow.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from operator import attrgetter

from agent.twin.flows import Flow
from agent.twin.nic import Nic
from agent.twin.switch import SwitchPort
from lossless.clock import TICKS_PER_SECOND

_TX_BYTES = attrgetter("tx_bytes")  # every port's counter at every sample, read in C


@dataclass
class Watch:
    """A time series sample (the engine fills it; :mod:`agent.twin.results` shapes it)."""

    t_s: float
    queue_bytes: dict[str, int]
    rate_bps: list[float]
    rx_bytes: list[int]  # per flow: frame bytes delivered in order so far (goodput's)
    paused: dict[str, float]
    # Bytes each switch port has sent so far, in the order of Engine.ports (a list: taken at
    # every sample, for every port; a dict of names would cost more than the rest of it).
    tx_bytes: list[int] = field(default_factory=list)


def watch(ports: list[SwitchPort], nics: Iterable[Nic], flows: list[Flow], now: int) -> Watch:
    """The sample at tick ``now``: queues that ever held something, pauses, flows' rates."""
    now_s = now / TICKS_PER_SECOND
    paused = {p.name: 1.0 if p.pause_meter.until > now else 0.0 for p in ports if p.pfc_rx}
    for nic in nics:
        if nic.pause.paused_s:
            paused[nic.name] = 1.0 if nic.pause.is_paused(now_s) else 0.0
    return Watch(
        t_s=now_s,
        queue_bytes={p.name: p.depth for p in ports if p.depth_peak},
        rate_bps=[f.rp.current_bps if f.start_at <= now < f.stop_at else 0.0 for f in flows],
        rx_bytes=[f.delivered_bytes for f in flows],
        paused=paused,
        tx_bytes=list(map(_TX_BYTES, ports)),
    )
