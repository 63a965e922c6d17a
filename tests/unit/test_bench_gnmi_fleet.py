"""bench/gnmi_fleet.py: the generator's samples are what the agent subscribes to and folds (its
own profiles, its own Subscriber over gRPC), the SSH fleet's show tables parse to the same
counters with the agent's SONiC driver, the fabric file loads, /metrics and /proc are read
right, bad options are refused, and a small fleet runs end to end. No timed assertions."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from pygnmi.spec.v080 import gnmi_pb2

from agent.device.gnmi import profile_for
from agent.device.gnmi.base import CounterBuilder, under
from agent.device.gnmi.paths import from_proto
from agent.device.gnmi.stream import (
    Endpoint,
    StreamFailure,
    Subscriber,
    subscribe_once,
    subscribe_request,
)
from agent.device.platforms.sonic import Sonic
from agent.device.state import Counters
from agent.intent.loader import load_fabric

REPO = Path(__file__).resolve().parents[2]
MIRROR = Path("/work/.mirror/sonic-net+sonic-gnmi/repo")


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gnmi_fleet", REPO / "bench/gnmi_fleet.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gnmi_fleet"] = module
    spec.loader.exec_module(module)
    return module


bench = _load()
PLATFORM = {"sonic": "sonic", "nvue": "cumulus_nvue"}


def fold(shape: str, messages: list[bytes]) -> Counters:
    """The samples folded by the agent's own profile, each path checked against what the
    agent subscribed to (as its Subscriber checks it)."""
    profile = profile_for(PLATFORM[shape])
    assert profile is not None
    wanted = [s.path for s in profile.subscriptions()]
    builder = CounterBuilder()
    for data in messages:
        notification = gnmi_pb2.SubscribeResponse.FromString(data).update
        for update in notification.update:
            path = from_proto(notification.prefix, update.path)
            assert any(under(w, path) for w in wanted), path.text()
            profile.fold(path, update.val, builder)
    return builder.counters("sw0000", 0.0, dict(profile.unread))


def samples(shape: str, ports: int, cell: int) -> list[bytes]:
    if shape == "sonic":
        messages: list[bytes] = bench.sonic_samples(ports, cell, 0)
        return messages
    return list(bench.NvueSamples(ports).samples(cell, 0))


def test_sonic_port_fields_are_sonic_gnmis_testdata() -> None:
    assert len(bench.SAI_PORT_FIELDS) == 106
    if not MIRROR.exists():
        pytest.skip("no local mirror of sonic-net/sonic-gnmi")
    text = subprocess.run(
        ["git", "-C", str(MIRROR), "show", "HEAD:testdata/COUNTERS:Ethernet68.txt"],
        capture_output=True, text=True, check=True, timeout=30,
    ).stdout  # fmt: skip
    assert set(bench.SAI_PORT_FIELDS) == set(json.loads(text))


@pytest.mark.parametrize("shape", ["sonic", "nvue"])
def test_samples_fold_into_every_port_and_queue_and_move(shape: str) -> None:
    first, second = fold(shape, samples(shape, 8, 100)), fold(shape, samples(shape, 8, 104))
    names = [bench.port_name(shape, p) for p in range(8)]
    assert list(first.interfaces) == names
    for port, name in enumerate(names):
        one, two = first.interfaces[name], second.interfaces[name]
        assert one.pfc_rx[3] == bench.pfc_frames(port, 100, "rx") < two.pfc_rx[3]
        assert one.pfc_tx[3] == bench.pfc_frames(port, 100, "tx") < two.pfc_tx[3]
        assert one.pfc_rx[:3] + one.pfc_rx[4:] == (0,) * 7
        assert sorted(one.queues) == list(range(8))  # every queue had every required field
        for q in range(8):
            assert one.queues[q].model_dump() == bench.queue_counters(port, q, 100)
        assert two.queues[3].ecn_marked_packets > one.queues[3].ecn_marked_packets
        assert two.queues[0].tx_bytes > one.queues[0].tx_bytes
    watchdog = first.interfaces[names[0]].watchdog
    if shape == "sonic":
        assert list(watchdog) == [3] and watchdog[3].storms_detected == bench.storms(100)
    else:
        assert watchdog == {} and "watchdog" in first.unread


def test_sonic_queues_carry_periodic_watermarks_and_watchdog_on_queue_3_only() -> None:
    queues = bench.sonic_queues(2, 7)
    assert "Ethernet4:5:periodic" in queues
    assert "PFC_WD_STATUS" in queues["Ethernet0:3"]
    assert not any("PFC_WD_STATUS" in queues[f"Ethernet0:{q}"] for q in (0, 1, 2, 4, 5, 6, 7))
    assert all(isinstance(v, str) for f in queues.values() for v in f.values())  # Redis strings


def test_ssh_outputs_parse_to_the_gnmi_counters_with_the_agents_driver() -> None:
    assert set(bench.SHOW_COMMANDS) == set(Sonic.COUNTER_COMMANDS.values())
    key = {command: name for name, command in Sonic.COUNTER_COMMANDS.items()}
    outputs = {key[command]: text for command, text in bench.show_outputs(8, 55).items()}
    cache = bench.ShowCache(8)
    assert cache.output("show pfc counters", 1e9) is not None and cache.tally.count == 0
    assert cache.output("pfcwd show stats", 1e9) is not None and cache.tally.count == 1
    assert cache.output("show version", 1e9) is None
    over_ssh = Sonic.counters_from_text("sw0000", 0.0, outputs)
    over_gnmi = fold("sonic", samples("sonic", 8, 55))
    assert list(over_ssh.interfaces) == list(over_gnmi.interfaces)
    for name, ssh in over_ssh.interfaces.items():
        gnmi = over_gnmi.interfaces[name]
        assert (ssh.pfc_rx, ssh.pfc_tx, ssh.queues) == (gnmi.pfc_rx, gnmi.pfc_tx, gnmi.queues)
        assert ssh.watchdog[3].storms_detected == gnmi.watchdog[3].storms_detected


@pytest.mark.parametrize("shape", ["sonic", "nvue"])
def test_the_agents_request_is_served_and_others_refused(shape: str) -> None:
    profile = profile_for(PLATFORM[shape])
    assert profile is not None
    request = subscribe_request(profile, 1.0)
    assert bench.requested(request, shape) == ([0, 1], 1.0)
    stray = gnmi_pb2.SubscribeRequest()
    stray.CopyFrom(request)
    stray.subscribe.subscription[0].path.elem.add(name="extra")
    assert "Invalid subscription path" in bench.requested(stray, shape)
    once = gnmi_pb2.SubscribeRequest()
    once.CopyFrom(request)
    once.subscribe.mode = gnmi_pb2.SubscriptionList.ONCE
    assert "STREAM" in bench.requested(once, shape)
    wrong = gnmi_pb2.SubscribeRequest()
    wrong.CopyFrom(request)
    wrong.subscribe.encoding = gnmi_pb2.Encoding.ASCII
    assert "encoding" in bench.requested(wrong, shape)


async def _stream(shape: str, password: str, wanted: int, tally: Any = None) -> list[Counters]:
    profile = profile_for(PLATFORM[shape])
    assert profile is not None
    server, ports = await bench.serve_gnmi(shape, 4, 2, tally)
    got: list[Counters] = []
    try:
        end = Endpoint("sw0001", f"127.0.0.1:{ports[1]}", "admin", password, plaintext=True)
        task = asyncio.create_task(
            subscribe_once(Subscriber(end, profile, 0.1, lambda c, _new: got.append(c)))
        )
        deadline = time.monotonic() + 20
        while len(got) < wanted and not task.done() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        if task.done():
            task.result()  # the StreamFailure
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    finally:
        await server.stop(0)
    return got


@pytest.mark.parametrize("shape", ["sonic", "nvue"])
def test_the_agents_subscriber_streams_moving_counters_from_the_generator(shape: str) -> None:
    tally = bench.Tally()
    got = asyncio.run(_stream(shape, bench.PASSWORD, 3, tally))
    assert len(got) >= 3 and tally.count >= 3  # sample sets sent, counted
    first, last = got[0].interfaces, got[-1].interfaces
    assert len(first) == 4 and len(first[bench.port_name(shape, 3)].queues) == 8
    name = bench.port_name(shape, 0)
    assert last[name].pfc_rx[3] > first[name].pfc_rx[3]


def test_a_wrong_password_is_refused() -> None:
    with pytest.raises(StreamFailure) as caught:
        asyncio.run(_stream("sonic", "wrong", 1))
    assert caught.value.reason == "auth"


def test_fabric_loads_with_every_switch_its_ports_and_pinned_key(tmp_path: Path) -> None:
    from lab.mgmt.launcher import host_public_key

    key = host_public_key(tmp_path)
    gnmi = bench.Fleet("gnmi", [], {"sw0000": 41000, "sw0001": 41001})
    ssh = bench.Fleet("ssh", [], {"sw0000": 42000, "sw0001": 42001})
    path = tmp_path / "fabric.yml"
    names = bench.write_fabric(path, "sonic", 3, {"gnmi": gnmi, "ssh": ssh}, key)
    assert names == ["sw0000", "sw0001"]
    devices = {d.name: d for d in load_fabric(path).intent.devices}
    one = devices["sw0001"]
    assert (one.platform, one.host, one.port) == ("sonic", "127.0.0.1", 42001)
    assert one.gnmi is not None and one.gnmi.port == 41001
    assert [p.name for p in one.ports] == ["Ethernet0", "Ethernet4", "Ethernet8"]
    assert one.host_key == [key]
    assert one.credentials is not None and one.credentials.password_env == bench.PASSWORD_ENV
    nvue = bench.write_fabric(tmp_path / "nvue.yml", "nvue", 2, {"gnmi": gnmi}, None)
    device = load_fabric(tmp_path / "nvue.yml").intent.devices[0]
    assert nvue == names and device.platform == "cumulus_nvue"
    assert [p.name for p in device.ports] == ["swp1", "swp2"]
    assert device.port == 41000  # no SSH fleet: a port of its own all the same (IR012)
    bench.write_fabric(tmp_path / "one.yml", "sonic", 1, {"gnmi": gnmi}, None)
    assert [p.name for p in load_fabric(tmp_path / "one.yml").intent.devices[0].ports] == [
        "Ethernet0"
    ]


PAGE = b"""# HELP roce_device_up 1 if the last poll succeeded.
# TYPE roce_device_up gauge
roce_device_up{device="sw0000",fabric="gnmi-fleet"} 1.0
roce_device_up{device="sw\\"1",fabric="gnmi-fleet"} 0.0
# HELP roce_device_state Why a device is up or not.
# TYPE roce_device_state gauge
roce_device_state{device="sw0000",fabric="gnmi-fleet",state="up"} 1.0
roce_device_state{device="sw0000",fabric="gnmi-fleet",state="stale"} 0.0
roce_device_state{device="sw\\"1",fabric="gnmi-fleet",state="stale"} 1.0
# HELP roce_polls_total Successful polls.
# TYPE roce_polls_total counter
roce_polls_total{device="sw0000",fabric="gnmi-fleet"} 12.0
roce_polls_total{device="sw\\"1",fabric="gnmi-fleet"} 3.0
# HELP roce_polls_totally_else Another family whose name starts alike.
# TYPE roce_polls_totally_else counter
roce_polls_totally_else{device="sw0000",fabric="gnmi-fleet"} 99.0
"""


def test_metrics_families_read_from_the_page() -> None:
    assert bench.by_device(PAGE, "roce_device_up") == {"sw0000": 1.0, 'sw\\"1': 0.0}
    assert bench.polls(PAGE) == 15.0
    assert bench.down_states(PAGE) == {"stale": 1}
    assert bench.family(PAGE, "roce_absent") == []
    assert bench.family(PAGE, "roce_polls_totally_else")[0][1] == 99.0


def test_proc_files_read() -> None:
    stat = "4242 (a) b (c)) S 1 2 3 4 5 6 7 8 9 10 250 150 0 0 20 0 1 0 100"
    assert bench.cpu_seconds(stat) == pytest.approx(400 / os.sysconf("SC_CLK_TCK"))
    status = "Name:\tx\nVmPeak:\t 9 kB\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n"
    assert bench.memory_kib(status) == {"VmHWM": 2048, "VmRSS": 1024}
    assert bench.machine_ticks("cpu  10 0 5 80 5 0 0 0 0 0\ncpu0 1 2\n") == (15, 100)
    assert bench.process_cpu([os.getpid(), 2**22 + 17]) > 0  # a gone pid counts nothing


def test_an_exporter_over_its_memory_limit_is_given_up(tmp_path: Path) -> None:
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        exporter = bench.Exporter(process, tmp_path / "log", time.monotonic(), max_rss_kib=1)
        with pytest.raises(bench.OverLimit, match="over --max-rss"):
            exporter.alive()
    finally:
        bench.stop_processes([process])
    assert process.returncode is not None
    with pytest.raises(bench.BenchError, match="exited with"):
        (tmp_path / "log").write_text("its last words")
        exporter.alive()


def test_a_failed_scrape_is_named_and_the_up_wait_gives_up_in_bounds(tmp_path: Path) -> None:
    with pytest.raises(bench.ScrapeFailed, match="a scrape got no page"):
        bench.scrape("http://127.0.0.1:1/metrics")  # nothing listens on port 1
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        exporter = bench.Exporter(process, tmp_path / "log", time.monotonic(), 2**30)
        exporter.url = "http://127.0.0.1:1/metrics"
        result = bench.wait_all_up(exporter, {"sw0000"}, timeout_s=1.5, stall_s=60)
    finally:
        bench.stop_processes([process])
    assert result == bench.UpResult(None, 0, frozenset())


def test_configs_parse_and_shares_split_evenly() -> None:
    plan = bench.parse_configs("gnmi1,ssh15,shard,gnmi0.5")
    assert [r.name for r in plan.runs] == ["gnmi 1 s", "ssh 15 s", "gnmi 0.5 s"]
    assert plan.shard and plan.transports == {"gnmi", "ssh"}
    assert bench.parse_configs("gnmi15").transports == {"gnmi"}
    assert [len(s) for s in bench.shares(10, 4)] == [3, 3, 2, 2]
    assert bench.shares(2, 8) == [range(0, 1), range(1, 2)]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--targets", "0"], "--targets: Expected: 1 to 5000"),
        (["--ports", "600"], "--ports: Expected: 1 to 512"),
        (["--scrapes", "1"], "--scrapes: Expected: 2 to 100"),
        (["--duration", "0"], "--duration: Expected: seconds, > 0"),
        (["--up-timeout", "nan"], "--up-timeout: Expected: seconds, > 0"),
        (["--max-rss", "0"], "--max-rss: Expected: GiB, > 0"),
        (["--configs", "gnmi0"], "Actual: 'gnmi0'"),
        (["--configs", "grpc1"], "Actual: 'grpc1'"),
        (["--configs", "gnmi1,gnmi1"], "'gnmi1' given twice"),
        (["--configs", "shard,shard"], "Actual: 'shard'"),
        (["--shape", "nvue", "--configs", "gnmi1,ssh15"], "SONiC's show commands only"),
        (["--shape", "nvue", "--configs", "shard"], "SONiC's show commands only"),
    ],
)
def test_bad_options_are_refused_by_name(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        bench.main(argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def _row(name: str, interval_s: float, updates: float, cpu_s: float, **changes: Any) -> Any:
    up = bench.UpResult(5.0, 10, frozenset())
    fields: dict[str, Any] = dict(
        name=name, interval_s=interval_s, switches=10, up=up, window_s=30.0, updates=updates,
        sent=updates, cpu_s=cpu_s, rss_peak_kib=2048, rss_kib=1024, scrapes_s=(0.1, 0.2),
        scrape_bytes=10**6, generator_cpu_s=3.0, client_cpu_s=0.3, machine_busy=0.5, states={},
        workers=2,
    )  # fmt: skip
    fields.update(changes)
    return bench.Row(**fields)


def test_ratios_flags_and_lines() -> None:
    behind = _row("gnmi 1 s", 1, 400, 6.0, sent=300, states={"stale": 2}, machine_busy=0.95)
    rows = [_row("gnmi 15 s", 15, 20, 1.0), _row("ssh 15 s", 15, 20, 4.0), behind]
    ratios = bench.ratio_lines(rows)
    assert ratios[0].startswith("CPU per update, gNMI 15 s / SSH 15 s: 0.25x")
    assert ratios[1].startswith("CPU per second, gNMI 1 s / SSH 15 s: 1.50x")
    assert rows[0].flags() == "-" and rows[2].flags() == "PMD"  # 400 snapshots, 300 sent
    assert rows[2].applied == 300 and rows[2].cpu_per_k == 20.0
    assert _row("ssh 15 s", 15, 10, 1.0).flags() == "R"
    assert _row("gnmi 1 s", 1, 300, 1.0, generator_cpu_s=50.0).flags() == "G"
    assert _row("gnmi 1 s", 1, 300, 1.0, scrape_failures=1).flags() == "S"
    assert "saturated" in "".join(bench.caveat_lines(rows))
    assert "gnmi 1 s" in bench.row_line(rows[2]) and "down: {'stale': 2}" in bench.row_line(rows[2])
    assert bench.ratio_lines(rows[:1])[0].startswith("(no ratio")


def test_a_small_fleet_end_to_end() -> None:
    """5 switches x 8 ports: gNMI at 1 s, SSH at 2 s, and the shard split, through the real
    exporter subprocess; bounded (the bench's own waits, and this timeout)."""
    argv = [sys.executable, str(REPO / "bench/gnmi_fleet.py"), "--targets", "5", "--ports", "8",
            "--configs", "gnmi1,ssh2,shard", "--duration", "2", "--scrapes", "2",
            "--up-timeout", "40", "--workers", "2"]  # fmt: skip
    run = subprocess.run(argv, capture_output=True, text=True, timeout=150, cwd=REPO)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    for name in ("gnmi 1 s", "ssh 2 s"):
        row = next(line for line in lines if line.startswith(name)).split()
        assert row[3] == "5" and float(row[4]) < 40  # 5 switches, all up (seconds, not "N up")
        assert float(row[6]) > 0 and float(row[7]) > 0  # polls, and sets sent
    assert "gnmi: whole, disjoint; ssh: whole, disjoint" in run.stdout
    assert "the same split with gNMI as with SSH" in run.stdout
