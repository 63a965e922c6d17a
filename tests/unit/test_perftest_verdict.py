"""The perftest acceptance verdict (agent.observe.perftest.verdict), table-driven, on recorded and
reconstructed perftest outputs (tests/data/perftest/README.md) and synthetic counters."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.device.state import Counters, InterfaceCounters, QueueCounters
from agent.intent.model import PerftestPolicy
from agent.observe.hostnic import NicCounters, PortPause
from agent.observe.perftest.acceptance import evaluate
from agent.observe.perftest.inputs import (
    AcceptanceInput,
    LinkRun,
    NicDelta,
    Scenario,
    SwitchDelta,
    SwitchPort,
    Test,
    nic_delta,
)
from agent.observe.perftest.output import BwResult, PerftestRun, parse_stdout
from agent.observe.perftest.rate_rules import jain_fairness
from agent.observe.perftest.verdict import RuleOutcome, Verdict

DATA = Path(__file__).resolve().parents[1] / "data" / "perftest"
G = 1e9
LINE = 100 * G


def stdout(name: str) -> PerftestRun:
    return parse_stdout((DATA / f"{name}.stdout").read_text())


WRITE = stdout("mlx5_write_client_25.10")  # 97.73 Gb/s
READ = stdout("mlx5_read_client_4.5-0.17")  # 96.98 Gb/s
SEND_CLIENT = stdout("mlx5_send_client_4.5-0.17")  # 97.23 Gb/s sent
SEND_SERVER = stdout("mlx5_send_server_4.5-0.17")  # 97.22 Gb/s received
BIDIR = stdout("mlx5_write_bidir_client_4.5-0.17")  # 97.36 + 96.29 = 193.65
RXE_CLIENT = stdout("rxe_write_client_4.5-0.17")  # 0.15 Gb/s
RXE_SERVER = stdout("rxe_write_server_4.5-0.17")  # 0 iterations
INCAST = {h: stdout(f"incast_unfair_{h}_to_h3_25.10") for h in ("h1", "h2", "h4")}


def at_rate(run: PerftestRun, gbps: float, scope: str = "total") -> PerftestRun:
    """``run`` with the average of its ``scope`` rows set to ``gbps``."""
    rows = tuple(
        replace(row, bw_average_bps=gbps * G) if row.scope == scope else row for row in run.results
    )
    return replace(run, results=rows)


def verdict(
    scenario: Scenario,
    links: Sequence[LinkRun],
    *,
    test: Test = "write",
    nics: Sequence[NicDelta] = (),
    switches: Sequence[SwitchDelta] = (),
    policy: PerftestPolicy | None = None,
    receiver_line_rate_bps: float | None = None,
) -> Verdict:
    return evaluate(
        AcceptanceInput(
            scenario=scenario,
            links=tuple(links),
            lossless_priorities=(3,),
            roce_priority=3,
            policy=policy or PerftestPolicy(),
            test=test,
            nics=tuple(nics),
            switches=tuple(switches),
            receiver_line_rate_bps=receiver_line_rate_bps,
        )
    )


def outcomes(v: Verdict, rule: str) -> list[RuleOutcome]:
    return [o for o in v.outcomes if o.rule == rule]


def one(v: Verdict, rule: str, subject: str | None = None) -> RuleOutcome:
    found = [o for o in outcomes(v, rule) if subject is None or o.subject == subject]
    assert len(found) == 1, found
    return found[0]


def interface(
    *,
    drops: dict[int, int] | None = None,
    headroom: dict[int, int] | None = None,
    ecn: dict[int, int] | None = None,
    pfc_rx: dict[int, int] | None = None,
    pfc_tx: dict[int, int] | None = None,
) -> InterfaceCounters:
    queues = {
        q: QueueCounters(
            dropped_packets=(drops or {}).get(q, 0), ecn_marked_packets=(ecn or {}).get(q, 0)
        )
        for q in range(8)
    }
    return InterfaceCounters(
        queues=queues,
        headroom_drops=tuple((headroom or {}).get(p, 0) for p in range(8)),
        pfc_rx=tuple((pfc_rx or {}).get(p, 0) for p in range(8)),
        pfc_tx=tuple((pfc_tx or {}).get(p, 0) for p in range(8)),
    )


def switch(
    name: str,
    after: dict[str, InterfaceCounters],
    before: dict[str, InterfaceCounters] | None = None,
) -> SwitchDelta:
    base = before if before is not None else {n: interface() for n in after}
    return SwitchDelta(
        Counters(device=name, collected_at=0.0, interfaces=base),
        Counters(device=name, collected_at=10.0, interfaces=after),
    )


CLEAN = switch("leaf1", {"Ethernet1": interface(), "Ethernet3": interface()})


def mlx5(host: str, **counters: int) -> NicDelta:
    base = {
        "out_of_sequence": 0,
        "packet_seq_err": 0,
        "np_ecn_marked_roce_packets": 0,
        "np_cnp_sent": 0,
        "rp_cnp_handled": 0,
    }
    base.update(counters)
    return NicDelta(host, "mlx5_0/1", base, rx_pause=(0,) * 8, tx_pause=(0,) * 8)


# --------------------------------------------------------------------------- PT001 pairs

# name -> (link, test, expected status, expected row label, measured Gb/s)
PAIRS: dict[str, tuple[LinkRun, Test, str, str, float]] = {
    "write at 97.7 %": (
        LinkRun("h1", "h3", LINE, client_run=WRITE),
        "write",
        "pass",
        "h1→h3",
        97.73,
    ),
    "read: data flows server to client": (
        LinkRun("h3", "h1", LINE, client_run=READ),
        "read",
        "pass",
        "h1→h3",
        96.98,
    ),
    "send: the receiver's count": (
        LinkRun("h1", "h3", LINE, client_run=SEND_CLIENT, server_run=SEND_SERVER),
        "send",
        "pass",
        "h1→h3",
        97.22,
    ),
    "send client only": (
        LinkRun("h1", "h3", LINE, client_run=SEND_CLIENT),
        "send",
        "pass",
        "h1→h3",
        97.23,
    ),
    "exactly 90 %": (
        LinkRun("h1", "h3", LINE, client_run=at_rate(WRITE, 90.0)),
        "write",
        "pass",
        "h1→h3",
        90.0,
    ),
    "just under 90 %": (
        LinkRun("h1", "h3", LINE, client_run=at_rate(WRITE, 89.99)),
        "write",
        "fail",
        "h1→h3",
        89.99,
    ),
    "rxe at 0.15 Gb/s of a 10 Gb/s veth": (
        LinkRun("vm2", "vm1", 10 * G, client_run=RXE_CLIENT),
        "write",
        "fail",
        "vm2→vm1",
        0.15,
    ),
    "write: client preferred over server": (
        LinkRun("vm2", "vm1", 0.1 * G, client_run=RXE_CLIENT, server_run=RXE_SERVER),
        "write",
        "pass",
        "vm2→vm1",
        0.15,
    ),
    "400G port": (LinkRun("h1", "h3", 400 * G, client_run=WRITE), "write", "fail", "h1→h3", 97.73),
}


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_pairwise_line_rate(name: str) -> None:
    link, test, status, label, gbps = PAIRS[name]
    nics = [mlx5(link.client), mlx5(link.server)]
    v = verdict("pairwise", [link], test=test, switches=[CLEAN], nics=nics)
    outcome = one(v, "PT001")
    assert (outcome.status, outcome.subject) == (status, label)
    (row,) = v.links
    assert (row.link, row.status) == (label, status)
    assert row.measured_bps == pytest.approx(gbps * G)
    assert row.percent_of_line_rate == pytest.approx(100 * gbps * G / link.line_rate_bps)
    assert "Expected: >= 90% of" in outcome.messages[0]
    assert v.passed is (status == "pass")


def test_message_names_link_rate_and_size() -> None:
    v = verdict("pairwise", [LinkRun("h1", "h3", LINE, client_run=at_rate(WRITE, 80.0))])
    assert one(v, "PT001").messages[0] == (
        "h1→h3 average: Expected: >= 90% of 100.00 Gb/s (90.00 Gb/s) Actual: 80.00 Gb/s "
        "(80.0 %) at 65536 B, 4 QPs"
    )


def test_policy_fraction_is_used() -> None:
    link = LinkRun("h1", "h3", LINE, client_run=at_rate(WRITE, 80.0))
    strict = verdict("pairwise", [link], policy=PerftestPolicy(min_line_rate_fraction=0.95))
    lenient = verdict("pairwise", [link], policy=PerftestPolicy(min_line_rate_fraction=0.8))
    assert one(strict, "PT001").status == "fail"
    assert one(lenient, "PT001").status == "pass"


# name -> (link, fragment of the failure)
NO_MEASUREMENT = {
    "perftest failed": (
        LinkRun("h1", "h3", LINE, error="Couldn't connect to 198.18.0.13:18515"),
        "Couldn't connect",
    ),
    "no output": (LinkRun("h1", "h3", LINE), "no perftest output from h1 or h3"),
    "server's zero row only": (
        LinkRun("vm2", "vm1", LINE, server_run=RXE_SERVER),
        "0 iterations at 65536 B (stdout line 30)",
    ),
}


@pytest.mark.parametrize("name", sorted(NO_MEASUREMENT))
def test_no_measurement_fails(name: str) -> None:
    link, fragment = NO_MEASUREMENT[name]
    v = verdict("pairwise", [link])
    outcome = one(v, "PT001")
    assert outcome.status == "fail"
    assert fragment in outcome.messages[0]
    assert v.links[0].measured_bps is None
    assert not v.passed


def test_all_sizes_judged_at_the_policy_size() -> None:
    run = stdout("mlx5_write_all_sizes_4.5-0.17")
    v = verdict("pairwise", [LinkRun("h1", "h3", LINE, client_run=run)])
    assert v.links[0].message_bytes == 65536
    other = verdict(
        "pairwise",
        [LinkRun("h1", "h3", LINE, client_run=run)],
        policy=PerftestPolicy(message_bytes=3000),
    )
    assert other.links[0].message_bytes == 2**23  # no 3000 B row: the largest
    assert "judged at 8388608 B" in one(other, "PT001").messages[1]


# --------------------------------------------------------------------------- bidirectional


def test_bidirectional_per_direction() -> None:
    v = verdict(
        "bidirectional",
        [LinkRun("h1", "h2", LINE, client_run=BIDIR)],
        nics=[mlx5("h1"), mlx5("h2")],
        switches=[CLEAN],
    )
    rows = {row.link: row for row in v.links}
    assert rows["h1→h2"].measured_bps == pytest.approx(97.36 * G)
    assert rows["h2→h1"].measured_bps == pytest.approx(96.29 * G)
    assert all(row.status == "pass" for row in rows.values())
    assert v.passed


def test_bidirectional_one_slow_direction() -> None:
    run = at_rate(BIDIR, 60.0, "remote")
    v = verdict("bidirectional", [LinkRun("h1", "h2", LINE, client_run=run)])
    statuses = {o.subject: o.status for o in outcomes(v, "PT001")}
    assert statuses == {"h1→h2": "pass", "h2→h1": "fail"}
    assert (
        "h2→h1 direction: Expected: >= 90% of 100.00 Gb/s" in one(v, "PT001", "h2→h1").messages[0]
    )


def test_bidirectional_read_directions_are_reversed() -> None:
    run = replace(BIDIR, test="RDMA_Read")
    v = verdict(
        "bidirectional",
        [LinkRun("h1", "h2", LINE, client_run=at_rate(run, 50.0, "local"))],
        test="read",
    )
    statuses = {o.subject: o.status for o in outcomes(v, "PT001")}
    # the client's own reads (local) carry data from the server to the client
    assert statuses == {"h2→h1": "fail", "h1→h2": "pass"}


def _only_total(run: PerftestRun) -> PerftestRun:
    return replace(run, results=run.rows("total"))


@pytest.mark.parametrize(("gbps", "status"), [(193.65, "unverified"), (179.0, "fail")])
def test_bidirectional_without_per_direction_rows(gbps: float, status: str) -> None:
    """Without --report-both (or with ib_send_bw -b -D) only the sum is known."""
    run = at_rate(_only_total(BIDIR), gbps)
    v = verdict("bidirectional", [LinkRun("h1", "h2", LINE, client_run=run)], switches=[CLEAN])
    outcome = one(v, "PT001")
    assert (outcome.subject, outcome.status) == ("h1↔h2", status)
    assert (
        "sum of both directions: Expected: >= 90% of 2 × 100.00 Gb/s (180.00 Gb/s)"
        in outcome.messages[0]
    )
    if status == "unverified":
        assert "only >= 80% of the port" in outcome.messages[1]
        assert v.passed  # unverified is not a failure
        assert outcome in v.unverified


def test_bidirectional_send_ignores_remote_rows() -> None:
    """ib_send_bw -b -D's Remote results are uninitialised memory: never used."""
    run = replace(BIDIR, test="Send")
    v = verdict("bidirectional", [LinkRun("h1", "h2", LINE, client_run=run)], test="send")
    assert one(v, "PT001").subject == "h1↔h2"


def test_bidirectional_needs_a_bidirectional_run() -> None:
    v = verdict("bidirectional", [LinkRun("h1", "h3", LINE, client_run=WRITE)])
    assert [o.status for o in outcomes(v, "PT001")] == ["fail", "fail"]
    assert "a unidirectional run (RDMA_Write without -b)" in outcomes(v, "PT001")[0].messages[0]


# --------------------------------------------------------------------------- incast


def incast_links(runs: dict[str, PerftestRun], rate: float = LINE) -> list[LinkRun]:
    return [LinkRun(host, "h3", rate, client_run=run) for host, run in runs.items()]


def test_incast_where_the_naive_sum_misleads() -> None:
    """44.10 + 46.20 + 8.90 = 99.2 Gb/s: the sum says line rate, h4 starves."""
    v = verdict("incast", incast_links(INCAST), switches=[CLEAN])
    aggregate, fairness = one(v, "PT002"), one(v, "PT003")
    assert aggregate.status == "pass"
    assert "Actual: 99.20 Gb/s (99.2 % of h3's 100.00 Gb/s)" in aggregate.messages[0]
    assert fairness.status == "fail"
    assert fairness.messages[0] == (
        "h1+h2+h4→h3 Jain's fairness: Expected: >= 0.90 Actual: 0.789 "
        "(h1 44.10 Gb/s, h2 46.20 Gb/s, h4 8.90 Gb/s)"
    )
    assert not v.passed
    assert {row.link: row.status for row in v.links} == {
        "h1→h3": "fail",
        "h2→h3": "fail",
        "h4→h3": "fail",
    }
    assert {row.link: round(row.percent_of_line_rate or 0, 1) for row in v.links} == {
        "h1→h3": 44.1,
        "h2→h3": 46.2,
        "h4→h3": 8.9,
    }


def test_fair_incast_passes() -> None:
    runs = {h: at_rate(INCAST[h], g) for h, g in (("h1", 32.1), ("h2", 32.6), ("h4", 32.4))}
    nics = [mlx5(h) for h in ("h1", "h2", "h3", "h4")]
    v = verdict("incast", incast_links(runs), switches=[CLEAN], nics=nics)
    assert one(v, "PT002").status == one(v, "PT003").status == "pass"
    assert v.passed
    assert all(row.status == "pass" for row in v.links)


def test_incast_aggregate_too_low() -> None:
    runs = {h: at_rate(INCAST[h], 25.0) for h in INCAST}
    v = verdict("incast", incast_links(runs), switches=[CLEAN])
    assert one(v, "PT002").status == "fail"
    assert one(v, "PT003").status == "pass"


def test_incast_windows_that_did_not_overlap() -> None:
    """Three senders each at 60 Gb/s into one 100 Gb/s port: impossible together."""
    runs = {h: at_rate(INCAST[h], 60.0) for h in INCAST}
    v = verdict("incast", incast_links(runs), switches=[CLEAN])
    aggregate = one(v, "PT002")
    assert aggregate.status == "unverified"
    assert "measurement windows did not overlap" in aggregate.messages[0]


def test_incast_capacity_is_the_smaller_of_receiver_and_senders() -> None:
    """Two 25 Gb/s senders into a 100 Gb/s receiver can only fill 50 Gb/s."""
    runs = {h: at_rate(INCAST[h], 23.0) for h in ("h1", "h2")}
    v = verdict("incast", incast_links(runs, 25 * G), switches=[CLEAN], receiver_line_rate_bps=LINE)
    assert one(v, "PT002").status == "pass"
    assert "Expected: >= 90% of 50.00 Gb/s (45.00 Gb/s)" in one(v, "PT002").messages[0]


def test_incast_with_a_failed_sender() -> None:
    links = [
        *incast_links({"h1": INCAST["h1"]}),
        LinkRun("h2", "h3", LINE, error="Couldn't connect to h3:18516"),
    ]
    v = verdict("incast", links, switches=[CLEAN])
    assert one(v, "PT002").status == one(v, "PT003").status == "fail"
    assert "h2→h3: Expected: a measurement Actual: Couldn't connect" in one(v, "PT002").messages[0]


def test_incast_read_receiver_is_the_client() -> None:
    links = [
        LinkRun("h3", host, LINE, client_run=replace(at_rate(INCAST[host], 31.0), test="RDMA_Read"))
        for host in INCAST
    ]
    v = verdict("incast", links, test="read", switches=[CLEAN])
    assert one(v, "PT002").subject == "h1+h2+h4→h3"


@pytest.mark.parametrize(
    "links",
    [
        [LinkRun("h1", "h3", LINE, client_run=WRITE)],
        [LinkRun("h1", "h3", LINE, client_run=WRITE), LinkRun("h2", "h4", LINE, client_run=WRITE)],
    ],
)
def test_incast_shape_is_checked(links: list[LinkRun]) -> None:
    with pytest.raises(ValueError, match="incast: Expected: two or more senders into one receiver"):
        verdict("incast", links)


# --------------------------------------------------------------------------- PT004


# name -> (switch delta, status, fragment)
DROPS = {
    "clean": (CLEAN, "pass", None),
    "lossless queue drop": (
        switch("leaf1", {"Ethernet3": interface(drops={3: 12})}),
        "fail",
        "leaf1 Ethernet3 priority 3 drops: Expected: 0 Actual: 12",
    ),
    "headroom drop": (
        switch("leaf1", {"Ethernet3": interface(headroom={3: 2})}),
        "fail",
        "priority 3 drops: Expected: 0 Actual: 2",
    ),
    "lossy drops are allowed": (
        switch("leaf1", {"Ethernet3": interface(drops={0: 500})}),
        "pass",
        None,
    ),
    "drops before the run do not count": (
        switch(
            "leaf1", {"Ethernet3": interface(drops={3: 7})}, {"Ethernet3": interface(drops={3: 7})}
        ),
        "pass",
        None,
    ),
    "no before reading": (
        switch("leaf1", {"Ethernet3": interface()}, {}),
        "unverified",
        "leaf1 Ethernet3: no counters before the run",
    ),
    "cleared during the run": (
        switch(
            "leaf1", {"Ethernet3": interface(drops={3: 1})}, {"Ethernet3": interface(drops={3: 9})}
        ),
        "unverified",
        "went backwards",
    ),
}


@pytest.mark.parametrize("name", sorted(DROPS))
def test_lossless_drops(name: str) -> None:
    delta, status, fragment = DROPS[name]
    v = verdict(
        "incast", incast_links({h: at_rate(INCAST[h], 32.0) for h in INCAST}), switches=[delta]
    )
    outcome = one(v, "PT004")
    assert (outcome.subject, outcome.status) == ("leaf1", status)
    if fragment:
        assert any(fragment in m for m in outcome.messages)
    assert v.passed is (status != "fail")


def test_no_switch_counters_is_unverified() -> None:
    v = verdict("pairwise", [LinkRun("h1", "h3", LINE, client_run=WRITE)])
    outcome = one(v, "PT004")
    assert (outcome.subject, outcome.status) == ("fabric", "unverified")
    assert v.passed


def test_every_switch_is_checked() -> None:
    spine = switch("spine1", {"Ethernet1": interface(drops={3: 1})})
    v = verdict("pairwise", [LinkRun("h1", "h3", LINE, client_run=WRITE)], switches=[CLEAN, spine])
    assert {o.subject: o.status for o in outcomes(v, "PT004")} == {
        "leaf1": "pass",
        "spine1": "fail",
    }


# --------------------------------------------------------------------------- PT005

LEAF = switch("leaf1", {"Ethernet3": interface(ecn={3: 4000})})
ACCESS = SwitchPort("leaf1", "Ethernet3")


def cnp_case(
    receiver: NicDelta, *senders: NicDelta, switches: Sequence[SwitchDelta] = (LEAF,)
) -> Verdict:
    runs = {h: at_rate(INCAST[h], 46.0) for h in ("h1", "h2")}
    return verdict("incast", incast_links(runs), nics=[receiver, *senders], switches=switches)


def test_cnps_answer_the_marks() -> None:
    v = cnp_case(
        mlx5("h3", np_ecn_marked_roce_packets=3800, np_cnp_sent=950),
        mlx5("h1", rp_cnp_handled=480),
        mlx5("h2", rp_cnp_handled=470),
    )
    assert {o.subject: o.status for o in outcomes(v, "PT005")} == {
        "h3 mlx5_0/1": "pass",
        "h1 mlx5_0/1": "pass",
        "h2 mlx5_0/1": "pass",
    }
    assert v.passed


def test_marks_without_cnps_fail() -> None:
    v = cnp_case(
        mlx5("h3", np_ecn_marked_roce_packets=3800, np_cnp_sent=0),
        mlx5("h1", rp_cnp_handled=0),
        mlx5("h2", rp_cnp_handled=0),
    )
    receiver = one(v, "PT005", "h3 mlx5_0/1")
    assert receiver.status == "fail"
    assert receiver.messages == (
        "h3 mlx5_0/1 np_cnp_sent: Expected: > 0 (answering 3800 ECN-marked RoCE packets) Actual: 0",
    )
    assert not v.passed


def test_one_sender_not_handling_cnps_fails_only_its_link() -> None:
    v = cnp_case(
        mlx5("h3", np_ecn_marked_roce_packets=3800, np_cnp_sent=950),
        mlx5("h1", rp_cnp_handled=480),
        mlx5("h2", rp_cnp_handled=0),
    )
    sender = one(v, "PT005", "h2 mlx5_0/1")
    assert (sender.status, sender.links) == ("fail", ("h2→h3",))
    assert (
        "rp_cnp_handled: Expected: > 0 (h3 mlx5_0/1 counted 3800 ECN-marked" in sender.messages[0]
    )
    rows = {row.link: row.status for row in v.links}
    assert rows == {"h1→h3": "pass", "h2→h3": "fail"}


def test_rxe_receiver_is_unverified_and_says_the_switch_marked() -> None:
    rxe = NicDelta("h3", "rxe0/1", {"rcvd_seq_err": 0, "out_of_seq_request": 0}, access=ACCESS)
    v = cnp_case(rxe, mlx5("h1"), mlx5("h2"))
    outcome = one(v, "PT005", "h3 rxe0/1")
    assert outcome.status == "unverified"
    assert "h3 rxe0/1 np_ecn_marked_roce_packets" in outcome.messages[0]
    assert "mlx5 (ConnectX) hw_counters; rxe has no DCQCN" in outcome.messages[0]
    assert outcome.messages[1].startswith(
        "leaf1 Ethernet3 queue 3 marked 4000 packets ECN toward h3"
    )
    assert v.passed  # unverified, not failed
    assert outcome in v.unverified


def test_rxe_receiver_without_switch_marks_says_only_the_counters() -> None:
    rxe = NicDelta("h3", "rxe0/1", {"rcvd_seq_err": 0}, access=ACCESS)
    v = cnp_case(rxe, mlx5("h1"), mlx5("h2"), switches=[CLEAN])
    assert len(one(v, "PT005", "h3 rxe0/1").messages) == 1


def test_unmarked_receiver_passes() -> None:
    v = cnp_case(mlx5("h3"), mlx5("h1"), mlx5("h2"), switches=[CLEAN])
    assert one(v, "PT005").status == "pass"


def test_missing_counters_are_never_zero() -> None:
    """np_cnp_sent absent is unverified; rp_cnp_handled absent on a sender likewise."""
    receiver = NicDelta("h3", "mlx5_0/1", {"np_ecn_marked_roce_packets": 10, "out_of_sequence": 0})
    sender = NicDelta("h1", "rxe0/1", {"rcvd_seq_err": 0})
    v = cnp_case(receiver, sender)
    assert one(v, "PT005", "h3 mlx5_0/1").status == "unverified"
    assert one(v, "PT005", "h1 rxe0/1").status == "unverified"
    assert one(v, "PT005", "h2").messages == ("h2: no NIC counters collected",)


def test_bidirectional_checks_both_receivers() -> None:
    v = verdict(
        "bidirectional",
        [LinkRun("h1", "h2", LINE, client_run=BIDIR)],
        nics=[mlx5("h1", np_ecn_marked_roce_packets=5, np_cnp_sent=0), mlx5("h2")],
    )
    assert [(o.subject, o.status, o.links) for o in outcomes(v, "PT005")] == [
        ("h2 mlx5_0/1", "pass", ("h1→h2", "h1↔h2")),  # h2 received nothing marked
        ("h1 mlx5_0/1", "fail", ("h2→h1", "h1↔h2")),  # h1 did, and sent no CNP
        ("h2 mlx5_0/1", "fail", ("h2→h1", "h1↔h2")),  # so h2 handled none
    ]
    assert {row.link: row.status for row in v.links} == {"h1→h2": "pass", "h2→h1": "fail"}


# --------------------------------------------------------------------------- PT006


def test_pause_on_lossy_priority_fails() -> None:
    leaf = switch("leaf1", {"Ethernet3": interface(pfc_rx={3: 800, 0: 4}, pfc_tx={3: 20})})
    v = verdict("pairwise", [LinkRun("h1", "h3", LINE, client_run=WRITE)], switches=[leaf])
    outcome = one(v, "PT006", "leaf1")
    assert outcome.status == "fail"
    assert outcome.messages == ("leaf1 Ethernet3 PFC rx priority 0: Expected: 0 (lossy) Actual: 4",)


def test_pause_on_lossless_priority_passes() -> None:
    leaf = switch("leaf1", {"Ethernet3": interface(pfc_rx={3: 800}, pfc_tx={3: 20})})
    v = verdict("pairwise", [LinkRun("h1", "h3", LINE, client_run=WRITE)], switches=[leaf])
    assert one(v, "PT006", "leaf1").status == "pass"


def test_nic_pause_on_lossy_priority() -> None:
    nic = replace(mlx5("h3"), tx_pause=(0, 0, 0, 90, 0, 2, 0, 0))
    v = verdict("pairwise", [LinkRun("h1", "h3", LINE, client_run=WRITE)], nics=[nic, mlx5("h1")])
    outcome = one(v, "PT006", "h3 mlx5_0/1")
    assert outcome.status == "fail"
    assert outcome.messages == ("h3 mlx5_0/1 tx_prio5_pause: Expected: 0 (lossy) Actual: 2",)


def test_nic_without_pause_counters_is_skipped() -> None:
    nic = NicDelta("h3", "rxe0/1", {"rcvd_seq_err": 0})
    v = verdict("pairwise", [LinkRun("h1", "h3", LINE, client_run=WRITE)], nics=[nic])
    assert outcomes(v, "PT006") == []


# --------------------------------------------------------------------------- PT007

# name -> (counters, status, fragment)
LOSS = {
    "mlx5 clean": ({"out_of_sequence": 0, "packet_seq_err": 0}, "pass", None),
    "mlx5 out of sequence": (
        {"out_of_sequence": 12, "packet_seq_err": 0},
        "fail",
        "out_of_sequence: Expected: 0 Actual: 12",
    ),
    "mlx5 sequence NAKs": ({"packet_seq_err": 3}, "fail", "packet_seq_err: Expected: 0 Actual: 3"),
    "rxe sequence error": (
        {"rcvd_seq_err": 5, "out_of_seq_request": 0, "retry_exceeded_err": 0},
        "fail",
        "rcvd_seq_err: Expected: 0 Actual: 5 (rxe:",
    ),
    "rxe retries ran out": ({"retry_exceeded_err": 1}, "fail", "retry_exceeded_err"),
    "no loss counter": ({"rdma_sends": 10}, "unverified", "Actual: none provided"),
}


@pytest.mark.parametrize("name", sorted(LOSS))
def test_nic_signs_of_loss(name: str) -> None:
    counters, status, fragment = LOSS[name]
    nic = NicDelta("h3", "mlx5_0/1", counters)
    v = verdict("pairwise", [LinkRun("h1", "h3", LINE, client_run=WRITE)], nics=[nic, mlx5("h1")])
    outcome = one(v, "PT007", "h3 mlx5_0/1")
    assert outcome.status == status
    if fragment:
        assert fragment in outcome.messages[0]
    assert (v.links[0].status == "fail") is (status == "fail")
    assert v.passed is (status != "fail")


def test_counter_reset_is_unverified() -> None:
    nic = NicDelta("h3", "mlx5_0/1", {"packet_seq_err": 0}, reset=("out_of_sequence",))
    v = verdict("pairwise", [LinkRun("h1", "h3", LINE, client_run=WRITE)], nics=[nic, mlx5("h1")])
    outcome = one(v, "PT007", "h3 mlx5_0/1")
    assert outcome.status == "unverified"
    assert "out_of_sequence: went backwards" in outcome.messages[0]


def test_host_without_counters() -> None:
    v = verdict("pairwise", [LinkRun("h1", "h3", LINE, client_run=WRITE)], nics=[mlx5("h1")])
    assert one(v, "PT007", "h3").status == "unverified"


def test_two_nics_on_a_host_need_the_port() -> None:
    nics = [mlx5("h3"), replace(mlx5("h3"), rdma_port="mlx5_1/1"), mlx5("h1")]
    link = LinkRun("h1", "h3", LINE, client_run=WRITE)
    with pytest.raises(ValueError, match="NIC counters of h3"):
        verdict("pairwise", [link], nics=nics)
    v = verdict("pairwise", [replace(link, server_port="mlx5_1/1")], nics=nics)
    assert one(v, "PT007", "h3 mlx5_1/1").status == "pass"


# --------------------------------------------------------------------------- overall


def test_overall_and_json() -> None:
    rxe = NicDelta("h3", "rxe0/1", {"rcvd_seq_err": 0}, access=ACCESS)
    v = cnp_case(rxe, mlx5("h1"), mlx5("h2"))
    assert {row.link: row.status for row in v.links} == {
        "h1→h3": "unverified",
        "h2→h3": "unverified",
    }
    assert v.status == "pass"
    document = json.loads(json.dumps(v.as_json()))
    assert document["status"] == "pass"
    assert document["passed"] is True
    assert document["unverified"] == ["PT005 h3 rxe0/1"]
    assert {row["link"] for row in document["links"]} == {"h1→h3", "h2→h3"}
    assert document["links"][0]["measured_bps"] == pytest.approx(46.0e9)  # base units
    assert {o["rule"] for o in document["outcomes"]} == {
        "PT002",
        "PT003",
        "PT004",
        "PT005",
        "PT006",
        "PT007",
    }


def test_a_single_failure_fails_the_verdict() -> None:
    good = verdict(
        "pairwise",
        [LinkRun("h1", "h3", LINE, client_run=WRITE)],
        switches=[CLEAN],
        nics=[mlx5("h1"), mlx5("h3")],
    )
    assert good.passed and not good.unverified
    bad = verdict(
        "pairwise",
        [LinkRun("h1", "h3", LINE, client_run=WRITE)],
        switches=[CLEAN],
        nics=[mlx5("h1"), mlx5("h3", out_of_sequence=1)],
    )
    assert bad.status == "fail"
    assert [o.rule for o in bad.failures] == ["PT007"]


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda: LinkRun("h1", "h1", LINE), "two hosts"),
        (lambda: LinkRun("h1", "h3", 0.0), "line rate: Expected: > 0"),
        (lambda: LinkRun("h1", "h3", float("nan")), "line rate"),
        (lambda: NicDelta("h1", "mlx5_0/1", {"np_cnp_sent": -1}), "a delta >= 0"),
        (lambda: NicDelta("h1", "mlx5_0/1", rx_pause=(0,) * 7), "8 deltas"),
        (lambda: AcceptanceInput("pairwise", (), (3,), 3), "at least one link"),
        (
            lambda: AcceptanceInput(
                "pairwise", (LinkRun("h1", "h3", LINE), LinkRun("h1", "h3", LINE)), (3,), 3
            ),
            "h1→h3 more than once",
        ),
        (
            lambda: AcceptanceInput(
                "pairwise", (LinkRun("h1", "h3", LINE),), (3,), 3, receiver_line_rate_bps=0.0
            ),
            "receiver line rate",
        ),
        (lambda: AcceptanceInput("pairwise", (LinkRun("h1", "h3", LINE),), (8,), 3), "priority"),
        (
            lambda: SwitchDelta(
                Counters(device="a", collected_at=0), Counters(device="b", collected_at=1)
            ),
            "one device",
        ),
    ],
)
def test_inputs_are_validated(make: object, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        make()  # type: ignore[operator]


# --------------------------------------------------------------------------- nic_delta


def test_nic_delta_from_hostnic_readings() -> None:
    before = NicCounters(
        hw={("mlx5_0", "1"): {"np_cnp_sent": 10, "out_of_sequence": 5, "rp_cnp_handled": 9}},
        pause={"ens1f0np0": PortPause(rx_frames=(0, 0, 0, 10, 0, 0, 0, 0))},
    )
    after = NicCounters(
        hw={("mlx5_0", "1"): {"np_cnp_sent": 25, "out_of_sequence": 2, "packet_seq_err": 4}},
        pause={"ens1f0np0": PortPause(rx_frames=(0, 0, 0, 50, 0, 0, 0, 0))},
    )
    delta = nic_delta("h3", "mlx5_0/1", before, after, netdev="ens1f0np0", access=ACCESS)
    assert dict(delta.counters) == {"np_cnp_sent": 15}  # only counters read both times
    assert delta.reset == ("out_of_sequence",)
    assert delta.rx_pause == (0, 0, 0, 40, 0, 0, 0, 0)
    assert delta.tx_pause == (0,) * 8
    assert delta.access == ACCESS


def test_nic_delta_without_pause_or_port() -> None:
    before = NicCounters(hw={("rxe0", "1"): {"rcvd_seq_err": 1}}, pause={"eth1": None})
    after = NicCounters(hw={("rxe0", "1"): {"rcvd_seq_err": 3}}, pause={"eth1": None})
    delta = nic_delta("vm1", "rxe0", before, after, netdev="eth1")
    assert dict(delta.counters) == {"rcvd_seq_err": 2}
    assert delta.rx_pause is delta.tx_pause is None


# --------------------------------------------------------------------------- fairness

FAIRNESS = [
    ([1.0, 1.0, 1.0], 1.0),
    ([1.0, 0.0], 0.5),
    ([1.0, 0.0, 0.0, 0.0], 0.25),
    ([44.1, 46.2, 8.9], 0.7888),
    ([0.0, 0.0], 0.0),
]


@pytest.mark.parametrize(("values", "index"), FAIRNESS)
def test_jain_table(values: list[float], index: float) -> None:
    assert jain_fairness(values) == pytest.approx(index, abs=1e-4)


@pytest.mark.parametrize("values", [[], [-1.0, 2.0], [float("inf"), 1.0]])
def test_jain_refuses(values: list[float]) -> None:
    with pytest.raises(ValueError):
        jain_fairness(values)


@given(st.lists(st.floats(0.001, 1e12), min_size=1, max_size=64), st.floats(1e-3, 1e3))
def test_jain_bounds_and_scale(values: list[float], scale: float) -> None:
    index = jain_fairness(values)
    assert 1 / len(values) - 1e-9 <= index <= 1 + 1e-9
    assert jain_fairness([v * scale for v in values]) == pytest.approx(index, rel=1e-9)


@given(st.floats(0.001, 1e12), st.integers(1, 64))
def test_jain_of_equal_shares_is_one(value: float, count: int) -> None:
    assert jain_fairness([value] * count) == pytest.approx(1.0)


def test_results_are_frozen() -> None:
    row: BwResult = WRITE.results[0]
    with pytest.raises(AttributeError):
        row.bw_average_bps = 0.0  # type: ignore[misc]


def test_a_run_of_another_test_is_not_a_measurement() -> None:
    v = verdict("pairwise", [LinkRun("h1", "h3", LINE, client_run=READ)], test="write")
    outcome = one(v, "PT001")
    assert outcome.status == "fail"
    assert "a RDMA_Read run where write was to be judged" in outcome.messages[0]


def test_descriptions_are_whole_sentences() -> None:
    v = verdict("pairwise", [LinkRun("h1", "h3", LINE, client_run=WRITE)])
    assert one(v, "PT001").description == (
        "Each pair (each direction of -b) averages at least min_line_rate_fraction of its port "
        "speed."
    )
