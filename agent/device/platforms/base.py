"""What every platform provides, netmiko style: a base that does the common work, and one
module per NOS that overrides only what differs.

A platform turns the normalized desired state into the NOS's configuration (``render``),
reads the device back into the same normalized model (``read_state``, ``read_counters``),
and changes it inside a transaction that the device itself rolls back if the agent does not
confirm (``transaction``).

The transaction is one flow for every NOS (:meth:`Platform.transaction` and
:meth:`Platform.confirm`, template methods); a NOS module overrides the steps it does its own
way, in this order:

- ``begin``: open a session or checkpoint (if it fails there is nothing to undo);
- ``stage``: send the lines; then the kill point ``in-session``;
- ``commit``: make them live under the device's rollback timer; ``arm_rollback_timer``: start
  that timer where the commit has none of its own;
- ``abort`` when anything up to here fails, ``rollback`` when the caller leaves without a
  confirm;
- ``confirm_change``: the point of no return; ``disarm_rollback_timer``; then, where the save
  is a step of its own (``saves_after_confirm``), the kill point ``before-save`` and ``save``
  (survives a reload); last ``clean_up``.

The push path adds ``after-intent``, ``after-commit``, ``after-confirm`` and ``mid-batch``
around it (:mod:`agent.device.push`); the fault drill kills the agent at each of them.
"""

from __future__ import annotations

import os
import re
import signal
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar

from agent.device.state import (
    Counters,
    LinkHealth,
    PendingSession,
    QosState,
    UnreadFamily,
    desired_state,
)
from agent.errors import AgentError
from agent.intent.plan import DevicePlan
from agent.intent.rules import TRIMMING_PLATFORMS

KILL_POINTS = (
    "after-intent",
    "in-session",
    "after-commit",
    "before-save",
    "after-confirm",
    "mid-batch",
)
KILL_ENV = "ROCE_AGENT_KILL_AT"


def kill_point(point: str, device: str | None = None) -> None:
    """Fault drills: die here, like ``kill -9`` would, when ``$ROCE_AGENT_KILL_AT`` names
    this point (``POINT`` or ``POINT@DEVICE``). SIGKILL so nothing (finally blocks, atexit,
    context managers) gets to clean up: the next run must cope with exactly what is left."""
    wanted = os.environ.get(KILL_ENV)
    if not wanted:
        return
    name, _, target = wanted.partition("@")
    if name == point and (not target or target == device):
        os.kill(os.getpid(), signal.SIGKILL)


class PlatformError(AgentError):
    """The device refused or failed something; the message says what and where."""

    exit_code = 1


class ConfigRejected(PlatformError):
    """The device refused a configuration line."""


ESC = "\x1b"


def skip_ansi_scan_without_escape(netmiko: Any) -> None:
    """netmiko strips ANSI codes from every read with a long series of ``re.sub`` calls, and it
    keeps reading while a switch holds its reply, mostly getting nothing: in a fleet push that
    scan is where the agent's CPU goes. Every code it strips starts with ESC, so a read without
    one comes back unchanged: skip the scan for those (tests/unit/test_platform_base.py checks
    the equivalence against netmiko's own method)."""
    strip = getattr(netmiko, "strip_ansi_escape_codes", None)
    if strip is None or getattr(strip, "skips_without_escape", False):
        return

    def strip_if_escaped(string_buffer: str) -> str:
        return strip(string_buffer) if ESC in string_buffer else string_buffer

    strip_if_escaped.skips_without_escape = True  # type: ignore[attr-defined]
    netmiko.strip_ansi_escape_codes = strip_if_escaped


class Connection:
    """A thin wrapper over a netmiko connection (so tests and platforms share one surface)."""

    def __init__(self, netmiko: Any, device: str) -> None:
        self.netmiko = netmiko
        self.device = device
        skip_ansi_scan_without_escape(netmiko)

    def show(self, command: str, read_timeout: float = 30.0) -> str:
        output: str = self.netmiko.send_command(command, read_timeout=read_timeout)
        return output

    @property
    def prompt_pattern(self) -> str:
        """Any prompt of this device, whatever the mode (``leaf1(config-s-x)#``)."""
        return rf"{re.escape(self.netmiko.base_prompt)}.*[#>$]"

    def send_lines(
        self, lines: list[str], read_timeout: float = 30.0, terminator: str = "#"
    ) -> str:
        """Send lines in the current (configuration) mode; raise on the first refused one.

        netmiko's ``send_config_set`` with command echo verification checks each line's output
        against the error pattern as it goes, so a refused line stops the rest. After each line
        it waits for the base prompt or ``terminator`` (a regex; netmiko's default ``#``): a
        shell heredoc answers each line with bash's continuation prompt ``> `` instead.
        """
        from netmiko.exceptions import ConfigInvalidException

        try:
            output: str = self.netmiko.send_config_set(
                lines,
                enter_config_mode=False,
                exit_config_mode=False,
                cmd_verify=True,
                error_pattern=r"(?m)^%",
                read_timeout=read_timeout,
                terminator=terminator,
            )
        except ConfigInvalidException as exc:
            text = str(exc)
            refused = next((line for line in reversed(lines) if line.strip() in text), "?")
            raise ConfigRejected(
                f"{self.device}: refused {refused.strip()!r}: {self.refusal(text) or text}"
            ) from None
        return output

    @staticmethod
    def refusal(output: str) -> str | None:
        for text in output.splitlines():
            stripped = text.strip()
            if stripped.startswith("%"):
                return stripped
        return None

    def close(self) -> None:
        self.netmiko.disconnect()


@dataclass
class Transaction:
    """A change in progress: lines sent, whether it is committed and confirmed."""

    name: str
    lines: list[str]
    committed: bool = False
    confirmed: bool = False
    rolled_back: bool = False
    notes: list[str] = field(default_factory=list)
    # Commands that put back what was there, for a device that keeps no checkpoint of its own
    # (a host): taken at ``begin``, run by ``rollback``.
    undo: list[str] = field(default_factory=list)


class Platform(ABC):
    """One NOS. Subclasses set the class attributes and override what differs."""

    name: ClassVar[str]
    netmiko_device_type: ClassVar[str]
    # Settings this platform can configure and read back (keys of agent.device.state.diff).
    managed: ClassVar[frozenset[str]] = frozenset(
        {"trust", "dscp_to_priority", "watchdog", "pfc_enabled", "pfc_priorities", "queue"}
    )
    # Whether the confirmed change is saved in a step of its own (the before-save kill point
    # sits between the two). Not on NX-OS, whose confirm is the save, nor on a host, which
    # has nothing to save.
    saves_after_confirm: ClassVar[bool] = True

    @property
    def trims(self) -> bool:
        """Whether this NOS can trim packets (a RoCE class in mode lossy-trim): the intent's
        table of trimming platforms, the one rule IR022 refuses the others by (with why), so
        a plan that reached one all the same is refused here too."""
        return self.name in TRIMMING_PLATFORMS

    def desired(self, device: DevicePlan) -> QosState:
        if device.trim is not None and not self.trims:
            raise PlatformError(
                f"{device.name}: {self.name} cannot trim packets (profile mode lossy-trim, "
                "rule IR022): use mode lossless or lossy on it"
            )
        return desired_state(device)

    @abstractmethod
    def render(self, device: DevicePlan) -> list[str]:
        """The full configuration of the lossless profile for this device."""

    @abstractmethod
    def render_changes(self, desired: QosState, actual: QosState | None) -> list[str]:
        """The least configuration that turns ``actual`` into ``desired``."""

    @abstractmethod
    def read_state(self, conn: Connection) -> QosState:
        """The device's current QoS configuration, normalized."""

    # Text-table platforms list their counter commands; the base reads them all and hands
    # the outputs (keyed alike) to ``counters_from_text``. JSON platforms override both.
    COUNTER_COMMANDS: ClassVar[dict[str, str]] = {}

    def read_counters(self, conn: Connection, state: QosState | None = None) -> Counters:
        """The device's PFC, queue, ECN and watchdog counters, normalized.

        ``state`` is the device's state if the caller just read it: platforms that need it to
        interpret counters (EOS: which priority is lossless) then do not read it again.
        """
        collected_at = time.time()
        outputs = {key: conn.show(command) for key, command in self.COUNTER_COMMANDS.items()}
        return self.counters_from_text(conn.device, collected_at, outputs)

    @staticmethod
    def counters_from_text(device: str, collected_at: float, outputs: dict[str, str]) -> Counters:
        """Normalize the outputs of :attr:`COUNTER_COMMANDS` (recorded outputs in tests)."""
        raise NotImplementedError

    # The keys of COUNTER_COMMANDS that alone give a counter family, where they do: a switch
    # streaming the rest over gNMI is asked over SSH only for what its stream lacks.
    FAMILY_COMMANDS: ClassVar[dict[UnreadFamily, tuple[str, ...]]] = {}

    def read_families(
        self, conn: Connection, families: frozenset[UnreadFamily], state: QosState | None = None
    ) -> Counters:
        """Counters holding at least ``families``: only their commands where
        :attr:`FAMILY_COMMANDS` names them all, else every counter (:meth:`read_counters`).
        The other families of the result may be unread zeros: take only ``families``."""
        if not families or not families <= self.FAMILY_COMMANDS.keys():
            return self.read_counters(conn, state)
        keys = sorted({key for family in families for key in self.FAMILY_COMMANDS[family]})
        collected_at = time.time()
        outputs = {key: conn.show(self.COUNTER_COMMANDS[key]) for key in keys}
        return self.counters_from_text(conn.device, collected_at, outputs)

    # ------------------------------------------------------------------ the transaction flow

    @contextmanager
    def transaction(
        self,
        conn: Connection,
        lines: list[str],
        confirm_timeout_s: int,
        name: str | None = None,
    ) -> Iterator[Transaction]:
        """Apply ``lines`` so that the device rolls back by itself unless confirmed.

        ``name`` is the session/checkpoint name, chosen by the caller so that the write-ahead
        audit can record it before anything is opened. Yields after the change is live
        (unconfirmed); the caller verifies and then calls :meth:`confirm`. Leaving the block
        without confirming rolls the change back. The steps are the hooks below.
        """
        txn = Transaction(name=name or self.session_name(), lines=lines)
        self.begin(conn, txn)
        try:
            self.stage(conn, txn)
            kill_point("in-session", conn.device)
            self.commit(conn, txn, confirm_timeout_s)
            txn.committed = True
            self.arm_rollback_timer(conn, txn, confirm_timeout_s)
        except BaseException:
            self.abort(conn, txn)
            raise
        try:
            yield txn
        finally:
            if not txn.confirmed:
                self.rollback(conn, txn)

    def confirm(self, conn: Connection, txn: Transaction) -> None:
        """Make a live change permanent: confirmed, and saved so that it survives a reload."""
        self.confirm_change(conn, txn)
        txn.confirmed = True
        self.disarm_rollback_timer(conn, txn)
        if self.saves_after_confirm:
            # Confirmed, not saved yet: a reload here would bring the old QoS back.
            kill_point("before-save", conn.device)
            self.save(conn)
        self.clean_up(conn, txn)

    # The steps. One with a default does nothing there: a NOS that has the step overrides it.

    def begin(self, conn: Connection, txn: Transaction) -> None:
        """Open the session or checkpoint ``txn.name``. The default opens nothing (a NOS that
        stages lines in a pending revision of its own)."""
        return None

    @abstractmethod
    def stage(self, conn: Connection, txn: Transaction) -> None:
        """Send ``txn.lines``; a refused line raises :class:`ConfigRejected`."""

    def commit(self, conn: Connection, txn: Transaction, confirm_timeout_s: int) -> None:
        """Make the staged lines live under the device's rollback timer. The default commits
        nothing: the lines went live as they were sent."""
        return None

    def arm_rollback_timer(self, conn: Connection, txn: Transaction, timeout_s: int) -> None:
        """Start the timer that rolls a committed change back, where the commit has none of
        its own (the default: it has, or there is none)."""
        return None

    def abort(self, conn: Connection, txn: Transaction) -> None:
        """Drop a change that failed before it was committed (or whose commit reply was lost).
        The default rolls it back like an unconfirmed one."""
        self.rollback(conn, txn)

    @abstractmethod
    def rollback(self, conn: Connection, txn: Transaction) -> None:
        """Undo a change that is not confirmed, now; set ``txn.rolled_back`` or add notes why
        not."""

    @abstractmethod
    def confirm_change(self, conn: Connection, txn: Transaction) -> None:
        """The point of no return: from here the device keeps the change."""

    def disarm_rollback_timer(self, conn: Connection, txn: Transaction) -> None:
        """Stop the timer :meth:`arm_rollback_timer` started (the default: none)."""
        return None

    def clean_up(self, conn: Connection, txn: Transaction) -> None:
        """Remove what a confirmed transaction left on the device (the default: nothing)."""
        return None

    # Pending transactions. The default (no way to list them) reports none; platforms that
    # have sessions, checkpoints or rollback timers override all three.
    def read_sessions(self, conn: Connection) -> list[PendingSession]:
        """Every change on the device that is not final yet (see :class:`PendingSession`)."""
        return []

    def abort_session(self, conn: Connection, session: PendingSession) -> None:
        """Drop a pending change (roll a live one back now)."""
        raise PlatformError(
            f"{conn.device}: {self.name} cannot abort {session.describe()} from the agent"
        )

    def confirm_session(self, conn: Connection, session: PendingSession) -> None:
        """Make a live pending change permanent."""
        raise PlatformError(
            f"{conn.device}: {self.name} cannot confirm {session.describe()} from the agent"
        )

    @abstractmethod
    def save(self, conn: Connection) -> None:
        """Persist the running configuration (it must survive a reload). Part of
        :meth:`confirm`; the push path calls it alone when it finds a change confirmed by a
        run that died (or lost the reply) before it could save."""

    def read_link_health(self, conn: Connection) -> dict[str, LinkHealth]:
        """Per interface: link up or down and receive/transmit error counters; empty when this
        platform does not read them (the caller then has no link evidence, not "all fine")."""
        return {}

    def unsaved(self, conn: Connection) -> list[str] | None:
        """The lines a reload would lose (running config not saved); None when this platform
        cannot tell from the CLI."""
        return None

    @staticmethod
    def age_from_name(name: str, now: float | None = None) -> float | None:
        """Age of a ``roce-agent-YYYYmmdd-HHMMSS-mmm`` name (the agent's local clock), for NOSes
        that do not report when a checkpoint was made; None for other names."""
        match = re.fullmatch(r"roce-agent-(\d{8}-\d{6})-\d{3}", name)
        if match is None:
            return None
        made = time.mktime(time.strptime(match.group(1), "%Y%m%d-%H%M%S"))
        return max(0.0, (time.time() if now is None else now) - made)

    @staticmethod
    def session_name(prefix: str = "roce-agent") -> str:
        return f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}-{int(time.time() * 1000) % 1000:03d}"


class CheckpointPlatform(Platform):
    """A NOS whose transaction is a named checkpoint (NX-OS, SONiC): ``rollback`` goes back to
    it, and a pending change is settled by that rollback or by confirming (saving) the
    running config."""

    def abort_session(self, conn: Connection, session: PendingSession) -> None:
        txn = Transaction(name=session.name, lines=[])
        self.rollback(conn, txn)
        if not txn.rolled_back:
            raise PlatformError(f"{conn.device}: {'; '.join(txn.notes)}")

    def confirm_session(self, conn: Connection, session: PendingSession) -> None:
        self.confirm(conn, Transaction(name=session.name, lines=[]))
