"""Host facts collection (agent.observe.hostfacts): which ports, which commands, how each
reaches the host (a given shell, a namespace, an SSH exec channel) and what a failure leaves.

The GID source runs for real here: the script of agent.observe.hostsources.SHOW_GIDS under
``sh`` on this machine, pointed (``SYSFS=``) at the recorded tree tests/data/perftest/sysfs
(README there), and its output goes through the same parser the job environment uses.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from agent.device import push
from agent.intent.model import Device, FabricIntent
from agent.observe import hostfacts
from agent.observe.hostfacts import (
    CommandResult,
    HostFacts,
    RdmaPortFacts,
    collect_host_facts,
    collect_many,
    command_for,
    exec_on,
    rdma_port_facts,
    run_local,
    sudo_wrapped,
)
from agent.observe.hostsources import SOURCES, HostSource
from agent.observe.perftest.gid import GidSelectionError, parse_show_gids

SYSFS = Path(__file__).resolve().parents[1] / "data" / "perftest" / "sysfs"


def _host(name: str, ports: list[dict[str, Any]], **reach: Any) -> dict[str, Any]:
    where = reach or {
        "host": "192.0.2.10",
        "username": "lab",
        "credentials": {"password_env": "HOSTFACTS_TEST_PASSWORD"},
    }
    # cable_m and mtu have no model default (issue #29): these tests are about the NICs
    ports = [{"cable_m": 3, "mtu": 9000, **port} for port in ports]
    return {"name": name, "platform": "linux_host", "role": "host", **where, "ports": ports}


def _intent(*hosts: dict[str, Any]) -> FabricIntent:
    return FabricIntent.model_validate(
        {"name": "t", "profile": {"name": "p"}, "devices": list(hosts)}
    )


TWO_NICS = _host(
    "gpu1",
    [
        {"name": "ens1f0np0", "speed": "100G", "rdma_device": "mlx5_0", "ipv4": "198.18.0.11/31"},
        {"name": "eth0", "speed": "1G"},  # management: no RDMA device, not a fact port
        {"name": "ens1f1np1", "speed": "100G", "rdma_device": "mlx5_1/1"},
    ],
)
INTENT = _intent(TWO_NICS, _host("h4", [{"name": "eth1", "speed": "10G"}], netns="h4ns"))


def _local_shell(sysfs: Path = SYSFS) -> hostfacts.HostShell:
    """This machine's ``sh`` reading the recorded sysfs tree instead of /sys."""

    def run(command: str) -> CommandResult:
        return run_local(["env", f"SYSFS={sysfs}", "sh", "-s"], command)

    return run


def test_fact_ports_are_the_rdma_ports_in_intent_order() -> None:
    device = INTENT.device("gpu1")
    assert device is not None
    assert rdma_port_facts(device) == [
        RdmaPortFacts("ens1f0np0", "mlx5_0", 1, "ens1f0np0", "198.18.0.11"),
        RdmaPortFacts("ens1f1np1", "mlx5_1", 1, "ens1f1np1", None),
    ]
    h4 = INTENT.device("h4")
    assert h4 is not None and rdma_port_facts(h4) == []


def test_the_gid_source_runs_and_parses_on_a_recorded_tree() -> None:
    device = INTENT.device("gpu1")
    assert device is not None
    facts = collect_host_facts(device, INTENT, shell=_local_shell())
    gids = facts.result("gids")
    assert facts.error is None and gids is not None and gids.ok, gids
    entries = parse_show_gids(gids.output)
    by_device = {(e.device, e.index): (e.version, e.netdev, str(e.ipv4)) for e in entries}
    # the same rows read_gid_table finds in that tree (tests/unit/test_perftest_gid.py)
    assert by_device[("mlx5_0", 3)] == ("v2", "ens1f0np0", "198.18.0.11")
    assert by_device[("rxe0", 1)] == ("v2", "eth1", "198.18.99.1")
    assert len(entries) == 14


def test_an_empty_tree_gives_a_valid_empty_table() -> None:
    facts = collect_host_facts(
        INTENT.devices[0], INTENT, shell=_local_shell(Path("/nonexistent-sysfs"))
    )
    gids = facts.result("gids")
    assert gids is not None and gids.ok
    assert parse_show_gids(gids.output) == []


@pytest.mark.parametrize(
    ("tail", "ipv4"),
    [("c612:0009", "198.18.0.9"), ("C612:0A09", "198.18.10.9"), ("zz12:0009", ""),
     ("c6:9", ""), ("c612:0009:1", "")],
)  # fmt: skip
def test_only_a_mapped_gid_of_hex_groups_gets_an_ipv4_and_the_rest_are_still_listed(
    tmp_path: Path, tail: str, ipv4: str
) -> None:
    """A GID the kernel would never write is listed without an address (the parser then names
    its line); the script goes on to the next slot."""
    port = tmp_path / "class" / "infiniband" / "rxe0" / "ports" / "1"
    for sub, text in (("gids", f"0000:0000:0000:0000:0000:ffff:{tail}"),
                      ("gid_attrs/types", "RoCE v2"), ("gid_attrs/ndevs", "eth1")):  # fmt: skip
        (port / sub).mkdir(parents=True)
        (port / sub / "0").write_text(text + "\n")
        (port / sub / "1").write_text(text.replace(tail, "c612:0001") + "\n")
    facts = collect_host_facts(INTENT.devices[0], INTENT, shell=_local_shell(tmp_path))
    gids = facts.result("gids")
    assert gids is not None and gids.ok
    rows = [line.split("\t") for line in gids.output.splitlines()[2:-1]]
    assert [(r[2], r[3], r[5]) for r in rows] == [
        ("0", f"0000:0000:0000:0000:0000:ffff:{tail}", ipv4),
        ("1", "0000:0000:0000:0000:0000:ffff:c612:0001", "198.18.0.1"),
    ]
    if not ipv4:
        with pytest.raises(GidSelectionError, match="show_gids line 3: Expected: INDEX and a GID"):
            parse_show_gids(gids.output)


PER_PORT = HostSource("mtu", "cat /sys/class/net/{netdev}/mtu # {device} {ib_port}", per_port=True)
AS_ROOT = HostSource("trust", "mlnx_qos -i eth0", sudo=True)


def test_per_port_and_sudo_sources_reach_the_shell_as_expected() -> None:
    seen: list[str] = []

    def shell(command: str) -> CommandResult:
        seen.append(command)
        return CommandResult(command, 0, "ok")

    facts = collect_host_facts(INTENT.devices[0], INTENT, sources=(PER_PORT, AS_ROOT), shell=shell)
    assert seen == [
        "cat /sys/class/net/ens1f0np0/mtu # mlx5_0 1",
        "cat /sys/class/net/ens1f1np1/mtu # mlx5_1 1",
        "sudo -n sh -c 'mlnx_qos -i eth0'",
    ]
    assert sorted(facts.port_results) == [("mtu", "ens1f0np0"), ("mtu", "ens1f1np1")]
    assert facts.result("mtu", "ens1f1np1") == CommandResult(seen[1], 0, "ok", source="mtu")
    assert facts.result("trust") is not None and facts.result("mtu") is None


def test_a_per_port_source_needs_a_port() -> None:
    with pytest.raises(ValueError, match="source mtu: a per-port source needs a port"):
        command_for(PER_PORT)


@pytest.mark.parametrize(
    ("script", "status", "output"),
    [
        ("echo hi", 0, "hi\n"),
        ("echo oops >&2; exit 3", 3, "oops\n"),  # stderr kept, in the output
        ("printf 'a\\nb'; false", 1, "a\nb"),
    ],
)
def test_run_local_keeps_status_and_both_streams(script: str, status: int, output: str) -> None:
    result = run_local(["sh", "-s"], script)
    assert (result.exit_status, result.output) == (status, output)


def test_run_local_timeout_and_missing_program() -> None:
    slow = run_local(["sh", "-s"], "sleep 5", timeout=0.2)
    assert slow.exit_status is None and slow.error == "timed out after 0.2 s"
    assert slow.failure() == "`sleep 5`: not run (timed out after 0.2 s)"
    missing = run_local(["/nonexistent/sh"], "true")
    assert missing.exit_status is None and "No such file" in missing.error


@pytest.mark.parametrize(
    ("result", "message"),
    [
        (CommandResult("gids", 2, "x\nls: cannot access\n"), "`gids`: exit 2 (ls: cannot access)"),
        (CommandResult("mlnx_qos", 127, ""), "`mlnx_qos`: exit 127 (no output)"),
        (CommandResult("dcb", None, error="no SSH channel"), "`dcb`: not run (no SSH channel)"),
    ],
)
def test_failure_names_the_command_and_why(result: CommandResult, message: str) -> None:
    assert not result.ok
    assert result.failure() == message


def test_a_script_is_named_by_its_source_not_quoted_whole() -> None:
    script = CommandResult(SOURCES[0].command, None, error="timed out after 30 s", source="gids")
    lines = len(SOURCES[0].command.splitlines())
    assert script.failure() == f"`gids ({lines}-line script)`: not run (timed out after 30 s)"
    long_line = CommandResult("x" * 161, 1, "boom")
    assert long_line.failure() == "`script (1-line script)`: exit 1 (boom)"


# ------------------------------------------------------------------ SSH exec channels


class FakeChannel:
    def __init__(
        self, output: bytes, status: int, *, hang: bool = False, no_status: bool = False
    ) -> None:
        self.chunks = [output[i : i + 7] for i in range(0, len(output), 7)] + [b""]
        self.status = status
        self.hang = hang
        self.status_event = threading.Event()
        if not no_status:
            self.status_event.set()
        self.command = ""
        self.stdin = b""
        self.events: list[str] = []

    def settimeout(self, timeout: float) -> None:
        self.events.append(f"timeout {timeout:g}")

    def set_combine_stderr(self, combine: bool) -> None:
        self.events.append(f"combine {combine}")

    def exec_command(self, command: str) -> None:
        self.command = command

    def sendall(self, data: bytes) -> None:
        self.stdin += data

    def shutdown_write(self) -> None:
        self.events.append("eof")

    def recv(self, size: int) -> bytes:
        if self.hang:
            raise TimeoutError
        return self.chunks.pop(0)

    def recv_exit_status(self) -> int:
        return self.status

    def close(self) -> None:
        self.events.append("closed")


class FakeTransport:
    def __init__(self, *channels: FakeChannel, refuse: Exception | None = None) -> None:
        self.channels = list(channels)
        self.opened: list[FakeChannel] = []
        self.refuse = refuse

    def open_session(self, timeout: float | None = None) -> FakeChannel:
        if self.refuse is not None:
            raise self.refuse
        channel = self.channels.pop(0)
        self.opened.append(channel)
        return channel


def test_exec_channel_feeds_the_script_and_reads_the_status() -> None:
    channel = FakeChannel(b"DEV\tPORT\nn_gids_found=0\n", 0)
    result = exec_on(FakeTransport(channel), "sh -s", "line one\nline two")
    assert result == CommandResult("line one\nline two", 0, "DEV\tPORT\nn_gids_found=0\n")
    assert channel.command == "LC_ALL=C sh -s"
    assert channel.stdin == b"line one\nline two\n"
    assert channel.events == ["timeout 30", "combine True", "eof", "closed"]


@pytest.mark.parametrize(
    ("transport", "status", "error"),
    [
        (FakeTransport(FakeChannel(b"", 0, hang=True)), None, "timed out after 0.2 s"),
        (FakeTransport(FakeChannel(b"partial", -1)), None, "no exit status from SSH"),
        (FakeTransport(refuse=EOFError()), None, "no SSH channel: EOFError"),
        (FakeTransport(FakeChannel(b"", 0, no_status=True)), None, "timed out after 0.2 s"),
        (FakeTransport(FakeChannel(b"sudo: a password is required\n", 1)), 1, ""),
    ],
)
def test_exec_channel_failures(transport: FakeTransport, status: int | None, error: str) -> None:
    result = exec_on(transport, "sudo -n sh -s", "mlnx_qos -i eth1", shown="sudo -n ", timeout=0.2)
    assert (result.exit_status, result.error) == (status, error)
    assert result.command == "sudo -n mlnx_qos -i eth1"
    assert not result.ok


def test_exec_channel_output_is_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hostfacts, "MAX_OUTPUT_BYTES", 20)
    result = exec_on(FakeTransport(FakeChannel(b"x" * 100, 0)), "sh -s", "yes")
    assert result.output == "x" * 20 + "\n[output cut at 1 MiB]"


class FakeConnection:
    def __init__(self, transport: FakeTransport) -> None:
        class Client:
            def get_transport(self) -> FakeTransport:
                return transport

        class Netmiko:
            remote_conn_pre = Client()

        self.netmiko = Netmiko()
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_ssh_host_runs_each_source_on_one_session(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSTFACTS_TEST_PASSWORD", "x")
    channels = [FakeChannel(b"n_gids_found=0\n", 0), FakeChannel(b"", 0), FakeChannel(b"", 0)]
    transport = FakeTransport(*channels)
    connection = FakeConnection(transport)
    connected: list[str] = []

    def connect(device: Device, platform: Any) -> FakeConnection:
        connected.append(f"{device.name} {platform.name}")
        return connection

    monkeypatch.setattr(push, "connect", connect)
    facts = collect_host_facts(INTENT.devices[0], INTENT, sources=(*SOURCES, AS_ROOT))
    assert connected == ["gpu1 linux_host"] and connection.closed
    assert [c.command for c in transport.opened] == [
        "LC_ALL=C sh -s",
        "LC_ALL=C sudo -n sh -s",
    ]
    assert facts.result("trust") == CommandResult("sudo -n mlnx_qos -i eth0", 0, "", source="trust")
    assert facts.result("gids") is not None and facts.error is None


def test_an_unreachable_host_runs_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSTFACTS_TEST_PASSWORD", "x")

    def connect(device: Device, platform: Any) -> None:
        raise push.Unreachable("gpu1", "timed out", "192.0.2.10:22 sent no SSH banner", "fix")

    monkeypatch.setattr(push, "connect", connect)
    facts = collect_host_facts(INTENT.devices[0], INTENT)
    assert facts.error == "host gpu1: timed out: 192.0.2.10:22 sent no SSH banner. Fix: fix"
    assert facts.results == {} and facts.port_results == {}
    assert [p.device for p in facts.ports] == ["mlx5_0", "mlx5_1"]  # still named


def test_a_missing_namespace_is_unreachable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(hostfacts, "NETNS_DIR", tmp_path)
    device = INTENT.device("h4")
    assert device is not None
    facts = collect_host_facts(device, INTENT)
    assert facts.error == f"host h4: network namespace h4ns does not exist ({tmp_path}/h4ns)"
    assert facts.results == {}


def test_a_namespace_host_runs_in_its_namespace(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "h4ns").touch()
    monkeypatch.setattr(hostfacts, "NETNS_DIR", tmp_path)
    calls: list[tuple[list[str], str]] = []

    def fake_run_local(argv: list[str], script: str) -> CommandResult:
        calls.append((argv, script))
        return CommandResult(script, 0, "")

    monkeypatch.setattr(hostfacts, "run_local", fake_run_local)
    device = INTENT.device("h4")
    assert device is not None
    collect_host_facts(device, INTENT, sources=(AS_ROOT,))
    # already root in the lab: a sudo source runs as it is
    assert calls == [(["ip", "netns", "exec", "h4ns", "sh", "-s"], "mlnx_qos -i eth0")]


# ------------------------------------------------------------------ many hosts


def test_collect_many_in_order_one_failure_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    intent = _intent(
        TWO_NICS,
        _host("gpu2", [{"name": "eth1", "speed": "100G", "rdma_device": "rxe0"}]),
        _host("gpu3", [{"name": "eth1", "speed": "100G", "rdma_device": "rxe0"}]),
    )
    threads: set[str] = set()

    def shell_for(device: Device) -> hostfacts.HostShell:
        def shell(command: str) -> CommandResult:
            threads.add(threading.current_thread().name)
            if device.name == "gpu2":
                raise RuntimeError("boom")
            return CommandResult(command, 0, device.name)

        return shell

    facts = collect_many(intent.devices, intent, shell_for=shell_for)
    assert list(facts) == ["gpu1", "gpu2", "gpu3"]
    assert facts["gpu2"].error == "host gpu2: host facts not collected: boom"
    assert [p.device for p in facts["gpu2"].ports] == ["rxe0"]
    gids = facts["gpu3"].result("gids")
    assert gids is not None and gids.output == "gpu3"
    assert all(name != threading.main_thread().name for name in threads)  # the fan-out ran it


def test_collect_many_goes_through_run_each(monkeypatch: pytest.MonkeyPatch) -> None:
    from agent.device import fanout

    seen: list[tuple[list[str], int | None]] = []
    real = fanout.run_each

    def spy(items: Any, work: Any, parallelism: int | None = 32, on_result: Any = None) -> Any:
        seen.append((list(items), parallelism))
        return real(items, work, parallelism)

    monkeypatch.setattr(fanout, "run_each", spy)
    collect_many(INTENT.devices[:1], INTENT, shell_for=lambda d: _local_shell(), parallelism=4)
    assert seen == [(["gpu1"], 4)]


def test_sudo_wrapping_quotes_the_whole_script() -> None:
    assert sudo_wrapped("a 'b'\nc") == "sudo -n sh -c 'a '\"'\"'b'\"'\"'\nc'"


def test_host_facts_lookup() -> None:
    facts = HostFacts("h", results={"gids": CommandResult("g", 0)})
    assert facts.result("gids") == CommandResult("g", 0)
    assert facts.result("gids", "eth1") is None


def test_a_command_that_never_stops_printing_times_out(monkeypatch: pytest.MonkeyPatch) -> None:
    class Endless(FakeChannel):
        def recv(self, size: int) -> bytes:
            return b"y\n"

    result = exec_on(FakeTransport(Endless(b"", 0)), "sh -s", "yes", timeout=0.2)
    assert (result.exit_status, result.error) == (None, "timed out after 0.2 s")
