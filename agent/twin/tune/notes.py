"""What a speed's search notes beside its recommendation: the edges of the space it sat on,
what widening them did, and a pause threshold the recommendation moves.

Each note is a record (which axis, which end, which value, why) that the search decides on;
its words are its ``str()``, written once here or, for an :class:`~agent.twin.tune.space.Edge`
and its :class:`~agent.twin.tune.space.Limit`, beside the space that makes them.  The
explanation and the JSON show the words (:attr:`agent.twin.tune.results.SpeedResult.edges`).
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.intent.units import format_size
from agent.twin.tune.space import Candidate, Edge, End
from agent.twin.tune.text import and_list
from agent.twin.verdicts import kb


@dataclass(frozen=True)
class StillAtEdge:
    """After ``widenings`` widenings (the search's limit) the pick is still on the ``end``
    level of ``axis``."""

    axis: str
    end: End
    widenings: int

    def __str__(self) -> str:
        return (
            f"edge: still at the {self.end} {self.axis} searched (widening limit "
            f"{self.widenings} reached): the objective is unbounded that way as far as the "
            "search looked, so the pick marks where it stopped, not an optimum"
        )


@dataclass(frozen=True)
class AfterWidening:
    """The ranking's first once the widened levels ran (``feasible``: it meets the
    constraints; else the closest).  Not the recommendation: that is the speed's decision,
    which keeps the current setting when this one measured no better."""

    candidate: Candidate
    feasible: bool

    def __str__(self) -> str:
        word = "ranked first" if self.feasible else "closest"
        return f"after widening, {word}: {self.candidate.label()}"


@dataclass(frozen=True)
class PauseMove:
    """The recommendation moves the pause threshold (``pause_threshold: auto`` follows ECN
    max), from ``before`` to ``after`` bytes: the headroom's xoff before and after (None: no
    headroom read), the ECN max that sets it, and the load points (``unit``: senders or ranks)
    at which no lossless drop happened."""

    before: int
    after: int
    xoff_before: int | None
    xoff_after: int | None
    ecn_max: int
    load_points: tuple[int, ...]
    unit: str

    def __str__(self) -> str:
        return (
            f"pause threshold {kb(self.before)} → {kb(self.after)} "
            f"({kb(self.after - self.before)}): the profile's pause_threshold: auto puts it at "
            f"ECN max + 2 MTU; safe because {self._headroom()}, ECN max {kb(self.ecn_max)} < "
            f"pause threshold {kb(self.after)} (IR005), and no lossless drop at "
            f"{and_list(self.load_points)} {self.unit} in any seed"
        )

    def _headroom(self) -> str:
        old, new = self.xoff_before, self.xoff_after
        if old is not None and old == new:
            return (
                f"headroom above it unchanged (xoff {format_size(old)}, sized from cable and "
                "speed, not from the threshold)"
            )
        return f"headroom CHANGES: xoff {_size_or_none(old)} → {_size_or_none(new)}"


def _size_or_none(value: int | None) -> str | None:
    return None if value is None else format_size(value)


EdgeNote = Edge | StillAtEdge | AfterWidening | PauseMove
"""A note of :attr:`agent.twin.tune.results.SpeedResult.edge_notes`."""
