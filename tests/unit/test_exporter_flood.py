"""Issue #33: one client floods the exporter with slow connections and keeps reopening them;
Prometheus, from another address, must not notice.

Real sockets on loopback, the real server with its default limits: 127.0.0.1 opens 400
connections at once, each sends half a request head and waits, and every one the exporter
refuses or cuts is reopened (at most 200 a second); meanwhile 127.0.0.2 scrapes once a second
for 30 s, each scrape with Prometheus' 1 s budget. Every scrape must answer 200 in time."""

from __future__ import annotations

import http.client
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from prometheus_client.registry import CollectorRegistry

from exporters.server import MetricsServer, ServerLimits

REPO = Path(__file__).resolve().parents[2]
ATTACKER, SCRAPER = "127.0.0.1", "127.0.0.2"
SOCKETS, REOPEN_PER_S = 400, 200
SCRAPES, SCRAPE_TIMEOUT_S = 30, 1.0
# About the text a mid-size fabric serves per scrape: the answer is not free to send.
BODY = b"".join(
    b'roce_queue_transmitted_packets_total{fabric="lab",device="leaf%d",interface="Ethernet%d",'
    b'queue="3"} 12345678\n' % (n // 64, n % 64)
    for n in range(16_000)
)


def scrape(address: tuple[str, int]) -> tuple[int | str, float]:
    started = time.monotonic()
    conn = http.client.HTTPConnection(
        *address, timeout=SCRAPE_TIMEOUT_S, source_address=(SCRAPER, 0)
    )
    try:
        conn.request("GET", "/metrics")
        response = conn.getresponse()
        response.read()
        status: int | str = response.status
    except OSError as exc:
        status = type(exc).__name__
    finally:
        conn.close()
    return status, time.monotonic() - started


def test_scrapes_from_another_address_all_succeed_while_one_address_floods() -> None:
    limits = ServerLimits()  # what `roce-agent exporter` serves with
    server = MetricsServer(CollectorRegistry(), ("127.0.0.1", 0), fast_text=lambda: BODY)
    server.start()
    flood = subprocess.Popen(
        [sys.executable, "-m", "tests.unit.slow_clients", *map(str, server.address), ATTACKER,
         str(SOCKETS), str(REOPEN_PER_S), str(SCRAPES + 2)],
        cwd=REPO, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    results, busiest = [], 0
    try:
        deadline = time.monotonic() + 10  # the flood's first burst is in
        while server.stats.slots.busiest() < limits.max_connections_per_address:
            assert time.monotonic() < deadline and flood.poll() is None, "no flood"
            time.sleep(0.05)
        for n in range(SCRAPES):
            next_at = time.monotonic() + 1.0
            results.append(scrape(server.address))
            busiest = max(busiest, server.stats.slots.busiest())
            if n < SCRAPES - 1:
                time.sleep(max(0.0, next_at - time.monotonic()))
        assert flood.poll() is None, "the flood ended before the scrapes"
        out, _ = flood.communicate(timeout=15)
    finally:
        if flood.poll() is None:
            flood.kill()
            flood.wait()
        server.stop()
    counts = json.loads(out)
    took = [seconds for _, seconds in results]
    summary = (
        f"{len(results)} scrapes: statuses {sorted({str(s) for s, _ in results})}, "
        f"median {statistics.median(took):.3f} s, max {max(took):.3f} s; flood {counts}; "
        f"server {server.stats.bad}"
    )
    print(summary)
    assert all(status == 200 for status, _ in results), summary
    assert max(took) < SCRAPE_TIMEOUT_S, summary
    # The flood was real: it held its address's cap, and was refused and cut again and again.
    assert busiest == limits.max_connections_per_address, summary
    assert counts["held_max"] == SOCKETS and counts["opened"] > 5 * SOCKETS, summary
    assert server.stats.bad["address_cap"] > 1000 and server.stats.bad["evicted"] > 100, summary
    assert server.stats.bad["connection_cap"] == 0, summary
