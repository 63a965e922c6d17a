"""The gNMI client against a real gRPC server that plays a switch (tests/unit/gnmi_support.py):
TLS, credentials, the subscription it sends, and every way a switch can fail it -- each ends
the stream with its reason, never a hang."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from pygnmi.spec.v080 import gnmi_pb2

from agent.device.gnmi import profile_for
from agent.device.gnmi import stream as stream_module
from agent.device.gnmi.stream import (
    Backoff,
    Endpoint,
    StreamFailure,
    Subscriber,
    probe,
    subscribe_once,
)
from agent.device.state import Counters
from agent.errors import AgentError
from agent.intent.loader import load_fabric
from exporters.exporter import Exporter, ExporterOptions
from tests.unit.gnmi_support import (
    PASSWORD,
    USERNAME,
    Pki,
    ScriptedServer,
    make_pki,
    notification,
    sync,
)

SONIC = profile_for("sonic")
assert SONIC is not None
PORTS = {"Ethernet0": {"SAI_PORT_STAT_PFC_3_RX_PKTS": "5", "SAI_PORT_STAT_PFC_3_TX_PKTS": "1"}}


@pytest.fixture(scope="module")
def pki() -> Pki:
    return make_pki("leaf1")


def now_ns(offset_s: float = 0.0) -> int:
    return int((time.time() + offset_s) * 1e9)


def sonic_sample(pfc_rx: int = 5, offset_s: float = 0.0) -> Any:
    ports = {"Ethernet0": {**PORTS["Ethernet0"], "SAI_PORT_STAT_PFC_3_RX_PKTS": str(pfc_rx)}}
    value = {"json_ietf_val": json.dumps(ports).encode()}
    return notification([("COUNTERS/Ethernet*", value)], now_ns(offset_s), target="COUNTERS_DB")


async def samples_forever(request: Any, context: Any) -> AsyncIterator[Any]:
    """A SONiC switch: a full sample, sync_response, then a sample every 50 ms, counting up."""
    yield sonic_sample(5)
    yield sync()
    count = 5
    while True:
        await asyncio.sleep(0.05)
        count += 1
        yield sonic_sample(count)


def endpoint(server: ScriptedServer, pki: Pki | None, **changes: Any) -> Endpoint:
    fields: dict[str, Any] = {
        "device": "leaf1",
        "address": server.address,
        "username": USERNAME,
        "password": PASSWORD,
        "server_name": "leaf1",
        "ca_pem": pki.ca_pem if pki else None,
        "plaintext": pki is None,
    }
    fields.update(changes)
    return Endpoint(**fields)


def run_until(end: Endpoint, wanted: int = 3, timeout_s: float = 10.0) -> list[Counters]:
    """Subscribe until ``wanted`` snapshots arrived (then cancel); failures propagate."""
    got: list[Counters] = []

    async def main() -> None:
        subscriber = Subscriber(end, SONIC, 0.05, lambda c, _new: got.append(c))
        task = asyncio.create_task(subscribe_once(subscriber))
        deadline = time.monotonic() + timeout_s
        while len(got) < wanted and not task.done() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        if task.done():
            task.result()  # raises the StreamFailure
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(main())
    return got


def failure_of(end: Endpoint) -> StreamFailure:
    with pytest.raises(StreamFailure) as caught:
        run_until(end, wanted=1000, timeout_s=15)
    return caught.value


def test_tls_subscription_streams_counters(pki: Pki) -> None:
    with ScriptedServer(samples_forever, pki) as server:
        got = run_until(endpoint(server, pki))
        request = server.servicer.requests[0].subscribe
    assert got[-1].interfaces["Ethernet0"].pfc_rx[3] > 5  # they move
    assert got[0].device == "leaf1" and "headroom_drops" in got[0].unread
    assert request.prefix.target == "" and request.mode == gnmi_pb2.SubscriptionList.STREAM
    assert request.encoding == gnmi_pb2.Encoding.Value("JSON_IETF")
    first = request.subscription[0]
    assert first.path.target == "COUNTERS_DB" and [e.name for e in first.path.elem] == [
        "COUNTERS",
        "Ethernet*",
    ]
    assert first.mode == gnmi_pb2.SubscriptionMode.SAMPLE and first.sample_interval == 50_000_000


def test_plaintext_only_when_asked() -> None:
    with ScriptedServer(samples_forever, None) as server:
        assert run_until(endpoint(server, None))


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"password": "wrong"}, "auth"),
        ({"username": "nobody"}, "auth"),
        ({"server_name": "spine9"}, "connect"),  # the certificate names leaf1
        ({"ca_pem": make_pki("leaf1").ca_pem}, "connect"),  # another CA signed nothing here
        ({"plaintext": True}, "connect"),  # a TLS server spoken to in clear
    ],
    ids=["password", "username", "server name", "another CA", "plain text to TLS"],
)
def test_refused_before_any_counter(pki: Pki, changes: dict[str, Any], reason: str) -> None:
    with ScriptedServer(samples_forever, pki) as server:
        failure = failure_of(endpoint(server, pki, **changes))
    assert failure.reason == reason, failure.detail


def test_nothing_listening_is_connect() -> None:
    with ScriptedServer(samples_forever, None) as server:
        address = server.address
    failure = failure_of(Endpoint("leaf1", address, USERNAME, PASSWORD, plaintext=True))
    assert failure.reason == "connect"


async def _then(first: list[Any], then: Any, context: Any) -> AsyncIterator[Any]:
    for item in first:
        # Built when sent, not when the test module was collected: its timestamp is now.
        yield item() if callable(item) else item
    if then is not None:
        async for item in then(context):
            yield item


def script(*first: Any, then: Any = None) -> Any:
    """Send ``first``, then what ``then(context)`` yields."""

    def run(request: Any, context: Any) -> AsyncIterator[Any]:
        return _then(list(first), then, context)

    return run


def abort(code: grpc.StatusCode, text: str) -> Any:
    async def aborting(context: Any) -> AsyncIterator[Any]:
        await context.abort(code, text)
        yield sync()  # never reached: abort raises

    return aborting


def _malformed() -> Any:
    value = {"json_ietf_val": b"{this is not json"}
    return notification([("COUNTERS/Ethernet*", value)], now_ns(), target="COUNTERS_DB")


def _unasked() -> Any:
    value = {"json_ietf_val": b"{}"}
    return notification([("COUNTERS_PORT_NAME_MAP", value)], now_ns(), target="COUNTERS_DB")


def _oversized() -> Any:
    value = {"json_ietf_val": json.dumps({"Ethernet0": {"X": "y" * (5 << 20)}}).encode()}
    return notification([("COUNTERS/Ethernet*", value)], now_ns(), target="COUNTERS_DB")


async def _silent(context: Any) -> AsyncIterator[Any]:
    await asyncio.sleep(3600)
    yield sync()


async def _ended(context: Any) -> AsyncIterator[Any]:
    return
    yield


BAD_SWITCHES = [
    ("malformed JSON", script(_malformed), "parse", "does not parse"),
    ("a path nobody asked for", script(sonic_sample, sync, _unasked), "parse",
     "not subscribed"),
    ("a stale sample", script(lambda: sonic_sample(offset_s=-3600)), "stale", "old"),
    ("a sample from the future", script(lambda: sonic_sample(offset_s=3600)), "stale", "future"),
    ("an oversized message", script(_oversized), "oversized", "RESOURCE_EXHAUSTED"),
    ("reset after its first sample", script(sonic_sample, sync,
     then=abort(grpc.StatusCode.UNAVAILABLE, "going away")), "reset", "going away"),
    ("ended after its first sample", script(sonic_sample, sync, then=_ended), "reset",
     "ended the subscription"),
    ("an unknown path refused", script(then=abort(grpc.StatusCode.NOT_FOUND,
     "no such path COUNTERS/Ethernet*")), "unsupported", "no such path"),
    ("silent after sync", script(sonic_sample, sync, then=_silent), "stale", "no sample"),
    ("an error response", script(gnmi_pb2.SubscribeResponse(error=gnmi_pb2.Error(message="x"))),
     "other", "sent an error"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "behaviour", "reason", "detail"), BAD_SWITCHES, ids=[c[0] for c in BAD_SWITCHES]
)
def test_bad_switches_end_the_stream_with_a_reason(
    pki: Pki, monkeypatch: pytest.MonkeyPatch, case: str, behaviour: Any, reason: str, detail: str
) -> None:
    monkeypatch.setattr(stream_module, "silence_limit", lambda interval_s: 1.0)
    with ScriptedServer(behaviour, pki) as server:
        started = time.monotonic()
        failure = failure_of(endpoint(server, pki))
    assert (failure.reason, time.monotonic() - started < 8) == (reason, True)
    assert detail in failure.detail


def test_probe(pki: Pki) -> None:
    with ScriptedServer(samples_forever, pki) as server:
        assert asyncio.run(probe(endpoint(server, pki), 5)) is None
        # Wrong credentials: it does speak gNMI (auto subscribes, and says auth).
        assert asyncio.run(probe(endpoint(server, pki, password="x"), 5)) is None
        server.servicer.refuse = True
        assert "UNAVAILABLE" in str(asyncio.run(probe(endpoint(server, pki), 5)))


def test_backoff_grows_with_jitter_and_resets() -> None:
    import random

    backoff = Backoff(first_s=1.0, most_s=8.0)
    rng = random.Random(1)
    delays = [backoff.next_delay(rng) for _ in range(6)]
    ceilings = [1, 2, 4, 8, 8, 8]
    assert all(c / 2 <= d <= c for d, c in zip(delays, ceilings, strict=True))
    backoff.reset()
    assert backoff.next_delay(rng) <= 1.0


# --------------------------------------------------------------------------- the exporter


def fabric(tmp_path: Path, devices: list[dict[str, Any]]) -> Path:
    path = tmp_path / "fabric.yml"
    ports = [{"name": "Ethernet0", "speed": "100G", "cable_m": 1, "mtu": 9000}]
    path.write_text(
        yaml.safe_dump(
            {
                "name": "gnmi",
                "profile": "nvidia-default",
                "defaults": {
                    "username": USERNAME,
                    "credentials": {"password_env": "ROCE_GNMI_TEST_PASSWORD"},
                },
                "devices": [
                    {"role": "leaf", "host": "127.0.0.1", "port": 2200 + i, "ports": ports, **d}
                    for i, d in enumerate(devices)
                ],
            }
        )
    )  # fmt: skip
    return path


@pytest.fixture
def password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROCE_GNMI_TEST_PASSWORD", PASSWORD)


def wait_for(condition: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.mark.usefixtures("password")
def test_exporter_streams_one_switch_while_another_hangs(tmp_path: Path, pki: Pki) -> None:
    (tmp_path / "ca.pem").write_bytes(pki.ca_pem)
    with (
        ScriptedServer(samples_forever, pki) as good,
        ScriptedServer(script(then=_silent), pki) as hung,
    ):
        tls = {"ca": "ca.pem", "server_name": "leaf1"}  # relative to the fabric file
        path = fabric(tmp_path, [
            {"name": "leaf1", "platform": "sonic", "gnmi": {"port": good.port, "tls": tls}},
            {"name": "leaf2", "platform": "sonic", "gnmi": {"port": hung.port, "tls": tls}},
            {"name": "leaf3", "platform": "cisco_nxos", "ports": [
                {"name": "Ethernet1/1", "speed": "100G", "cable_m": 1, "mtu": 9000}]},
        ])  # fmt: skip
        options = ExporterOptions(listen=None, interval_s=0.2, host_nic=False, telemetry="gnmi",
                                  drift=False, ssh_complement=False)  # fmt: skip
        with Exporter(load_fabric(path).intent, options) as exporter:
            wait_for(lambda: exporter.store.snapshot().devices["leaf1"].status.up)
            text = exporter.exposition_text().decode()
    assert 'roce_device_telemetry_info{device="leaf1",fabric="gnmi",transport="gnmi"} 1.0' in text
    assert 'roce_pfc_frames_total{device="leaf1",direction="rx",fabric="gnmi"' in text
    assert 'roce_device_state{device="leaf3",fabric="gnmi",state="unsupported"} 1.0' in text
    assert 'roce_device_up{device="leaf2",fabric="gnmi"} 0.0' in text
    # Read over gNMI: no headroom series for SONiC (not published there), not zeros.
    assert 'roce_headroom_dropped_packets_total{device="leaf1"' not in text
    assert exporter.jobs == []  # no SSH at all: drift and the SSH complement off


@pytest.mark.usefixtures("password")
def test_auto_streams_where_gnmi_answers_and_polls_the_rest(tmp_path: Path, pki: Pki) -> None:
    with ScriptedServer(samples_forever, None) as good:
        path = fabric(tmp_path, [
            {"name": "leaf1", "platform": "sonic", "gnmi": {"port": good.port}},
            {"name": "leaf2", "platform": "sonic", "port": 1, "gnmi": {"port": 1}},
        ])  # fmt: skip
        options = ExporterOptions(
            listen=None, interval_s=0.2, host_nic=False, telemetry="auto", insecure=True
        )
        exporter = Exporter(load_fabric(path).intent, options)
    statuses = exporter.store.snapshot().devices
    assert (statuses["leaf1"].status.transport, statuses["leaf2"].status.transport) == (
        "gnmi",
        "ssh",
    )
    polled = {job.name: job.counters for job in exporter.jobs}  # type: ignore[attr-defined]
    assert polled == {"leaf1": False, "leaf2": True}  # leaf1: drift only over SSH


@pytest.mark.usefixtures("password")
@pytest.mark.parametrize(
    ("ca", "message"),
    [("missing.pem", "no such file"), ("notpem.pem", "holds no PEM certificate")],
)
def test_unreadable_ca_is_an_error_naming_device_and_field(
    tmp_path: Path, ca: str, message: str
) -> None:
    (tmp_path / "notpem.pem").write_text("hello\n")
    path = fabric(tmp_path, [{"name": "leaf1", "platform": "sonic", "gnmi": {"tls": {"ca": ca}}}])
    options = ExporterOptions(listen=None, host_nic=False, telemetry="gnmi")
    with pytest.raises(AgentError, match=rf"device leaf1: gnmi.tls.ca: .*{message}"):
        Exporter(load_fabric(path).intent, options)


def test_bad_telemetry_mode_named() -> None:
    with pytest.raises(AgentError, match="--telemetry"):
        ExporterOptions(telemetry="snmp").owned_switches(None)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- the fabric file


@pytest.mark.usefixtures("password")
def test_defaults_give_every_switch_gnmi_with_a_ca_relative_to_the_file(tmp_path: Path) -> None:
    leaf2 = {"name": "leaf2", "platform": "sonic", "gnmi": {"port": 50051}}
    path = fabric(tmp_path, [{"name": "leaf1", "platform": "sonic"}, leaf2])
    data = yaml.safe_load(path.read_text())
    data["defaults"]["gnmi"] = {"tls": {"ca": "pki/ca.pem", "server_name": "fabric.example"}}
    path.write_text(yaml.safe_dump(data))
    devices = {d.name: d for d in load_fabric(path).intent.devices}
    leaf1, leaf2 = devices["leaf1"].gnmi, devices["leaf2"].gnmi
    assert leaf1 is not None and leaf1.tls.ca == tmp_path / "pki" / "ca.pem"
    assert leaf1.port is None and leaf1.tls.server_name == "fabric.example"
    assert leaf2 is not None and leaf2.port == 50051 and leaf2.tls.ca is None  # its own block


@pytest.mark.usefixtures("password")
@pytest.mark.parametrize(
    ("gnmi", "message"),
    [
        ({"port": 0}, r"devices\[0\]\.gnmi\.port"),
        ({"port": 70000}, r"devices\[0\]\.gnmi\.port"),
        ({"tls": "on"}, r"devices\[0\]\.gnmi\.tls"),
        ({"tls": {"ca": "x.pem", "verify": False}}, r"devices\[0\]\.gnmi\.tls\.verify"),
        ({"insecure": True}, r"devices\[0\]\.gnmi\.insecure"),
    ],
)
def test_bad_gnmi_blocks_are_refused_where_written(
    tmp_path: Path, gnmi: dict[str, Any], message: str
) -> None:
    path = fabric(tmp_path, [{"name": "leaf1", "platform": "sonic", "gnmi": gnmi}])
    with pytest.raises(Exception, match=message) as caught:
        load_fabric(path)
    assert "fabric.yml:" in str(caught.value)  # file:line of the bad value
