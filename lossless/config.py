"""Parameters of the lossless-Ethernet rules: frozen dataclasses, validated by pydantic where
they are read from a file.

These are the switch's per-port QoS knobs the rules in this package read: buffer thresholds
(XOFF / XON / headroom, :mod:`lossless.pfc`), WRED-with-ECN profiles (:mod:`lossless.wred`),
strict / weighted scheduling (:mod:`lossless.queues`) and the PFC watchdog
(:mod:`lossless.watchdog`).  ``lab.vswitch.config`` builds its ``--config`` file format from
them, so the field names, limits and error messages here are that file's.

Why plain dataclasses and not pydantic models: the twin's start-up (docs/twin-speed.md,
"Start-up").  Importing pydantic's ``BaseModel`` costs a one-shot ``roce-agent twin`` more
CPU than its whole budget, and the twin runs these rules on values the fabric intent already
validated.  So this module imports only the standard library; the limits on each field are
``Annotated`` metadata that pydantic reads when it builds a schema for a file that holds them
(:class:`Limits`, :class:`SortedUnique`, the ``__pydantic_config__`` of each class), and a
rule between fields is checked in ``__post_init__``, which pydantic calls after it validated
the fields (its ``ValueError`` becomes the file's validation error, located at the object).
Built in code (the twin, the lab's data plane), they are trusted values: nothing but the
rules between fields is checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Final, Literal

NUM_CLASSES: Final = 8
"""Traffic classes == priorities == egress queues per port (IEEE 802.1Q: eight priorities)."""


class Limits:
    """Numeric limits of a field (``gt``, ``ge``, ``le``), as pydantic's ``Field`` states
    them: its error messages and JSON Schema come out the same, and nothing is imported
    until pydantic builds a schema."""

    def __init__(self, **limits: int) -> None:
        self.limits = limits

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        schema = handler(source)
        schema.update(self.limits)
        return schema


class SortedUnique:
    """A list of values with no repeats, kept sorted (the lossless priorities)."""

    @staticmethod
    def _check(value: list[int]) -> list[int]:
        if len(set(value)) != len(value):
            raise ValueError(f"duplicate priorities in {value}")
        return sorted(value)

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema  # here: only where a file is validated

        return core_schema.no_info_after_validator_function(self._check, handler(source))


Priority = Annotated[int, Limits(ge=0, le=NUM_CLASSES - 1)]


def _unsaid_when_false(name: str, source: Any, handler: Any) -> Any:
    """The schema of ``source`` serialising without the boolean field ``name`` while it is
    false: a choice added later leaves the shape of what was written before it unchanged."""
    from pydantic_core import core_schema  # here: only where a file is validated

    def unsaid(value: Any, serialize: Any) -> Any:
        data = serialize(value)
        if isinstance(data, dict) and not getattr(value, name):
            data.pop(name, None)
        return data

    schema = handler(source)
    schema["serialization"] = core_schema.wrap_serializer_function_ser_schema(unsaid)
    return schema


# Unknown keys are refused, not ignored (pydantic reads this from each class).
_STRICT: Final = {"extra": "forbid"}


@dataclass(frozen=True)
class BufferConfig:
    """Buffer thresholds.

    ``xoff_bytes``/``xon_bytes``/``headroom_bytes`` apply to every ingress (port, priority)
    that is lossless; ``queue_limit_bytes`` is the tail-drop limit of every lossy egress queue.
    """

    __pydantic_config__: ClassVar = _STRICT

    xoff_bytes: Annotated[int, Limits(gt=0)]
    xon_bytes: Annotated[int, Limits(ge=0)]
    headroom_bytes: Annotated[int, Limits(ge=0)]
    queue_limit_bytes: Annotated[int, Limits(gt=0)]

    def __post_init__(self) -> None:
        if self.xon_bytes > self.xoff_bytes:
            raise ValueError(
                f"xon_bytes ({self.xon_bytes}) must be <= xoff_bytes ({self.xoff_bytes})"
            )


@dataclass(frozen=True)
class EcnConfig:
    """WRED-with-ECN marking profile of one egress queue (instantaneous depth, bytes)."""

    __pydantic_config__: ClassVar = _STRICT

    min_bytes: Annotated[int, Limits(ge=0)]
    max_bytes: Annotated[int, Limits(gt=0)]
    max_probability: Annotated[int, Limits(ge=0, le=100)]
    # Where the mark is decided (:mod:`lossless.wred`): on a frame's arrival, from the depth
    # it finds, or on its departure, from the depth it leaves behind.
    at_dequeue: bool = False

    def __post_init__(self) -> None:
        if self.min_bytes > self.max_bytes:
            raise ValueError(
                f"min_bytes ({self.min_bytes}) must be <= max_bytes ({self.max_bytes})"
            )

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        """Marking at enqueue (the default, and every NOS personality's) is left out of the
        switch's reported config, which keeps the shape it had before the choice existed."""
        return _unsaid_when_false("at_dequeue", source, handler)


@dataclass(frozen=True)
class QueueConfig:
    """Scheduling and marking of one egress queue."""

    __pydantic_config__: ClassVar = _STRICT

    ecn: EcnConfig | None = None
    strict: bool = False
    bandwidth_percent: Annotated[int, Limits(ge=1, le=100)] | None = None
    # What the queue does with a frame over its lossy limit: drop it, or trim it (SONiC
    # BUFFER_PROFILE packet_discard_action drop|trim; Cumulus packet-trim egress-eligibility;
    # OpenConfig trim-enable).  Trimming needs the port's ``trim`` (:class:`TrimConfig`).
    trim: bool = False

    def __post_init__(self) -> None:
        if self.strict and self.bandwidth_percent is not None:
            raise ValueError("a strict-priority queue cannot also have bandwidth_percent")

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        """A queue that drops (the default, and every queue before trimming existed) is
        reported without ``trim``: the switch's reported config keeps its shape."""
        return _unsaid_when_false("trim", source, handler)


@dataclass(frozen=True)
class TrimConfig:
    """Packet trimming of a port: where a trimming queue (``QueueConfig.trim``) would drop a
    frame, the frame is cut to ``size_bytes`` (a shorter frame is kept whole), its DSCP set to
    ``dscp`` and it is sent from egress queue ``queue`` instead, so the receiver learns of the
    loss at once.  SONiC ``SWITCH_TRIMMING|GLOBAL`` {size, dscp_value, queue_index}
    (sonic-net/SONiC doc/packet_trimming/packet-trimming-design.md; default size 128 B);
    Cumulus ``nv set system forwarding packet-trim size|remark dscp|switch-priority``.
    """

    __pydantic_config__: ClassVar = _STRICT

    dscp: Annotated[int, Limits(ge=0, le=63)]
    queue: Priority
    size_bytes: Annotated[int, Limits(ge=64, le=9216)] = 128


@dataclass(frozen=True)
class WatchdogConfig:
    """PFC watchdog (detection / mitigation / restoration), per port or switch-wide.

    Named as the NOSes name it and as the agent's device state reads it: SONiC ``PFC_WD``
    ``detection_time`` / ``restoration_time`` / ``POLL_INTERVAL`` and its actions ``drop``,
    ``forward`` (EOS ``no-drop``: ignore pause and keep forwarding) and ``alert``.
    """

    __pydantic_config__: ClassVar = _STRICT

    enabled: bool = False
    detection_ms: Annotated[int, Limits(gt=0, le=60_000)] = 200
    restoration_ms: Annotated[int, Limits(gt=0, le=600_000)] = 400
    polling_ms: Annotated[int, Limits(gt=0, le=60_000)] = 100
    action: Literal["drop", "forward", "alert"] = "drop"


@dataclass(frozen=True)
class PortQosConfig:
    """QoS of one port: PFC (both generating and honouring pause) and its egress queues.

    ``pfc_priorities`` are the lossless (no-drop) priorities, as the device state names them.
    """

    __pydantic_config__: ClassVar = _STRICT

    pfc_enabled: bool = False
    pfc_priorities: Annotated[list[Priority], SortedUnique()] = field(default_factory=list)
    watchdog: WatchdogConfig | None = None
    queues: dict[Priority, QueueConfig] = field(default_factory=dict)
    trim: TrimConfig | None = None

    def __post_init__(self) -> None:
        total = sum(q.bandwidth_percent or 0 for q in self.queues.values())
        if total > 100:
            raise ValueError(f"bandwidth_percent of the queues adds up to {total} (> 100)")
        self._check_trim()

    def _check_trim(self) -> None:
        """A trimming queue needs the port's trim settings, is lossy (a lossless class never
        reaches its limit: it pauses), and is not the queue trimmed frames go to."""
        trimming = sorted(tc for tc, q in self.queues.items() if q.trim)
        if not trimming:
            return
        if self.trim is None:
            raise ValueError(f"queues {trimming} trim, but the port has no trim settings")
        lossless = self.lossless()
        for tc in trimming:
            if lossless[tc]:
                raise ValueError(f"queue {tc} trims, but priority {tc} is lossless (PFC)")
            if tc == self.trim.queue:
                raise ValueError(f"queue {tc} trims, and trimmed frames go to it")

    def lossless(self) -> list[bool]:
        """Per priority: lossless (PFC on the port and the priority in ``pfc_priorities``)."""
        lossless = set(self.pfc_priorities) if self.pfc_enabled else set()
        return [tc in lossless for tc in range(NUM_CLASSES)]

    def trim_sizes(self) -> list[int]:
        """Per egress queue: the size its frames are trimmed to over its limit (0: dropped),
        what :attr:`lossless.queues.EgressQueue.trim_bytes` holds."""
        trim = self.trim
        sizes = [0] * NUM_CLASSES
        if trim is not None:
            for tc, queue in self.queues.items():
                if queue.trim:
                    sizes[tc] = trim.size_bytes
        return sizes
