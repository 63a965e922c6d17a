"""How many probes a path needs before locate may call it clean or lossy (issue #30).

Pure functions over counts (sent, lost); no I/O.

- :func:`probes_to_detect`: the fixed-sample answer — the smallest ``n`` for which a path
  losing a share ``p`` of its probes loses at least one of ``n`` with probability
  ``confidence``: ``1 - (1 - p)**n >= c``, so ``n = ceil(ln(1 - c) / ln(1 - p))``.
- :class:`Sprt`: Wald's sequential probability ratio test for a binomial rate (Wald,
  "Sequential tests of statistical hypotheses", Ann. Math. Statist. 16(2), 1945, 117–186;
  and *Sequential Analysis*, Wiley 1947, ch. 3 for the test, its boundaries and its OC and
  ASN functions, ch. 5 for the binomial case). H0: the path loses at most ``p0``; H1: at
  least ``p1``. After each batch of probes the log likelihood ratio

      llr = lost * ln(p1 / p0) + (sent - lost) * ln((1 - p1) / (1 - p0))

  is compared with Wald's boundaries ``ln((1 - beta) / alpha)`` (decide H1) and
  ``ln(beta / (1 - alpha))`` (decide H0). Wald's inequalities bound the error rates by
  about ``alpha`` and ``beta`` for *any* rule that stops only on a boundary crossing, so
  looking only at the end of each round of the mesh (a batch) keeps them (the book, ch. 3:
  the overshoot makes the test more conservative, never less).
- :func:`loss_interval`: the Wilson score interval for a loss rate (E. B. Wilson, "Probable
  inference, the law of succession, and statistical inference", JASA 22(158), 1927,
  209–212), whose coverage stays near nominal at the small rates and counts locate sees,
  where the Wald interval ``p ± z·sqrt(p(1-p)/n)`` collapses to zero width at zero losses
  (Brown, Cai and DasGupta, "Interval estimation for a binomial proportion", Statist. Sci.
  16(2), 2001, 101–133, §4.1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Literal

Decision = Literal["h0", "h1"]
# H0 is "clean" at a quarter of the smallest loss locate must find: the indifference zone
# between them is where the test needs the most probes (its ASN peaks there), and a factor
# of four keeps that zone narrow enough to decide a 0.5 % fault within a minute of probing.
CLEAN_SHARE = 0.25


def _check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence: Expected: 0 < c < 1 Actual: {confidence!r}")


def _check_rate(name: str, rate: float) -> None:
    if not 0 < rate < 1:
        raise ValueError(f"{name}: Expected: 0 < p < 1 Actual: {rate!r}")


def probes_to_detect(loss: float, confidence: float) -> int:
    """The smallest ``n`` with P(at least one of ``n`` probes lost | loss rate ``loss``) >=
    ``confidence``: ``ceil(ln(1 - c) / ln(1 - p))`` (each probe lost independently)."""
    _check_rate("loss", loss)
    _check_confidence(confidence)
    n = math.ceil(math.log1p(-confidence) / math.log1p(-loss))
    # Floating point can land ceil() one off at exact boundaries: settle it with the inequality.
    while n > 1 and 1 - (1 - loss) ** (n - 1) >= confidence:
        n -= 1
    while 1 - (1 - loss) ** n < confidence:
        n += 1
    return max(n, 1)


@dataclass
class Sprt:
    """Wald's SPRT for a binomial loss rate, H0 ``p <= p0`` against H1 ``p >= p1``, with
    error rates ``alpha = beta = 1 - confidence`` unless given. Feed it batches with
    :meth:`update`; :attr:`decision` is ``"h0"``, ``"h1"`` or ``None`` (keep probing). Once
    decided it stays decided (the test has stopped); later counts are still added to
    :attr:`sent` and :attr:`lost` for the estimate."""

    p0: float
    p1: float
    confidence: float = 0.95
    alpha: float | None = None
    beta: float | None = None
    sent: int = 0
    lost: int = 0
    llr: float = 0.0
    decision: Decision | None = None
    decided_at: int | None = None  # probes sent when it decided
    _steps: tuple[float, float] = field(default=(0.0, 0.0), init=False, repr=False)

    def __post_init__(self) -> None:
        _check_rate("p0", self.p0)
        _check_rate("p1", self.p1)
        if self.p0 >= self.p1:
            raise ValueError(f"p0 < p1: Expected: p0 < p1 Actual: p0={self.p0} p1={self.p1}")
        _check_confidence(self.confidence)
        error = 1 - self.confidence
        self.alpha = error if self.alpha is None else self.alpha
        self.beta = error if self.beta is None else self.beta
        _check_rate("alpha", self.alpha)
        _check_rate("beta", self.beta)
        self._steps = (
            math.log(self.p1 / self.p0),  # one lost probe
            math.log1p(-self.p1) - math.log1p(-self.p0),  # one that arrived (negative)
        )

    @classmethod
    def for_min_loss(cls, min_loss: float, confidence: float) -> Sprt:
        """locate's test of one path: lossy at ``min_loss`` or more, clean at a quarter of it."""
        return cls(min_loss * CLEAN_SHARE, min_loss, confidence)

    @property
    def upper(self) -> float:
        """ln A: at or above it, decide H1 (Wald's A = (1 - beta) / alpha)."""
        assert self.alpha is not None and self.beta is not None
        return math.log((1 - self.beta) / self.alpha)

    @property
    def lower(self) -> float:
        """ln B: at or below it, decide H0 (Wald's B = beta / (1 - alpha))."""
        assert self.alpha is not None and self.beta is not None
        return math.log(self.beta / (1 - self.alpha))

    def update(self, sent: int, lost: int) -> Decision | None:
        """Add a batch: ``sent`` probes of which ``lost`` were lost."""
        if sent < 0 or not 0 <= lost <= sent:
            raise ValueError(f"Expected: 0 <= lost <= sent Actual: sent={sent} lost={lost}")
        self.sent += sent
        self.lost += lost
        if self.decision is not None:
            return self.decision
        loss_step, arrival_step = self._steps
        self.llr += lost * loss_step + (sent - lost) * arrival_step
        if self.llr >= self.upper:
            self.decision, self.decided_at = "h1", self.sent
        elif self.llr <= self.lower:
            self.decision, self.decided_at = "h0", self.sent
        return self.decision

    def drift(self, p: float) -> float:
        """The expected change of the log likelihood ratio per probe at loss rate ``p``."""
        loss_step, arrival_step = self._steps
        return p * loss_step + (1 - p) * arrival_step

    def remaining(self, p: float) -> float:
        """Probes still needed to reach a boundary if the path loses a share ``p`` from now
        on (Wald's drift approximation, the overshoot ignored); 0 once decided, ``inf`` in
        the rare case of no drift at all."""
        if self.decision is not None:
            return 0.0
        drift = self.drift(p)
        if drift > 0:
            return (self.upper - self.llr) / drift
        if drift < 0:
            return (self.llr - self.lower) / -drift
        return math.inf

    def min_probes(self) -> int:
        """The fewest probes that can decide H0: all of them arriving."""
        return math.ceil(self.lower / self._steps[1])

    def expected_n(self, p: float) -> float:
        """Wald's average sample number at loss rate ``p`` from the start (Wald 1947, ch. 3:
        ``E[N] = (L ln B + (1 - L) ln A) / E[z]`` with ``L`` the operating characteristic,
        and ``ln A · |ln B| / E[z²]`` where ``E[z] = 0``)."""
        if not 0 <= p <= 1:
            raise ValueError(f"p: Expected: 0 <= p <= 1 Actual: {p!r}")
        a, b = self.upper, self.lower
        loss_step, arrival_step = self._steps
        drift = self.drift(p)
        if abs(drift) < 1e-12:
            second = p * loss_step**2 + (1 - p) * arrival_step**2
            return -a * b / second
        accept = self.operating_characteristic(p)
        return (accept * b + (1 - accept) * a) / drift

    def operating_characteristic(self, p: float) -> float:
        """L(p): the probability of deciding H0 at loss rate ``p`` (Wald 1947, ch. 3): with
        ``h != 0`` solving ``p (p1/p0)^h + (1-p) ((1-p1)/(1-p0))^h = 1``,
        ``L = (A^h - 1) / (A^h - B^h)``."""
        if p <= 0:
            return 1.0
        if p >= 1:
            return 0.0
        loss_step, arrival_step = self._steps

        def moment(h: float) -> float:  # E[exp(h z)] - 1, with z one probe's step
            return p * math.exp(h * loss_step) + (1 - p) * math.exp(h * arrival_step) - 1

        drift = self.drift(p)
        if abs(drift) < 1e-12:
            return self.upper / (self.upper - self.lower)
        # The nonzero root has the sign opposite to the drift; bracket it and bisect.
        sign = -1.0 if drift > 0 else 1.0
        high = 1.0
        while moment(sign * high) < 0 and high < 1e6:
            high *= 2
        low = 0.0
        for _ in range(200):
            mid = (low + high) / 2
            if moment(sign * mid) < 0:
                low = mid
            else:
                high = mid
        h = sign * (low + high) / 2
        a_h, b_h = math.exp(h * self.upper), math.exp(h * self.lower)
        return (a_h - 1) / (a_h - b_h)


def loss_interval(sent: int, lost: int, confidence: float) -> tuple[float, float]:
    """The Wilson score interval for the loss rate after ``lost`` of ``sent`` (Wilson 1927):
    ``(p̂ + z²/2n ± z·sqrt(p̂(1-p̂)/n + z²/4n²)) / (1 + z²/n)``, two-sided at ``confidence``."""
    if sent <= 0 or not 0 <= lost <= sent:
        raise ValueError(f"Expected: 0 <= lost <= sent, sent > 0 Actual: sent={sent} lost={lost}")
    _check_confidence(confidence)
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    n, p = sent, lost / sent
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    scale = 1 + z * z / n
    low = 0.0 if lost == 0 else (centre - spread) / scale
    high = 1.0 if lost == sent else (centre + spread) / scale
    return max(0.0, low), min(1.0, high)


def probes_table(
    losses: tuple[float, ...] = (0.005, 0.01, 0.02, 0.05),
    confidences: tuple[float, ...] = (0.9, 0.95, 0.99),
    probes_per_s: float = 30.0,
) -> str:
    """The table of docs/locate.md ("Statistics"): per loss rate and confidence, the probes
    a fixed run needs to see one loss, and the SPRT's: to call a clean path clean (the
    least, every probe arriving; on average at the clean bound), to call a path losing
    ``p`` lossy (on average), and the least time at ``probes_per_s`` a path."""
    lines = [
        "| loss p | confidence | fixed run: probes to see a loss | SPRT: clean, at least "
        "| SPRT: at p/4, on average | SPRT: losing p, on average "
        f"| clean at {probes_per_s:g} probes/s |",
        "|---|---|---|---|---|---|---|",
    ]
    for confidence in confidences:
        for loss in losses:
            test = Sprt.for_min_loss(loss, confidence)
            lines.append(
                f"| {loss:.1%} | {confidence:g} | {probes_to_detect(loss, confidence)} "
                f"| {test.min_probes()} | {test.expected_n(loss * CLEAN_SHARE):.0f} "
                f"| {test.expected_n(loss):.0f} | {test.min_probes() / probes_per_s:.0f} s |"
            )
    return "\n".join(lines)
