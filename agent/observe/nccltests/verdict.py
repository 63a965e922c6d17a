"""The NCCL acceptance verdict: rules NT001-NT004 over parsed nccl-tests runs and the counters
read around them.

- NT001: each test ran to its end (no failure line, the footer printed, rows).
- NT002: no wrong value (every ``#wrong`` 0 and ``Out of bounds values`` 0).
- NT003: bus bandwidth at the largest size, per NIC, >= ``min_busbw_fraction`` x line rate.
- NT004: no switch dropped a lossless frame and no NIC counted a sign of loss meanwhile.

Why the largest size and not the "Avg bus bandwidth" line: the average is over every row of
both sides (src/common.cu adds each row's and side's busBw to ``bw[0]``, then divides by
``bw_count[0]``),
so a scan from 8 B averages latency-bound sizes in and says nothing about the link; nccl-tests'
doc/PERFORMANCE.md reads bandwidth at large sizes ("on large sizes ... it makes more sense to
look at the bandwidth"), as NVIDIA does in nccl-tests#119 (the 96 GB/s rows at 128 MB).
The out-of-place side is read, as the issues quote it; the in-place side is shown.

Per NIC: busbw is per rank (doc/PERFORMANCE.md: "each rank has a bandwidth to the outside
world of B"), and a node's ranks share its NICs: the 3 x 8 A100 of nccl-tests#119 with four
200G NICs per node were told "24 GB/s per 200G NIC ... so 96 GB/s is the target", i.e. busbw
over the NICs per node against one NIC's rate. The line rate in GB/s is the port speed / 8 /
1e9 (nccl-tests' GB is 1e9 bytes: ``baseBw = count * typesize / 1.0E9 / sec``,
src/all_reduce.cu ``AllReduceGetBw``).
A busbw per NIC above the line rate did not measure the network alone (on two nodes NCCL's
tree and NVLS algorithms move part of the data over NVLink: nccl-tests#169, #22): unverified,
with the fix (``NCCL_ALGO=Ring``).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from agent.observe.locate.counters import PortSymptoms
from agent.observe.nccltests.output import NcclTestsRun, SizeRow
from agent.observe.perftest.inputs import LOSS_COUNTERS, NicDelta

Status = Literal["pass", "fail", "unverified"]
_ORDER: dict[Status, int] = {"pass": 0, "unverified": 1, "fail": 2}
BYTES_PER_GB = 1e9  # nccl-tests' GB/s (src/all_reduce.cu AllReduceGetBw: / 1.0E9 / sec)
TAIL_LINES = 8


def line_rate_GBps(speed_bps: float) -> float:
    return speed_bps / 8 / BYTES_PER_GB


@dataclass(frozen=True)
class BinaryRun:
    """One nccl-tests binary's run: its parsed output, or why there is none.

    ``host``: where it was launched (mpirun's host); ``output_tail``: its last lines, for the
    error message when it failed."""

    test: str
    host: str
    run: NcclTestsRun | None = None
    error: str | None = None
    exit_status: int | None = None
    output_tail: tuple[str, ...] = ()
    command: str | None = None


@dataclass(frozen=True)
class NcclAcceptanceInput:
    runs: tuple[BinaryRun, ...]
    hosts: tuple[str, ...]
    nics_per_host: int
    line_rate_bps: float  # of one NIC: the slowest RDMA port among the hosts
    min_busbw_fraction: float = 0.9
    ports: tuple[PortSymptoms, ...] = ()  # what moved on the switches during the runs
    switches_read: bool = False
    nics: tuple[NicDelta, ...] = ()

    def __post_init__(self) -> None:
        if not self.runs:
            raise ValueError("nccl verdict: Expected: at least one test run Actual: none")
        if len(self.hosts) < 2:
            raise ValueError(
                "nccl verdict: Expected: two or more hosts (one host measures no network "
                f"link) Actual: {', '.join(self.hosts) or 'none'}"
            )
        if self.nics_per_host < 1:
            raise ValueError(f"NICs per host: Expected: >= 1 Actual: {self.nics_per_host}")
        if not math.isfinite(self.line_rate_bps) or self.line_rate_bps <= 0:
            raise ValueError(f"line rate: Expected: > 0 bit/s Actual: {self.line_rate_bps!r}")
        if not 0 < self.min_busbw_fraction <= 1:
            raise ValueError(
                f"min_busbw_fraction: Expected: in (0, 1] Actual: {self.min_busbw_fraction}"
            )


@dataclass(frozen=True)
class RuleOutcome:
    rule: str
    subject: str
    status: Status
    messages: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "subject": self.subject,
            "status": self.status,
            "messages": list(self.messages),
        }


@dataclass(frozen=True)
class BinaryRow:
    """One test's line in the report."""

    test: str
    status: Status
    size_bytes: int | None = None
    busbw_GBps: float | None = None
    algbw_GBps: float | None = None
    busbw_per_nic_GBps: float | None = None
    line_rate_GBps: float | None = None
    avg_busbw_GBps: float | None = None
    wrong: float | None = None

    @property
    def fraction(self) -> float | None:
        if self.busbw_per_nic_GBps is None or not self.line_rate_GBps:
            return None
        return self.busbw_per_nic_GBps / self.line_rate_GBps

    def as_json(self) -> dict[str, Any]:
        return {**self.__dict__, "fraction_of_line_rate": self.fraction}


@dataclass(frozen=True)
class NcclVerdict:
    rows: tuple[BinaryRow, ...]
    outcomes: tuple[RuleOutcome, ...] = field(default=())

    @property
    def passed(self) -> bool:
        """As ``probe perftest``'s verdict: a failed outcome fails; unverified ones do not
        (they are listed: what could not be judged, and why)."""
        return not any(o.status == "fail" for o in self.outcomes)

    @property
    def status(self) -> Status:
        return _worst([o.status for o in self.outcomes])

    @property
    def unverified(self) -> tuple[RuleOutcome, ...]:
        return tuple(o for o in self.outcomes if o.status == "unverified")

    def as_json(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "status": self.status,
            "unverified": [f"{o.rule} {o.subject}" for o in self.unverified],
            "tests": [row.as_json() for row in self.rows],
            "outcomes": [o.as_json() for o in self.outcomes],
        }


def _worst(statuses: Sequence[Status]) -> Status:
    return max(statuses, key=_ORDER.__getitem__, default="pass")


class Rule(ABC):
    rule_id = ""

    def outcome(self, subject: str, status: Status, messages: Sequence[str] = ()) -> RuleOutcome:
        return RuleOutcome(self.rule_id, subject, status, tuple(messages))

    @abstractmethod
    def evaluate(self, inputs: NcclAcceptanceInput) -> list[RuleOutcome]: ...


def _usable(test: BinaryRun) -> NcclTestsRun | None:
    """The run when it completed (NT001 passes), else None: later rules say unverified."""
    run = test.run
    if test.error or run is None or run.failures or not run.footer or not run.rows:
        return None
    return run


class Completed(Rule):
    """Each nccl-tests binary ran to its end: no failure line ("Test NCCL failure", "Test
    CUDA failure", "# error:"), rows, and the footer ("Avg bus bandwidth")."""

    rule_id = "NT001"

    def evaluate(self, inputs: NcclAcceptanceInput) -> list[RuleOutcome]:
        outcomes = []
        for test in inputs.runs:
            if _usable(test) is not None:
                outcomes.append(self.outcome(test.test, "pass"))
                continue
            outcomes.append(self.outcome(test.test, "fail", [self._why(test)]))
        return outcomes

    @staticmethod
    def _why(test: BinaryRun) -> str:
        run = test.run
        if test.error or run is None:
            why = test.error or "no output"
        elif run.failures:
            why = f"failed: {run.failures[0]}"
        elif not run.rows:
            why = "no row in its table"
        else:
            why = f"its output ends after {len(run.rows)} rows, before the footer"
        status = "" if test.exit_status is None else f" (exit {test.exit_status})"
        tail = " | ".join(test.output_tail[-TAIL_LINES:])
        last = f"; last lines: {tail}" if tail else ""
        return f"{test.test} on {test.host}: Expected: a complete run Actual: {why}{status}{last}"


class NoWrongValues(Rule):
    """No element was wrong: ``#wrong`` 0 in every row and side that was checked, and ``Out
    of bounds values : 0``. Unverified when nothing was checked (``-c 0``, or N/A)."""

    rule_id = "NT002"

    def evaluate(self, inputs: NcclAcceptanceInput) -> list[RuleOutcome]:
        outcomes = []
        for test in inputs.runs:
            run = _usable(test)
            if run is None:
                outcomes.append(self.outcome(test.test, "unverified", ["the run did not complete"]))
                continue
            outcomes.append(self._judge(test.test, run))
        return outcomes

    def _judge(self, name: str, run: NcclTestsRun) -> RuleOutcome:
        problems = []
        if run.out_of_bounds:
            problems.append(f"{name} Out of bounds values: Expected: 0 Actual: {run.out_of_bounds}")
        counted = run.layout is not None and run.layout.check == "#wrong"
        checked = 0
        for row in run.rows:
            for label, side in (("out-of-place", row.out_of_place), ("in-place", row.in_place)):
                if side is None or side.wrong is None:
                    continue
                checked += 1
                if counted and side.wrong > 0:
                    problems.append(
                        f"{name} {row.size_bytes} B {label} #wrong: Expected: 0 "
                        f"Actual: {side.wrong:g} (line {row.line})"
                    )
        if problems:
            return self.outcome(name, "fail", problems)
        if not checked and run.out_of_bounds is None:
            return self.outcome(
                name, "unverified", [f"{name}: results not checked (N/A: run with -c 1 or more)"]
            )
        return self.outcome(name, "pass")


class BusBandwidth(Rule):
    """busbw at the largest size (out-of-place), divided by the NICs per host, is at least
    ``min_busbw_fraction`` of one NIC's line rate (module docstring: why these choices)."""

    rule_id = "NT003"

    def evaluate(self, inputs: NcclAcceptanceInput) -> list[RuleOutcome]:
        outcomes = []
        for test in inputs.runs:
            run = _usable(test)
            row = run.largest if run is not None else None
            if row is None:
                outcomes.append(self.outcome(test.test, "unverified", ["the run did not complete"]))
                continue
            outcomes.append(self._judge(inputs, test.test, row))
        return outcomes

    def _judge(self, inputs: NcclAcceptanceInput, name: str, row: SizeRow) -> RuleOutcome:
        rate = line_rate_GBps(inputs.line_rate_bps)
        per_nic = row.judged.busbw_GBps / inputs.nics_per_host
        wanted = inputs.min_busbw_fraction * rate
        nics = f"{inputs.nics_per_host} NIC{'s' if inputs.nics_per_host > 1 else ''} per host"
        message = (
            f"{name} busbw at {row.size_bytes} B per NIC: Expected: >= {wanted:.2f} GB/s "
            f"({inputs.min_busbw_fraction:.0%} of {rate:.2f} GB/s) Actual: {per_nic:.2f} GB/s "
            f"({row.judged.busbw_GBps:g} GB/s over {nics}, line {row.line})"
        )
        if per_nic > rate:
            return self.outcome(
                name,
                "unverified",
                [
                    message,
                    f"{name}: more than the NICs carry: part of the data did not cross the "
                    "network (NCCL's tree or NVLS algorithm on two nodes, nccl-tests#169); "
                    "run with NCCL_ALGO=Ring to measure the fabric",
                ],
            )
        return self.outcome(name, "pass" if per_nic >= wanted else "fail", [message])


class NoFabricLoss(Rule):
    """While the tests ran, no switch port dropped a frame of a lossless priority and no NIC
    counted a sign of loss (the NIC counters of ``probe perftest``'s PT007)."""

    rule_id = "NT004"

    def evaluate(self, inputs: NcclAcceptanceInput) -> list[RuleOutcome]:
        outcomes = []
        if not inputs.switches_read:
            outcomes.append(
                self.outcome(
                    "fabric",
                    "unverified",
                    ["switches: Expected: counters before and after the run Actual: none"],
                )
            )
        else:
            problems = [
                f"{p.device} {p.port} lossless drops: Expected: 0 Actual: {p.lossless_drops}"
                for p in inputs.ports
                if p.lossless_drops
            ]
            outcomes.append(self.outcome("fabric", "fail" if problems else "pass", problems))
        for host in inputs.hosts:
            outcomes.append(self._host(inputs, host))
        return outcomes

    def _host(self, inputs: NcclAcceptanceInput, host: str) -> RuleOutcome:
        nics = [nic for nic in inputs.nics if nic.host == host]
        if not nics:
            return self.outcome(host, "unverified", [f"{host}: no NIC counters collected"])
        problems = [
            f"{nic.name} {name}: Expected: 0 Actual: {nic.counters[name]} ({why})"
            for nic in nics
            for name, why in LOSS_COUNTERS.items()
            if nic.counters.get(name)
        ]
        if problems:
            return self.outcome(host, "fail", problems)
        if not any(name in nic.counters for nic in nics for name in LOSS_COUNTERS):
            return self.outcome(
                host,
                "unverified",
                [f"{host}: Expected: one of {', '.join(LOSS_COUNTERS)} Actual: none provided"],
            )
        return self.outcome(host, "pass")


RULES: tuple[type[Rule], ...] = (Completed, NoWrongValues, BusBandwidth, NoFabricLoss)


def _row(inputs: NcclAcceptanceInput, test: BinaryRun, outcomes: list[RuleOutcome]) -> BinaryRow:
    status = _worst([o.status for o in outcomes if o.subject == test.test])
    run = _usable(test)
    row = run.largest if run is not None else None
    if run is None or row is None:
        return BinaryRow(test.test, status)
    side = row.judged
    return BinaryRow(
        test=test.test,
        status=status,
        size_bytes=row.size_bytes,
        busbw_GBps=side.busbw_GBps,
        algbw_GBps=side.algbw_GBps,
        busbw_per_nic_GBps=side.busbw_GBps / inputs.nics_per_host,
        line_rate_GBps=line_rate_GBps(inputs.line_rate_bps),
        avg_busbw_GBps=run.avg_busbw_GBps,
        wrong=side.wrong,
    )


def evaluate(inputs: NcclAcceptanceInput) -> NcclVerdict:
    """Every rule on every test; a test's row has the worst status of its outcomes."""
    outcomes: list[RuleOutcome] = []
    for rule in RULES:
        outcomes += rule().evaluate(inputs)
    rows = tuple(_row(inputs, test, outcomes) for test in inputs.runs)
    return NcclVerdict(rows, tuple(outcomes))
