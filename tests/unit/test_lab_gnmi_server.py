"""The lab switch's gNMI server over real gRPC and TLS: a grpc.aio server on 127.0.0.1 with a
certificate from a CA made in the test's folder, a fake data plane whose counters a test
changes, and a real client (grpc + the pygnmi protobufs), as a collector would talk to it.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from pygnmi.spec.v080 import gnmi_pb2

from lab.mgmt.gnmi import paths
from lab.mgmt.gnmi.faults import GnmiFaults
from lab.mgmt.gnmi.server import Limits
from tests.unit.lab_gnmi_support import (
    METADATA,
    Pki,
    Stream,
    leaves,
    make_pki,
    run,
    serving,
    subscribe_request,
)

STREAM, ONCE, POLL = (gnmi_pb2.SubscriptionList.STREAM, gnmi_pb2.SubscriptionList.ONCE,
                      gnmi_pb2.SubscriptionList.POLL)  # fmt: skip
SAMPLE, ON_CHANGE = gnmi_pb2.SubscriptionMode.SAMPLE, gnmi_pb2.SubscriptionMode.ON_CHANGE
PROTO, JSON_IETF = gnmi_pb2.Encoding.PROTO, gnmi_pb2.Encoding.JSON_IETF
SONIC_PFC3 = "COUNTERS/Ethernet0/SAI_PORT_STAT_PFC_3_RX_PKTS"
NVUE_PAUSE = ("/qos/interfaces/interface[interface-id=swp1]/switch-priority[priority=3]/state"
              "/counters/in-pause-pkts")  # fmt: skip
EOS_FRAMES = "/interfaces/interface[name=Ethernet1]/ethernet/pfc/priorities/priority[index=3]/state"
EOS_STUCK = ("/interfaces/interface[name=Ethernet1]/ethernet/pfc/watchdog/tx-queues"
             "/tx-queue[index=3][queue-type=UNICAST]/state/stuck-count")  # fmt: skip
# One documented path per NOS, with the request's target.
PER_NOS = {
    "sonic": (SONIC_PFC3, "COUNTERS_DB"),
    "nvue": (NVUE_PAUSE, ""),
    "eos": (f"{EOS_FRAMES}/in-frames", ""),
}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def rx_pause(served: Any, value: int) -> None:
    """Set eth1's received PFC frames on priority 3 (every NOS's path above reads them)."""
    served.dataplane.counters_snapshot["ports"]["eth1"]["pfc"]["rx_xoff"][3] = value


def get_request(xpaths: list[str], target: str = "", encoding: int = JSON_IETF) -> Any:
    return gnmi_pb2.GetRequest(
        prefix=gnmi_pb2.Path(target=target),
        path=[paths.to_proto(paths.parse(x)) for x in xpaths],
        encoding=encoding,
    )


async def status_of(coro: Any) -> grpc.StatusCode:
    try:
        await coro
    except grpc.aio.AioRpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


async def stream_error(stream: Stream, timeout: float = 5.0) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        while True:
            await stream.next(timeout)
    return raised.value


# ----------------------------------------------------------------------------- capabilities


@pytest.mark.parametrize(
    ("nos", "encodings", "version"),
    [
        ("sonic", {"JSON", "JSON_IETF", "PROTO"}, "0.7.0"),
        ("nvue", {"JSON", "PROTO"}, "0.8.0"),
        ("eos", {"JSON", "JSON_IETF", "PROTO"}, "0.8.0"),
    ],
)
def test_capabilities_name_each_nos_encodings(
    pki: Pki, nos: str, encodings: set[str], version: str
) -> None:
    async def scenario() -> Any:
        async with serving(pki, nos) as served:
            return await served.stub().Capabilities(gnmi_pb2.CapabilityRequest(), metadata=METADATA)

    answer = run(scenario)
    assert {gnmi_pb2.Encoding.Name(e) for e in answer.supported_encodings} == encodings
    assert answer.gNMI_version == version


# ----------------------------------------------------------------------------- Get


def test_sonic_get_answers_each_path_in_its_own_notification(pki: Pki) -> None:
    async def scenario() -> Any:
        async with serving(pki, "sonic") as served:
            rx_pause(served, 4)
            request = get_request([SONIC_PFC3, "COUNTERS/Ethernet*/Queues"], "COUNTERS_DB")
            return await served.stub().Get(request, metadata=METADATA)

    answer = run(scenario)
    assert len(answer.notification) == 2
    assert all(n.prefix.target == "COUNTERS_DB" for n in answer.notification)
    assert abs(answer.notification[0].timestamp - time.time_ns()) < 30 * 10**9
    got = leaves(answer.notification)
    assert got[f"/{SONIC_PFC3}"] == "4"
    assert got["/COUNTERS/Ethernet*/Queues"]["Ethernet12:3"]["PFC_WD_STATUS"] == "operational"


def test_eos_get_gives_typed_leaves_and_not_found_for_no_data(pki: Pki) -> None:
    async def scenario() -> tuple[Any, grpc.StatusCode, str]:
        async with serving(pki, "eos") as served:
            rx_pause(served, 3)
            stub = served.stub()
            answer = await stub.Get(get_request([EOS_FRAMES], encoding=PROTO), metadata=METADATA)
            missing = "/interfaces/interface[name=Ethernet9]/state/counters"
            try:
                await stub.Get(get_request([missing], encoding=PROTO), metadata=METADATA)
            except grpc.aio.AioRpcError as exc:
                return answer, exc.code(), str(exc.details())
            raise AssertionError("a path without data was answered")

    answer, code, details = run(scenario)
    update = {u.path.elem[-1].name: u.val for u in answer.notification[0].update}
    assert update["in-frames"].uint_val == 3 and update["index"].uint_val == 3
    assert code == grpc.StatusCode.NOT_FOUND and "Ethernet9" in details


# ----------------------------------------------------------------------------- STREAM


@pytest.mark.parametrize("nos", ["sonic", "nvue", "eos"])
def test_sample_stream_sends_each_interval_and_syncs_after_the_first_set(
    pki: Pki, nos: str
) -> None:
    xpath, target = PER_NOS[nos]

    async def scenario() -> tuple[list[Any], list[Any]]:
        async with serving(pki, nos) as served:
            rx_pause(served, 1)
            stream = Stream(served.stub(), subscribe_request([xpath], target=target))
            first = await stream.until_sync()
            later: list[Any] = []
            for count in range(2, 6):
                rx_pause(served, count)
                for _ in range(5):  # a sample taken before the change may be on its way
                    later.append((await stream.next()).update)
                    if list(leaves(later[-1:]).values()) == [_counter(nos, count)]:
                        break
            stream.close()
            return first, later

    first, later = run(scenario)
    assert len(first) == 1 and list(leaves(first).values()) == [_counter(nos, 1)]
    values = [next(iter(leaves([n]).values())) for n in later]
    assert values[-1] == _counter(nos, 5)
    assert [int(v) for v in values] == sorted(int(v) for v in values)  # follows the counter
    stamps = [first[0].timestamp] + [n.timestamp for n in later]
    assert stamps == sorted(stamps)
    # 200 ms asked: n intervals take about n x 0.2 s (a late sample is caught up, so single
    # gaps vary on a loaded host; their sum does not drift).
    span, intervals = (stamps[-1] - stamps[0]) / 1e9, len(stamps) - 1
    assert 0.15 * intervals <= span <= 0.6 * intervals, stamps


def _counter(nos: str, value: int) -> Any:
    return str(value) if nos == "sonic" else value


def test_suppress_redundant_sends_changes_and_a_heartbeat(pki: Pki) -> None:
    request = subscribe_request([NVUE_PAUSE], suppress_redundant=True,
                                heartbeat_interval=1_500_000_000)  # fmt: skip

    async def scenario() -> None:
        async with serving(pki, "nvue") as served:
            stream = Stream(served.stub(), request)
            assert len(await stream.until_sync()) == 1
            with pytest.raises(TimeoutError):
                await stream.next(timeout=0.6)  # unchanged: nothing
            rx_pause(served, 8)
            assert list(leaves([(await stream.next()).update]).values()) == [8]
            heartbeat = await stream.next(timeout=3.0)  # unchanged, but the heartbeat is due
            assert list(leaves([heartbeat.update]).values()) == [8]
            stream.close()

    run(scenario)


def test_updates_only_skips_the_initial_set(pki: Pki) -> None:
    request = subscribe_request([NVUE_PAUSE], updates_only=True)

    async def scenario() -> None:
        async with serving(pki, "nvue") as served:
            stream = Stream(served.stub(), request)
            assert await stream.until_sync() == []
            assert leaves([(await stream.next()).update]) == {NVUE_PAUSE: 0}
            stream.close()

    run(scenario)


@pytest.mark.parametrize(
    ("nos", "xpath", "target", "before", "after"),
    [
        ("eos", EOS_STUCK, "", 0, 1),
        ("sonic", "COUNTERS/Ethernet0/Pfcwd", "COUNTERS_DB", "operational", "stormed"),
    ],
)
def test_on_change_sends_the_watchdog_when_it_changes_only(
    pki: Pki, nos: str, xpath: str, target: str, before: Any, after: Any
) -> None:
    request = subscribe_request([xpath], sub_mode=ON_CHANGE, target=target)

    def watchdog(served: Any) -> dict[str, Any]:
        wd: dict[str, Any] = served.dataplane.counters_snapshot["ports"]["eth1"]["queues"]["3"]
        return wd["watchdog"]  # type: ignore[no-any-return]

    def state(notifications: list[Any]) -> Any:
        (value,) = leaves(notifications).values()
        return value if nos == "eos" else value["Ethernet0:3"]["PFC_WD_STATUS"]

    async def scenario() -> None:
        async with serving(pki, nos) as served:
            stream = Stream(served.stub(), request)
            assert state(await stream.until_sync()) == before
            with pytest.raises(TimeoutError):
                await stream.next(timeout=0.8)  # nothing changed, nothing sent
            watchdog(served).update(state="stormed", storms_detected=1)
            started = time.monotonic()
            assert state([(await stream.next(timeout=3.0)).update]) == after
            assert time.monotonic() - started < 2.5  # polled every 0.2 s
            stream.close()

    run(scenario)


def test_on_change_deletes_a_queue_the_watchdog_stops_watching(pki: Pki) -> None:
    queues = "/interfaces/interface[name=Ethernet1]/ethernet/pfc/watchdog"
    request = subscribe_request([queues], sub_mode=ON_CHANGE)

    async def scenario() -> list[Any]:
        async with serving(pki, "eos") as served:
            stream = Stream(served.stub(), request)
            assert len(leaves(await stream.until_sync())) == 4
            served.dataplane.config["qos"]["watchdog"]["enabled"] = False
            gone = await stream.next(timeout=5.0)  # the config is re-read once a second
            stream.close()
            return list(gone.update.delete)

    deleted = {paths.text(paths.from_proto(p)) for p in run(scenario)}
    assert len(deleted) == 4 and all("tx-queue[index=3][queue-type=UNICAST]" in p for p in deleted)


def test_three_subscribers_share_the_counters_reads(pki: Pki) -> None:
    async def scenario() -> tuple[int, int]:
        async with serving(pki, "eos") as served:
            streams = [Stream(served.stub(), subscribe_request([EOS_FRAMES])) for _ in range(3)]
            samples = 0
            for stream in streams:
                await stream.until_sync()
            served.dataplane.reads = 0
            for _ in range(5):
                for stream in streams:
                    await stream.next()
                    samples += 1
            for stream in streams:
                stream.close()
            return samples, served.dataplane.reads

    samples, reads = run(scenario)
    assert reads <= samples / 2, (samples, reads)  # about one read per interval, not three


# ----------------------------------------------------------------------------- ONCE and POLL


@pytest.mark.parametrize("nos", ["sonic", "eos"])
def test_once_sends_everything_syncs_and_ends(pki: Pki, nos: str) -> None:
    xpath, target = PER_NOS[nos]

    async def scenario() -> tuple[list[Any], Any]:
        async with serving(pki, nos) as served:
            rx_pause(served, 6)
            stream = Stream(served.stub(), subscribe_request([xpath], mode=ONCE, target=target))
            found = await stream.until_sync()
            end = await stream.end_or_next()
            return found, end

    found, end = run(scenario)
    assert list(leaves(found).values()) == [_counter(nos, 6)]
    assert end is grpc.aio.EOF


def test_poll_answers_each_poll_with_a_sync(pki: Pki) -> None:
    xpath, target = PER_NOS["sonic"]

    async def scenario() -> list[Any]:
        async with serving(pki, "sonic") as served:
            stream = Stream(served.stub(), subscribe_request([xpath], mode=POLL, target=target))
            rounds = [await stream.until_sync()]
            for value in (10, 20):
                rx_pause(served, value)
                with pytest.raises(TimeoutError):
                    await stream.next(timeout=0.5)  # nothing until polled
                stream.poll()
                rounds.append(await stream.until_sync())
            stream.close()
            return rounds

    rounds = run(scenario)
    assert [list(leaves(r).values()) for r in rounds] == [["0"], ["10"], ["20"]]


# ----------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("what", "code"),
    [
        ("get", grpc.StatusCode.UNIMPLEMENTED),
        ("set", grpc.StatusCode.UNIMPLEMENTED),
        ("poll", grpc.StatusCode.UNIMPLEMENTED),
        ("once", grpc.StatusCode.UNIMPLEMENTED),
        ("json_ietf", grpc.StatusCode.UNIMPLEMENTED),
    ],
)
def test_nvue_serves_stream_subscriptions_only(pki: Pki, what: str, code: grpc.StatusCode) -> None:
    async def scenario() -> tuple[grpc.StatusCode, str]:
        async with serving(pki, "nvue") as served:
            stub = served.stub()
            if what == "get":
                call = stub.Get(get_request([NVUE_PAUSE], encoding=PROTO), metadata=METADATA)
            elif what == "set":
                call = stub.Set(gnmi_pb2.SetRequest(), metadata=METADATA)
            else:
                mode = {"poll": POLL, "once": ONCE}.get(what, STREAM)
                encoding = JSON_IETF if what == "json_ietf" else PROTO
                stream = Stream(stub, subscribe_request([NVUE_PAUSE], mode=mode, encoding=encoding))
                error = await stream_error(stream)
                return error.code(), str(error.details())
            try:
                await call
            except grpc.aio.AioRpcError as exc:
                return exc.code(), str(exc.details())
            raise AssertionError("served")

    got, details = run(scenario)
    assert got == code
    if what == "get":
        assert "GET or SET" in details


def test_set_is_unimplemented_everywhere(pki: Pki) -> None:
    async def scenario() -> list[grpc.StatusCode]:
        found = []
        for nos in ("sonic", "eos"):
            async with serving(pki, nos) as served:
                set_call = served.stub().Set(gnmi_pb2.SetRequest(), metadata=METADATA)
                found.append(await status_of(set_call))
        return found

    assert run(scenario) == [grpc.StatusCode.UNIMPLEMENTED] * 2


@pytest.mark.parametrize(
    "metadata",
    [(), (("username", "admin"),), (("username", "admin"), ("password", "wrong")),
     (("username", "root"), ("password", "s3cret"))],
    ids=["none", "no-password", "wrong-password", "wrong-user"],
)  # fmt: skip
def test_every_rpc_needs_the_switch_login(pki: Pki, metadata: tuple[tuple[str, str], ...]) -> None:
    async def scenario() -> list[grpc.StatusCode]:
        async with serving(pki, "sonic") as served:
            stub = served.stub()
            codes = [
                await status_of(stub.Capabilities(gnmi_pb2.CapabilityRequest(), metadata=metadata)),
                await status_of(
                    stub.Get(get_request([SONIC_PFC3], "COUNTERS_DB"), metadata=metadata)
                ),
            ]
            call = stub.Subscribe(
                iter([subscribe_request([SONIC_PFC3], target="COUNTERS_DB")]), metadata=metadata
            )
            try:
                await call.read()
            except grpc.aio.AioRpcError:
                # The RPC's own status: a refusal that races the client's request write
                # surfaces there as gRPC core's INTERNAL, the call still ends with the server's.
                codes.append(await call.code())
            return codes

    assert run(scenario) == [grpc.StatusCode.UNAUTHENTICATED] * 3


def test_tls_fails_with_another_ca_or_another_name(pki: Pki, tmp_path: Path) -> None:
    other = make_pki(tmp_path / "other", lab="other")

    async def scenario() -> list[grpc.StatusCode]:
        async with serving(pki, "eos") as served:
            request = gnmi_pb2.CapabilityRequest()
            wrong_ca = served.stub(ca_pem=other.ca.cert.read_bytes())
            wrong_name = served.stub(server_name="leaf2")
            right = served.stub()
            return [
                await status_of(wrong_ca.Capabilities(request, metadata=METADATA, timeout=5)),
                await status_of(wrong_name.Capabilities(request, metadata=METADATA, timeout=5)),
                await status_of(right.Capabilities(request, metadata=METADATA, timeout=5)),
            ]

    assert run(scenario) == [grpc.StatusCode.UNAVAILABLE] * 2 + [grpc.StatusCode.OK]


@pytest.mark.parametrize(
    ("limits", "request_kind", "code", "words"),
    [
        (Limits(max_subscriptions=2), "three", grpc.StatusCode.RESOURCE_EXHAUSTED, "at most 2"),
        (Limits(), "fast", grpc.StatusCode.INVALID_ARGUMENT, "sample_interval 50000000 ns"),
        (Limits(), "fast_heartbeat", grpc.StatusCode.INVALID_ARGUMENT, "heartbeat_interval"),
        (Limits(), "empty", grpc.StatusCode.INVALID_ARGUMENT, "empty"),
        (Limits(), "poll_first", grpc.StatusCode.INVALID_ARGUMENT, "SubscriptionList"),
        (Limits(), "bad_path", grpc.StatusCode.NOT_FOUND, "/interfaces/interface[name=*]/nope"),
        (Limits(), "bad_encoding", grpc.StatusCode.UNIMPLEMENTED, "ASCII"),
    ],
)
def test_bad_or_oversized_subscriptions_are_refused_by_name(
    pki: Pki, limits: Limits, request_kind: str, code: grpc.StatusCode, words: str
) -> None:
    requests = {
        "three": subscribe_request([EOS_FRAMES] * 3),
        "fast": subscribe_request([EOS_FRAMES], interval_ms=50),
        "fast_heartbeat": subscribe_request([EOS_FRAMES], heartbeat_interval=1000),
        "empty": gnmi_pb2.SubscribeRequest(subscribe=gnmi_pb2.SubscriptionList()),
        "poll_first": gnmi_pb2.SubscribeRequest(poll=gnmi_pb2.Poll()),
        "bad_path": subscribe_request(["/interfaces/interface[name=*]/nope"]),
        "bad_encoding": subscribe_request([EOS_FRAMES], encoding=gnmi_pb2.Encoding.ASCII),
    }

    async def scenario() -> grpc.aio.AioRpcError:
        async with serving(pki, "eos", limits=limits) as served:
            return await stream_error(Stream(served.stub(), requests[request_kind]))

    error = run(scenario)
    assert error.code() == code
    assert words in str(error.details())


def test_concurrent_rpcs_and_get_paths_are_bounded(pki: Pki) -> None:
    async def scenario() -> list[grpc.StatusCode]:
        async with serving(pki, "eos", limits=Limits(max_rpcs=1, max_get_paths=2)) as served:
            stub = served.stub()
            three = stub.Get(get_request([EOS_FRAMES] * 3, encoding=PROTO), metadata=METADATA)
            codes = [await status_of(three)]
            stream = Stream(stub, subscribe_request([EOS_FRAMES]))
            await stream.until_sync()
            capabilities = stub.Capabilities(gnmi_pb2.CapabilityRequest(), metadata=METADATA)
            codes.append(await status_of(capabilities))
            stream.close()
            await asyncio.sleep(0.3)
            again = stub.Capabilities(gnmi_pb2.CapabilityRequest(), metadata=METADATA)
            codes.append(await status_of(again))
            return codes

    assert run(scenario) == [
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.OK,  # the slot is free again once the stream ended
    ]


def test_an_unreachable_data_plane_is_unavailable(pki: Pki) -> None:
    async def scenario() -> grpc.StatusCode:
        async with serving(pki, "sonic") as served:
            served.dataplane.fail = True
            return await status_of(
                served.stub().Get(get_request([SONIC_PFC3], "COUNTERS_DB"), metadata=METADATA)
            )

    assert run(scenario) == grpc.StatusCode.UNAVAILABLE


# ----------------------------------------------------------------------------- faults


def test_refuse_fault_makes_every_rpc_unavailable(pki: Pki) -> None:
    async def scenario() -> list[grpc.StatusCode]:
        async with serving(pki, "eos", faults=GnmiFaults(refuse=True)) as served:
            stub = served.stub()
            capabilities = stub.Capabilities(gnmi_pb2.CapabilityRequest(), metadata=METADATA)
            codes = [await status_of(capabilities)]
            codes.append((await stream_error(Stream(stub, subscribe_request([EOS_FRAMES])))).code())
            served.service.faults.refuse = False  # what a reload of faults.json does
            again = stub.Capabilities(gnmi_pb2.CapabilityRequest(), metadata=METADATA)
            codes.append(await status_of(again))
            return codes

    assert run(scenario) == [grpc.StatusCode.UNAVAILABLE] * 2 + [grpc.StatusCode.OK]


def test_reset_fault_aborts_a_stream_after_its_seconds(pki: Pki) -> None:
    async def scenario() -> tuple[grpc.aio.AioRpcError, float, int]:
        async with serving(pki, "eos", faults=GnmiFaults(reset_after_s=1.0)) as served:
            started = time.monotonic()
            stream = Stream(served.stub(), subscribe_request([EOS_FRAMES]))
            await stream.until_sync()
            received = 0
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                while True:
                    await stream.next()
                    received += 1
            return raised.value, time.monotonic() - started, received

    error, elapsed, received = run(scenario)
    assert error.code() == grpc.StatusCode.UNAVAILABLE and "lab fault" in str(error.details())
    assert 1.0 <= elapsed < 4.0 and received >= 1


def test_stale_fault_dates_notifications_back(pki: Pki) -> None:
    async def scenario() -> list[Any]:
        async with serving(pki, "eos", faults=GnmiFaults(stale_s=3600)) as served:
            stream = Stream(served.stub(), subscribe_request([EOS_FRAMES], mode=ONCE))
            return await stream.until_sync()

    (notification,) = run(scenario)
    behind = (time.time_ns() - notification.timestamp) / 1e9
    assert 3590 < behind < 3630


@pytest.mark.parametrize("nos", ["sonic", "nvue", "eos"])
def test_malformed_fault_sends_values_that_do_not_parse(pki: Pki, nos: str) -> None:
    xpath, target = PER_NOS[nos]

    async def scenario() -> list[Any]:
        async with serving(pki, nos, faults=GnmiFaults(malformed=True)) as served:
            stream = Stream(served.stub(), subscribe_request([xpath], target=target))
            found = await stream.until_sync()
            stream.close()
            return found

    (notification,) = run(scenario)
    (update,) = notification.update
    if nos == "sonic":
        with pytest.raises(json.JSONDecodeError):
            json.loads(update.val.json_ietf_val)
    else:
        assert update.val.WhichOneof("value") == "string_val"  # where a uint_val belongs


def test_oversized_fault_exceeds_the_clients_message_limit(pki: Pki) -> None:
    async def scenario() -> tuple[int, grpc.StatusCode]:
        async with serving(pki, "eos", faults=GnmiFaults(oversized_bytes=1000)) as served:
            stream = Stream(served.stub(), subscribe_request([EOS_FRAMES], mode=ONCE))
            (small,) = await stream.until_sync()
            served.service.faults.oversized_bytes = 5 * 1024 * 1024  # gRPC's default is 4 MiB
            big = Stream(served.stub(), subscribe_request([EOS_FRAMES], mode=ONCE))
            return len(small.update[0].val.string_val), (await stream_error(big)).code()

    size, code = run(scenario)
    assert size == 1000
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_unknown_path_fault_adds_an_update_nobody_asked_for(pki: Pki) -> None:
    async def scenario() -> list[Any]:
        async with serving(pki, "sonic", faults=GnmiFaults(unknown_path=True)) as served:
            request = subscribe_request([SONIC_PFC3], mode=ONCE, target="COUNTERS_DB")
            return await Stream(served.stub(), request).until_sync()

    got = leaves(run(scenario))
    assert set(got) == {f"/{SONIC_PFC3}", "/LAB_FAULT/unrequested"}


def test_faults_load_from_the_gnmi_object_of_faults_json(tmp_path: Path) -> None:
    path = tmp_path / "faults.json"
    faults = GnmiFaults()
    path.write_text(json.dumps({"delay_s": 1, "gnmi": {"refuse": True, "stale_s": 5}}))
    faults.load(path)
    assert faults == GnmiFaults(refuse=True, stale_s=5.0)
    for bad, words in [
        ({"gnmi": {"refuse": "yes"}}, "gnmi.refuse"),
        ({"gnmi": {"stale_s": -1}}, "gnmi.stale_s"),
        ({"gnmi": {"nope": 1}}, "nope"),
        ({"gnmi": {"oversized_bytes": 10**10}}, "oversized_bytes"),
        ({"gnmi": []}, "object"),
    ]:
        path.write_text(json.dumps(bad))
        with pytest.raises(ValueError, match=words):
            faults.load(path)
        assert faults == GnmiFaults(refuse=True, stale_s=5.0)  # a bad file changes nothing
    path.unlink()
    faults.load(path)
    assert not faults.active()
