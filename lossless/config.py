"""Parameters of the lossless-Ethernet rules (pydantic v2 models, frozen, unknown keys refused).

These are the switch's per-port QoS knobs the rules in this package read: buffer thresholds
(XOFF / XON / headroom, :mod:`lossless.pfc`), WRED-with-ECN profiles (:mod:`lossless.wred`),
strict / weighted scheduling (:mod:`lossless.queues`) and the PFC watchdog
(:mod:`lossless.watchdog`).  ``lab.vswitch.config`` builds its ``--config`` file format from
them, so the field names, limits and error messages here are that file's.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

NUM_CLASSES: Final = 8
"""Traffic classes == priorities == egress queues per port (IEEE 802.1Q: eight priorities)."""

Priority = Annotated[int, Field(ge=0, le=NUM_CLASSES - 1)]


class StrictModel(BaseModel):
    """Base of every config model: frozen, and an unknown key is an error, not ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class BufferConfig(StrictModel):
    """Buffer thresholds.

    ``xoff_bytes``/``xon_bytes``/``headroom_bytes`` apply to every ingress (port, priority)
    that is lossless; ``queue_limit_bytes`` is the tail-drop limit of every lossy egress queue.
    """

    xoff_bytes: int = Field(gt=0)
    xon_bytes: int = Field(ge=0)
    headroom_bytes: int = Field(ge=0)
    queue_limit_bytes: int = Field(gt=0)

    @model_validator(mode="after")
    def _xon_below_xoff(self) -> BufferConfig:
        if self.xon_bytes > self.xoff_bytes:
            raise ValueError(
                f"xon_bytes ({self.xon_bytes}) must be <= xoff_bytes ({self.xoff_bytes})"
            )
        return self


class EcnConfig(StrictModel):
    """WRED-with-ECN marking profile of one egress queue (instantaneous depth, bytes)."""

    min_bytes: int = Field(ge=0)
    max_bytes: int = Field(gt=0)
    max_probability: int = Field(ge=0, le=100)
    # Where the mark is decided (:mod:`lossless.wred`): on a frame's arrival, from the depth
    # it finds, or on its departure, from the depth it leaves behind.
    at_dequeue: bool = False

    @model_serializer(mode="wrap")
    def _enqueue_unsaid(self, handler: SerializerFunctionWrapHandler) -> Any:
        """Marking at enqueue (the default, and every NOS personality's) is left out of the
        switch's reported config, which keeps the shape it had before the choice existed."""
        data = handler(self)
        if isinstance(data, dict) and not self.at_dequeue:
            data.pop("at_dequeue", None)
        return data

    @model_validator(mode="after")
    def _min_below_max(self) -> EcnConfig:
        if self.min_bytes > self.max_bytes:
            raise ValueError(
                f"min_bytes ({self.min_bytes}) must be <= max_bytes ({self.max_bytes})"
            )
        return self


class QueueConfig(StrictModel):
    """Scheduling and marking of one egress queue."""

    ecn: EcnConfig | None = None
    strict: bool = False
    bandwidth_percent: int | None = Field(default=None, ge=1, le=100)

    @model_validator(mode="after")
    def _strict_has_no_weight(self) -> QueueConfig:
        if self.strict and self.bandwidth_percent is not None:
            raise ValueError("a strict-priority queue cannot also have bandwidth_percent")
        return self


class WatchdogConfig(StrictModel):
    """PFC watchdog (detection / mitigation / restoration), per port or switch-wide.

    Named as the NOSes name it and as the agent's device state reads it: SONiC ``PFC_WD``
    ``detection_time`` / ``restoration_time`` / ``POLL_INTERVAL`` and its actions ``drop``,
    ``forward`` (EOS ``no-drop``: ignore pause and keep forwarding) and ``alert``.
    """

    enabled: bool = False
    detection_ms: int = Field(default=200, gt=0, le=60_000)
    restoration_ms: int = Field(default=400, gt=0, le=600_000)
    polling_ms: int = Field(default=100, gt=0, le=60_000)
    action: Literal["drop", "forward", "alert"] = "drop"


class PortQosConfig(StrictModel):
    """QoS of one port: PFC (both generating and honouring pause) and its egress queues.

    ``pfc_priorities`` are the lossless (no-drop) priorities, as the device state names them.
    """

    pfc_enabled: bool = False
    pfc_priorities: list[Priority] = Field(default_factory=list)
    watchdog: WatchdogConfig | None = None
    queues: dict[Priority, QueueConfig] = Field(default_factory=dict)

    @field_validator("pfc_priorities")
    @classmethod
    def _unique_priorities(cls, value: list[int]) -> list[int]:
        if len(set(value)) != len(value):
            raise ValueError(f"duplicate priorities in {value}")
        return sorted(value)

    @model_validator(mode="after")
    def _bandwidth_total(self) -> PortQosConfig:
        total = sum(q.bandwidth_percent or 0 for q in self.queues.values())
        if total > 100:
            raise ValueError(f"bandwidth_percent of the queues adds up to {total} (> 100)")
        return self

    def lossless(self) -> list[bool]:
        """Per priority: lossless (PFC on the port and the priority in ``pfc_priorities``)."""
        lossless = set(self.pfc_priorities) if self.pfc_enabled else set()
        return [tc in lossless for tc in range(NUM_CLASSES)]
