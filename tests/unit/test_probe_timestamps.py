"""Receive timestamps as close to the NIC as the host offers (issue #30, item 4): what the
kernel is asked for, the fallback when it refuses, which stamp each frame is read with, the
host's delay, and the receiver reporting all of it per flow."""

from __future__ import annotations

import os
import socket
import struct
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.observe.probes import receiver
from agent.observe.probes.packets import Flow, RoceTemplate
from agent.observe.probes.timestamps import (
    HARDWARE_FLAGS,
    HOST_DELAY_BUCKETS_S,
    SCM_TIMESTAMPING,
    SOF_TIMESTAMPING_RX_HARDWARE,
    SOFTWARE_FLAGS,
    HostDelay,
    enable_rx_timestamps,
    kernel_stamp,
    receive,
    weakest,
)

NOW = 1_700_000_000 * 10**9


def scm(software_ns: int = 0, hardware_ns: int = 0) -> tuple[int, int, bytes]:
    """SCM_TIMESTAMPING ancillary data: ts[0] software, ts[1] unused, ts[2] raw hardware."""
    spec = [divmod(ns, 10**9) for ns in (software_ns, 0, hardware_ns)]
    return socket.SOL_SOCKET, SCM_TIMESTAMPING, b"".join(struct.pack("@qq", *t) for t in spec)


@pytest.mark.parametrize(
    ("ancillary", "expected"),
    [
        pytest.param([], (None, "user"), id="none"),
        pytest.param([scm(NOW - 5000)], (NOW - 5000, "software"), id="software"),
        pytest.param([scm(NOW - 5000, NOW - 7000)], (NOW - 7000, "hardware"), id="hardware"),
        # A PHC left in TAI is 37 s ahead of the system clock: not a delay, another clock.
        pytest.param(
            [scm(NOW - 5000, NOW + 37 * 10**9)], (NOW - 5000, "software"), id="hardware-tai"
        ),
        pytest.param([scm(0, NOW + 37 * 10**9)], (None, "user"), id="only-foreign-clock"),
        pytest.param([(socket.SOL_SOCKET, 99, scm(NOW)[2])], (None, "user"), id="other-cmsg"),
        pytest.param(
            [(socket.SOL_SOCKET, SCM_TIMESTAMPING, b"\0" * 8)], (None, "user"), id="short"
        ),
    ],
)
def test_each_frame_is_read_with_the_stamp_closest_to_the_nic(
    ancillary: list[tuple[int, int, bytes]], expected: tuple[int | None, str]
) -> None:
    assert kernel_stamp(ancillary, NOW) == expected


class OptionSocket:
    """Refuses the SO_TIMESTAMPING flag sets it is told to (an older kernel, a socket type
    without timestamping), records what it was set to."""

    def __init__(self, refuse: set[int]) -> None:
        self.refuse = refuse
        self.set: list[int] = []

    def setsockopt(self, level: int, option: int, value: int) -> None:
        if value in self.refuse:
            raise OSError(22, "Invalid argument")
        self.set.append(value)


@pytest.mark.parametrize(
    ("refuse", "granted", "last_set"),
    [
        (set(), "hardware", HARDWARE_FLAGS | SOFTWARE_FLAGS),
        ({HARDWARE_FLAGS | SOFTWARE_FLAGS}, "software", SOFTWARE_FLAGS),
        ({HARDWARE_FLAGS | SOFTWARE_FLAGS, SOFTWARE_FLAGS}, "user", None),
    ],
)
def test_the_timestamp_source_falls_back_hardware_software_user(
    refuse: set[int], granted: str, last_set: int | None
) -> None:
    sock = OptionSocket(refuse)
    assert enable_rx_timestamps(sock) == granted
    assert (sock.set[-1] if sock.set else None) == last_set


def test_a_real_socket_gets_kernel_software_stamps_before_user_space_reads() -> None:
    """Loopback UDP: the kernel stamps in software (no NIC hardware clock); granted hardware
    on the socket, each frame still says it carried only the software stamp.

    The kernel turns receive stamping on for the whole stack through deferred work
    (net/core/dev.c, net_enable_timestamp: a static key flipped from a workqueue when no
    other socket has stamping on), so the first frames after the option is set may come
    unstamped on a busy machine; those read as "user", and the stamped ones follow."""
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    seen: list[str] = []
    try:
        rx.bind(("127.0.0.1", 0))
        assert enable_rx_timestamps(rx) in ("hardware", "software")
        rx.settimeout(5)
        for _ in range(50):
            before = time.time_ns()
            tx.sendto(b"probe", rx.getsockname())
            time.sleep(0.02)  # the frame waits in the socket: user space reads it late
            frame, user_ns, kernel_ns, source = receive(rx)
            seen.append(source)
            if source == "software":
                break
    finally:
        rx.close()
        tx.close()
    assert frame == b"probe"
    assert source == "software", seen
    assert set(seen) <= {"user", "software"}
    assert kernel_ns is not None
    assert before <= kernel_ns <= user_ns
    assert user_ns - kernel_ns >= 10_000_000  # the 20 ms the frame waited


def test_host_delay_quantile_and_kernel_latency() -> None:
    delay = HostDelay()
    sent = NOW - 1_000_000
    for i in range(100):
        kernel = NOW + i * 1000
        held_ms = 20 if i % 10 < 3 else 0.02  # 30 % of frames held 20 ms (a stalled host)
        delay.observe(kernel + int(held_ms * 1e6), kernel, "software", sent)
    out = delay.as_dict()
    assert out["timestamp_source"] == "software"
    assert out["host_delay"]["count"] == 100
    assert out["host_delay"]["p90_s"] == 0.025  # the bucket holding 20 ms
    assert delay.quantile_s(0.5) == 0.00005
    assert out["kernel_latency"]["min_s"] == pytest.approx(0.001)


def test_a_flow_with_any_user_space_frame_is_a_user_space_flow() -> None:
    delay = HostDelay()
    delay.observe(NOW, NOW - 10, "hardware", NOW - 100)
    delay.observe(NOW, None, "user", NOW - 100)
    assert delay.source == "user"
    assert delay.count == 1  # only stamped frames count towards the host delay
    assert weakest([]) == "user"
    assert weakest(["hardware", "software"]) == "software"


FLOW = Flow("02:00:00:00:00:01", "02:00:00:00:00:02", "10.0.0.1", "10.0.0.2", qpn=0x12)


class StampingPort:
    """The receiver's AF_PACKET socket with the kernel stamping every frame in software,
    user space reading each one ``held_ns`` later."""

    def __init__(self, frames: list[tuple[bytes, int]], readable_fd: int, held_ns: int) -> None:
        self.frames = list(frames)
        self.readable_fd = readable_fd
        self.held_ns = held_ns
        self.flags: int | None = None

    def setsockopt(self, level: int, option: int, value: int) -> None:
        if value & SOF_TIMESTAMPING_RX_HARDWARE:
            raise OSError(22, "Invalid argument")  # a kernel that grants software only
        self.flags = value

    def recvmsg(self, size: int, space: int) -> tuple[bytes, list[Any], int, None]:
        if not self.frames:
            raise BlockingIOError
        frame, _ = self.frames.pop(0)
        return frame, [scm(time.time_ns() - self.held_ns)], 0, None

    def send(self, frame: bytes) -> int:
        return len(frame)

    def fileno(self) -> int:
        return self.readable_fd

    def close(self) -> None: ...


def test_the_receiver_reports_source_kernel_latency_and_host_delay_per_flow(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    template = RoceTemplate(FLOW)
    sent_ns = time.time_ns() - 40_000_000  # stamped by the kernel 10 ms later
    frames = [(template.frame(i, i, sent_ns), sent_ns) for i in range(20)]
    read_end, write_end = os.pipe()
    os.write(write_end, b"x")
    port = StampingPort(frames, read_end, held_ns=30_000_000)
    monkeypatch.setattr(receiver, "open_port", lambda ifname, bpf=None: port)
    monkeypatch.setattr(receiver, "interface_mac", lambda ifname: FLOW.dst_mac)
    try:
        result = receiver.run_receiver(
            receiver.ReceiveSpec(ifname="eth1", duration_s=0.2, link_speed_bps=10**7)
        )
    finally:
        os.close(read_end)
        os.close(write_end)
    assert result["timestamps_granted"] == "software"
    assert result["timestamp_source"] == "software"
    (flow,) = result["flows"]
    assert flow["received"] == 20
    assert flow["timestamp_source"] == "software"
    assert flow["host_delay"]["p90_s"] == 0.05  # 30 ms held: the (25, 50] ms bucket
    # Kernel latency leaves the 30 ms out; the user-space one includes it.
    assert flow["kernel_latency"]["min_s"] < flow["latency"]["min_s"] - 0.025


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    delays_us=st.lists(st.integers(min_value=0, max_value=2_000_000), min_size=1, max_size=200),
    q=st.sampled_from([0.5, 0.9, 0.99]),
)
def test_the_host_delay_quantile_is_the_bucket_bound_just_above_the_true_one(
    delays_us: list[int], q: float
) -> None:
    """The reported quantile bounds the true one from above by at most one bucket: at least
    a share ``q`` of the delays are at or below it, and fewer below the bucket before."""
    delay = HostDelay()
    for us in delays_us:
        delay.observe(NOW + us * 1000, NOW, "software", 0)
    bound = delay.quantile_s(q)
    seconds = [us / 1e6 for us in delays_us]
    if bound is None:  # beyond the last bucket
        assert sum(s <= HOST_DELAY_BUCKETS_S[-1] for s in seconds) < q * len(seconds)
        return
    assert sum(s <= bound for s in seconds) >= q * len(seconds)
    index = HOST_DELAY_BUCKETS_S.index(bound)
    if index:
        below = HOST_DELAY_BUCKETS_S[index - 1]
        assert sum(s <= below for s in seconds) < q * len(seconds)
