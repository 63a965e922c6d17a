"""Placeholder of the statistics helper L1 owns (issue #30): only the interface the tie
follow-ups need, so that this branch runs on its own. The lead keeps L1's module at merge.

- :class:`Sprt`: Wald's sequential probability ratio test for a binomial rate (Wald,
  "Sequential tests of statistical hypotheses", Ann. Math. Statist. 16(2), 1945), H0
  ``p <= p0`` against H1 ``p >= p1``, ``alpha = beta = 1 - confidence``.
- :func:`loss_interval`: the Wilson score interval (Wilson, JASA 22(158), 1927).
- :func:`probes_to_detect`: ``ceil(ln(1 - c) / ln(1 - p))``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal

Decision = Literal["h0", "h1"]


def probes_to_detect(loss: float, confidence: float) -> int:
    return max(1, math.ceil(math.log1p(-confidence) / math.log1p(-loss)))


@dataclass
class Sprt:
    p0: float
    p1: float
    confidence: float = 0.95
    sent: int = 0
    lost: int = 0
    llr: float = 0.0
    decision: Decision | None = None

    def update(self, sent: int, lost: int) -> Decision | None:
        self.sent += sent
        self.lost += lost
        if self.decision is None:
            error = 1 - self.confidence
            self.llr += lost * math.log(self.p1 / self.p0) + (sent - lost) * (
                math.log1p(-self.p1) - math.log1p(-self.p0)
            )
            if self.llr >= math.log((1 - error) / error):
                self.decision = "h1"
            elif self.llr <= math.log(error / (1 - error)):
                self.decision = "h0"
        return self.decision

    def expected_n(self, p: float) -> float:
        error = 1 - self.confidence
        drift = p * math.log(self.p1 / self.p0) + (1 - p) * (
            math.log1p(-self.p1) - math.log1p(-self.p0)
        )
        bound = math.log((1 - error) / error)
        return bound / abs(drift) if drift else math.inf


def loss_interval(sent: int, lost: int, confidence: float) -> tuple[float, float]:
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    n, p = sent, lost / sent
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    scale = 1 + z * z / n
    return max(0.0, (centre - spread) / scale), min(1.0, (centre + spread) / scale)
