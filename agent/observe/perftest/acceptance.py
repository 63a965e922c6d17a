"""The acceptance verdict of a perftest run: pure, on parsed results and counter deltas.

Rules, ANTA style (one class each, an ID, a docstring whose first line states the expected
result, messages "Expected: … Actual: …"), as the checks in :mod:`agent.observe.checks` are:
PT001–PT003 judge bandwidth (:mod:`agent.observe.perftest.rate_rules`), PT004–PT007 the
switches' and NICs' counters (:mod:`agent.observe.perftest.counter_rules`). What they look
at is :mod:`agent.observe.perftest.inputs`, what they make
:mod:`agent.observe.perftest.verdict`.
"""

from __future__ import annotations

from dataclasses import replace

from agent.observe.perftest.counter_rules import (
    CnpWhereMarked,
    NoLosslessDrops,
    NoLossyPause,
    NoNicLoss,
)
from agent.observe.perftest.inputs import AcceptanceInput
from agent.observe.perftest.rate_rules import IncastAggregate, IncastFairness, LineRate
from agent.observe.perftest.rule import Rule, RunContext
from agent.observe.perftest.verdict import RuleOutcome, Verdict, worst

RULES: tuple[type[Rule], ...] = (
    LineRate,
    IncastAggregate,
    IncastFairness,
    NoLosslessDrops,
    CnpWhereMarked,
    NoLossyPause,
    NoNicLoss,
)


def evaluate(inputs: AcceptanceInput) -> Verdict:
    """Run every rule that applies to the scenario; each link row's status is the worst of
    the outcomes that concern it."""
    ctx = RunContext(inputs)
    outcomes: list[RuleOutcome] = []
    for rule in RULES:
        if inputs.scenario in rule.scenarios:
            outcomes += rule().evaluate(ctx)
    rows = []
    for label, row in ctx.rows.items():
        status = worst([row.status, *(o.status for o in outcomes if label in o.links)])
        messages = list(row.messages)
        for outcome in outcomes:  # why a row is not a plain pass
            if label in outcome.links and outcome.status != "pass":
                messages += [m for m in outcome.messages if m not in messages]
        rows.append(replace(row, status=status, messages=tuple(messages)))
    return Verdict(inputs.scenario, inputs.kind, tuple(rows), tuple(outcomes))
