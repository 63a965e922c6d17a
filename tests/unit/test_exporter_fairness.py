"""The exporter's shares per client address (exporters/fairness.py) and its pages
(exporters/pages.py): turns for bcrypt checks by the address served least recently, at most
one per address, none after close; page bytes in flight per address; gzip of a page whose
head repeats, read back by every gzip reader at hand."""

from __future__ import annotations

import gzip
import random
import shutil
import subprocess
import threading
import time
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exporters.fairness import PasswordChecks, ResponseBudget
from exporters.pages import GzipPages, Page


def hold_turn(
    checks: PasswordChecks, address: str, served: list[tuple[str, threading.Event]]
) -> threading.Event:
    """A thread that takes a turn for ``address``, notes it in ``served`` and holds it until
    the event returned is set."""
    release = threading.Event()

    def run() -> None:
        with checks.turn(address, lambda: False) as ok:
            if ok:
                served.append((address, release))
                release.wait(10)

    threading.Thread(target=run, daemon=True).start()
    return release


def wait_until(predicate, timeout: float = 5) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


@pytest.mark.parametrize(
    ("arrivals", "turns"),
    [
        # One address floods: it holds one turn, the other goes to the newcomer at once.
        (["flood"] * 6 + ["prometheus"], ["flood", "prometheus"]),
        # Two flooding addresses: the newcomer (never served) goes before the first one again.
        (["a", "a", "b", "b", "prometheus"], ["a", "b", "prometheus"]),
        # Never served, in arrival order; then the least recently served.
        (["a", "a", "b", "b", "c", "prometheus"], ["a", "b", "c", "prometheus", "a"]),
        # Never two at once for one address, even with a turn free.
        (["a", "a", "a", "b"], ["a", "b", "a"]),
    ],
)
def test_turns_go_to_the_address_served_least_recently(
    arrivals: list[str], turns: list[str]
) -> None:
    checks = PasswordChecks(at_once=2, per_address=1)
    served: list[tuple[str, threading.Event]] = []
    events = []
    for address in arrivals:
        events.append(hold_turn(checks, address, served))
        time.sleep(0.03)  # the arrival order
    wait_until(lambda: len(served) == 2)
    while len(served) < len(turns):
        done = len(served)
        served[done - 2][1].set()  # the older of the two checks running ends
        wait_until(lambda: len(served) == done + 1)  # noqa: B023 -- called in this turn
    time.sleep(0.1)
    assert [address for address, _ in served] == turns
    for event in events:
        event.set()


def test_a_cut_waiter_leaves_the_queue_and_close_waits_for_running_checks() -> None:
    checks = PasswordChecks(at_once=1, per_address=1)
    served: list[tuple[str, threading.Event]] = []
    release = hold_turn(checks, "a", served)
    wait_until(lambda: len(served) == 1)
    cut = threading.Event()
    outcome: list[bool] = []

    def waiter() -> None:
        with checks.turn("b", cut.is_set) as ok:
            outcome.append(ok)

    thread = threading.Thread(target=waiter)
    thread.start()
    cut.set()
    thread.join(2)
    assert outcome == [False]
    started = time.monotonic()
    threading.Timer(0.3, release.set).start()
    assert checks.close(5)  # waited for "a" to end its check
    assert 0.25 < time.monotonic() - started < 2
    with checks.turn("c", lambda: False) as ok:
        assert not ok  # closed: no new check
    assert PasswordChecks().close(0)  # nothing running: True at once


def test_close_gives_up_at_its_timeout() -> None:
    checks = PasswordChecks()
    served: list[tuple[str, threading.Event]] = []
    release = hold_turn(checks, "a", served)
    wait_until(lambda: len(served) == 1)
    started = time.monotonic()
    assert not checks.close(0.2)
    assert time.monotonic() - started < 1
    release.set()


@pytest.mark.parametrize(
    ("budget", "sizes", "taken"),
    [
        (100, [60, 60], [True, False]),
        (100, [60, 40], [True, True]),
        (100, [500, 1], [True, False]),  # one page always fits, nothing beside it
        (100, [500], [True]),
    ],
)
def test_page_bytes_in_flight_per_address(budget: int, sizes: list[int], taken: list[bool]) -> None:
    budget_of = ResponseBudget(budget)
    assert [budget_of.take("a", size) for size in sizes] == taken
    assert budget_of.take("b", budget * 10)  # another address has its own budget
    for size, took in zip(sizes, taken, strict=True):
        if took:
            budget_of.give_back("a", size)
    assert budget_of.take("a", budget)


@settings(max_examples=60, deadline=None)
@given(
    heads=st.lists(st.binary(max_size=5000), min_size=1, max_size=3),
    tails=st.lists(st.binary(max_size=300), min_size=1, max_size=4),
)
def test_gzip_of_pages_reads_back_whatever_repeats(heads: list[bytes], tails: list[bytes]) -> None:
    pages = GzipPages()
    rng = random.Random(len(heads) * 31 + len(tails))
    for _ in range(6):
        page = Page(rng.choice(heads), rng.choice(tails))
        packed = pages.compress(page)
        assert gzip.decompress(packed) == page.text()
        # What urllib3 and browsers use: zlib with the gzip wrapper, one member.
        reader = zlib.decompressobj(16 + zlib.MAX_WBITS)
        assert reader.decompress(packed) == page.text() and reader.eof and not reader.unused_data


def test_a_repeated_head_is_compressed_once_and_gzip_reads_the_result(tmp_path) -> None:  # type: ignore[no-untyped-def]
    head = b"".join(
        b'roce_queue_transmitted_packets_total{device="leaf%d"} %d\n' % (i, i * 7)
        for i in range(40_000)
    )
    pages = GzipPages()
    first = pages.compress(Page(head, b"tail 1\n"))
    started = time.perf_counter()
    second = pages.compress(Page(head, b"tail 2\n"))
    repeat_s = time.perf_counter() - started
    started = time.perf_counter()
    GzipPages().compress(Page(head, b"tail 2\n"))
    fresh_s = time.perf_counter() - started
    assert gzip.decompress(first) == head + b"tail 1\n"
    assert gzip.decompress(second) == head + b"tail 2\n"
    assert repeat_s < fresh_s / 3, (repeat_s, fresh_s)
    if shutil.which("gzip"):
        path = tmp_path / "page.gz"
        path.write_bytes(second)
        out = subprocess.run(["gzip", "-dc", str(path)], capture_output=True, check=True).stdout
        assert out == head + b"tail 2\n"
