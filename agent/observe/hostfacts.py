"""What a host says about its RDMA setup: raw command outputs, read once, judged later.

The job environment (``roce-agent nccl``) and the host pre-flight checks (RC2xx) both work on
a :class:`HostFacts`: the outputs of the commands in :data:`agent.observe.hostsources.SOURCES`
run on the host over the same SSH session the agent uses for ``linux_host`` (lab VM hosts are
reached the same way). Collection and judgement are apart, as for switches (checks never touch
a live connection): parsers and checks are tested on recorded outputs.

A command that could not run, or exited non-zero, is kept with its exit status and output: a
check that needs it says "unverified" and names the command, never passes silently.

How a command reaches the host (:func:`collect_host_facts`, :class:`HostShell`):

- a host with ``host:`` over SSH, on the session :func:`agent.device.push.connect` opens for
  ``linux_host`` (credentials, pinned host key, retries as for every other host). Each command
  runs on its own SSH *exec* channel of that session's transport (RFC 4254 section 6.5,
  paramiko ``Transport.open_session`` / ``Channel.exec_command``), not typed into the
  interactive shell: the exit status comes from the SSH ``exit-status`` message
  (``Channel.recv_exit_status``) instead of a marker echoed into the output, and a multi-line
  script (the GID reader is one) is fed to ``sh -s`` on standard input, so no prompt, echo,
  terminal width or line-length limit of a pty can change it. stderr is merged into the output
  (``Channel.set_combine_stderr``), as a shell session shows it;
- a lab host with ``netns:`` (no SSH), ``ip netns exec NS sh -s`` on this machine (which must be
  root to enter the namespace, as the lab's other namespace probes are);
- ``sudo`` sources run as ``sudo -n sh -s`` (never a password prompt: without passwordless sudo
  the command fails with sudo's message and is reported as such). In a namespace the agent is
  already root, so they run as they are.

A host that cannot be reached (SSH refused, authentication, host key, missing namespace) gets
:attr:`HostFacts.error` and nothing is run.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.errors import AgentError, printable
from agent.observe.hostsources import SOURCES, HostSource

if TYPE_CHECKING:
    from agent.intent.model import Device, FabricIntent


@dataclass(frozen=True)
class CommandResult:
    """One command as run on the host."""

    command: str
    exit_status: int | None  # None: it could not be run at all (no session, timed out)
    output: str = ""  # stdout and stderr together, as a shell session shows them
    error: str = ""  # why it could not be run (exit_status None)
    source: str = ""  # the HostSource's name, when collected from one

    @property
    def ok(self) -> bool:
        return self.exit_status == 0

    def shown(self) -> str:
        """The command as a message names it: itself when it is one short line, else the
        source's name and the script's length (a 30-line script in a message helps no one)."""
        lines = self.command.strip().splitlines()
        if len(lines) <= 1 and len(self.command) <= 160:
            return self.command
        return f"{self.source or 'script'} ({len(lines)}-line script)"

    def failure(self) -> str:
        """``command: why`` for an "unverified" message."""
        if self.exit_status is None:
            return f"`{self.shown()}`: not run ({self.error or 'no session'})"
        detail = self.output.strip().splitlines()[-1:] or ["no output"]
        return f"`{self.shown()}`: exit {self.exit_status} ({detail[0][:160]})"


@dataclass(frozen=True)
class RdmaPortFacts:
    """One RDMA port the intent declares on the host: the names the commands take."""

    port: str  # the intent's port name (the host's netdev for linux_host)
    device: str  # RDMA device, e.g. mlx5_0 or rxe0
    ib_port: int  # RDMA port number, 1-based
    netdev: str  # the Linux interface the RDMA port runs on
    ipv4: str | None  # the fabric address on it (the intent's), without prefix length


@dataclass
class HostFacts:
    """Every source of :data:`agent.observe.hostsources.SOURCES` for one host."""

    host: str
    ports: list[RdmaPortFacts] = field(default_factory=list)
    # Host-wide sources by name; per-port sources by (name, port.port).
    results: dict[str, CommandResult] = field(default_factory=dict)
    port_results: dict[tuple[str, str], CommandResult] = field(default_factory=dict)
    error: str | None = None  # the host could not be reached: nothing was run

    def result(self, name: str, port: str | None = None) -> CommandResult | None:
        if port is None:
            return self.results.get(name)
        return self.port_results.get((name, port))


# --------------------------------------------------------------------------- collection

# One command's budget: the sources are sysfs reads and short tools; a host that takes longer
# is reported as "not run (timed out)", never waited on forever.
COMMAND_TIMEOUT_S = 30.0
# What is kept of one command's output: a GID table of 4096 slots is under 400 kB.
MAX_OUTPUT_BYTES = 1 << 20
NETNS_DIR = Path("/run/netns")  # where `ip netns add` puts its names (ip-netns(8))

HostShell = Callable[[str], CommandResult]
"""Runs one command (a shell script, possibly several lines) on one host."""


class HostUnreachable(AgentError):
    """The host could not be reached: no command was run there."""


def rdma_port_facts(device: Device) -> list[RdmaPortFacts]:
    """The ports of ``device`` that declare an ``rdma_device``, in the intent's order. On a
    ``linux_host`` the intent's port name is the netdev (agent.intent.model.Port)."""
    ports = []
    for port in device.rdma_ports():
        name_and_port = port.rdma_name_and_port
        assert name_and_port is not None  # rdma_ports() holds only ports with a device
        ports.append(
            RdmaPortFacts(
                port=port.name,
                device=name_and_port[0],
                ib_port=name_and_port[1],
                netdev=port.name,
                ipv4=str(port.ipv4.ip) if port.ipv4 is not None else None,
            )
        )
    return ports


def command_for(source: HostSource, port: RdmaPortFacts | None = None) -> str:
    """The source's command with the port's names filled in, each quoted for the shell (the
    intent's names are already restricted to shell-safe characters, so quoting changes none
    of them: it is the second line of defence)."""
    if not source.per_port:
        return source.command
    if port is None:
        raise ValueError(f"source {source.name}: a per-port source needs a port")
    return source.command.format(
        device=shlex.quote(port.device),
        ib_port=port.ib_port,
        netdev=shlex.quote(port.netdev),
    )


def _output(raw: bytes) -> str:
    cut = raw[:MAX_OUTPUT_BYTES]
    text = cut.decode("utf-8", "replace")
    return text + ("\n[output cut at 1 MiB]" if len(raw) > MAX_OUTPUT_BYTES else "")


def _run_sources(
    facts: HostFacts, sources: Sequence[HostSource], shell: HostShell, sudo: HostShell
) -> None:
    for source in sources:
        run = sudo if source.sudo else shell
        if not source.per_port:
            facts.results[source.name] = replace(run(command_for(source)), source=source.name)
            continue
        for port in facts.ports:
            result = run(command_for(source, port))
            facts.port_results[(source.name, port.port)] = replace(result, source=source.name)


def collect_host_facts(
    device: Device,
    intent: FabricIntent,
    *,
    sources: Sequence[HostSource] = SOURCES,
    shell: HostShell | None = None,
) -> HostFacts:
    """Every source in ``sources`` run once on ``device`` (per-port sources once per RDMA port
    of the intent). ``shell`` replaces the host's own (tests, recorded hosts); ``sudo`` sources
    then run through it as ``sudo -n sh -c '...'``.

    Never raises for the host's sake: a host that cannot be reached comes back with
    :attr:`HostFacts.error` and no result; a command that fails is a result with its status.
    ``intent`` is the fabric the device belongs to (the same object the device came from);
    the ports come from the device's own entry.
    """
    del intent  # the device entry carries its ports; kept for the shared signature
    facts = HostFacts(host=device.name, ports=rdma_port_facts(device))
    if shell is not None:
        _run_sources(facts, sources, shell, lambda command: shell(sudo_wrapped(command)))
        return facts
    try:
        with open_shell(device) as (plain, sudo):
            _run_sources(facts, sources, plain, sudo)
    except HostUnreachable as exc:
        facts.error = str(exc)
        facts.results.clear()
        facts.port_results.clear()
    return facts


def collect_many(
    devices: Iterable[Device],
    intent: FabricIntent,
    *,
    sources: Sequence[HostSource] = SOURCES,
    shell_for: Callable[[Device], HostShell] | None = None,
    parallelism: int | None = None,
) -> dict[str, HostFacts]:
    """:func:`collect_host_facts` on each device at once, through the one fan-out runner
    (:func:`agent.device.fanout.run_each`), in the order given. An unexpected failure of one
    host becomes that host's :attr:`HostFacts.error`; the others still report."""
    from agent.device.fanout import DEFAULT_PARALLELISM, run_each

    items = {device.name: device for device in devices}

    def work(device: Device) -> HostFacts:
        shell = shell_for(device) if shell_for is not None else None
        return collect_host_facts(device, intent, sources=sources, shell=shell)

    outcomes = run_each(items, work, parallelism if parallelism else DEFAULT_PARALLELISM)
    collected: dict[str, HostFacts] = {}
    for name, outcome in outcomes.items():
        if isinstance(outcome, Exception):
            why = printable(str(outcome).strip() or type(outcome).__name__)
            outcome = HostFacts(
                host=name,
                ports=rdma_port_facts(items[name]),
                error=f"host {name}: host facts not collected: {why}",
            )
        collected[name] = outcome
    return collected


def sudo_wrapped(command: str) -> str:
    """``command`` as root without a prompt, for a shell that takes one command line."""
    return f"sudo -n sh -c {shlex.quote(command)}"


# --------------------------------------------------------------------------- the shells


@contextmanager
def open_shell(device: Device) -> Iterator[tuple[HostShell, HostShell]]:
    """The host's plain and ``sudo`` shells, open for the block; raises
    :class:`HostUnreachable` when it cannot be reached."""
    if device.netns is not None and device.host is None:
        yield netns_shells(device.name, device.netns)
        return
    with ssh_shells(device) as shells:
        yield shells


def netns_shells(host: str, netns: str) -> tuple[HostShell, HostShell]:
    """A lab namespace host: ``ip netns exec NS sh -s``. The agent runs as root there (it
    could not enter the namespace otherwise), so the sudo shell is the plain one."""
    if not (NETNS_DIR / netns).exists():
        raise HostUnreachable(
            f"host {host}: network namespace {netns} does not exist ({NETNS_DIR / netns})"
        )

    def run(command: str) -> CommandResult:
        return run_local(["ip", "netns", "exec", netns, "sh", "-s"], command)

    return run, run


def run_local(argv: list[str], script: str, timeout: float = COMMAND_TIMEOUT_S) -> CommandResult:
    """``script`` on the standard input of ``argv`` (a shell) on this machine."""
    try:
        done = subprocess.run(
            argv,
            input=script.encode(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=timeout,
            check=False,
            env={**os.environ, "LC_ALL": "C"},
        )
    except subprocess.TimeoutExpired:
        return CommandResult(script, None, error=f"timed out after {timeout:g} s")
    except OSError as exc:
        return CommandResult(script, None, error=f"{argv[0]}: {exc.strerror or exc}")
    return CommandResult(script, done.returncode, _output(done.stdout))


@contextmanager
def ssh_shells(device: Device) -> Iterator[tuple[HostShell, HostShell]]:
    """One SSH session to the host (push.connect with the ``linux_host`` platform) for the
    block; each command on its own exec channel (module docstring)."""
    from agent.device.platforms import platform_for
    from agent.device.push import Unreachable, close_quietly, connect
    from agent.errors import CredentialError

    try:
        if device.credentials is not None:
            device.credentials.check_key(device.name)
        conn = connect(device, platform_for("linux_host"))
    except Unreachable as exc:  # "h1: timed out: …" already names the host
        raise HostUnreachable(f"host {printable(str(exc))}") from None
    except CredentialError as exc:
        raise HostUnreachable(f"host {device.name}: {printable(str(exc))}") from None
    try:
        transport = conn.netmiko.remote_conn_pre.get_transport()
        yield (
            lambda command: exec_on(transport, "sh -s", command),
            lambda command: exec_on(transport, "sudo -n sh -s", command, shown="sudo -n "),
        )
    finally:
        close_quietly(conn)


def exec_on(
    transport: Any,
    remote: str,
    script: str,
    *,
    shown: str = "",
    timeout: float = COMMAND_TIMEOUT_S,
) -> CommandResult:
    """``script`` on the standard input of ``remote`` over a new exec channel of the paramiko
    ``transport``; the exit status is the channel's (None when the session ended first)."""
    command = shown + script
    try:
        channel = transport.open_session(timeout=timeout)
    except Exception as exc:  # paramiko raises SSHException, EOFError or OSError here
        return CommandResult(command, None, error=f"no SSH channel: {_why(exc)}")
    try:
        channel.settimeout(timeout)
        channel.set_combine_stderr(True)
        channel.exec_command(f"LC_ALL=C {remote}")
        channel.sendall(script.encode() + b"\n")
        channel.shutdown_write()
        deadline = time.monotonic() + timeout
        output = _read_all(channel, deadline)
        status = _exit_status(channel, deadline)
    except TimeoutError:
        return CommandResult(command, None, error=f"timed out after {timeout:g} s")
    except Exception as exc:  # the session died under the command
        return CommandResult(command, None, error=_why(exc))
    finally:
        channel.close()
    # -1: the server sent no exit status (paramiko's recv_exit_status), i.e. no result.
    if status == -1:
        return CommandResult(command, None, _output(output), error="no exit status from SSH")
    return CommandResult(command, status, _output(output))


def _read_all(channel: Any, deadline: float) -> bytes:
    """Everything the command prints until it closes its output, within ``deadline`` (each
    ``recv`` also times out on its own: a command that prints nothing for the whole budget)."""
    chunks: list[bytes] = []
    size = 0
    while chunk := channel.recv(65536):
        if size <= MAX_OUTPUT_BYTES:  # keep reading past the cap so the command can end
            chunks.append(chunk)
        size += len(chunk)
        if time.monotonic() > deadline:  # a command that never stops printing
            raise TimeoutError
    return b"".join(chunks)


def _exit_status(channel: Any, deadline: float) -> int:
    """The channel's exit status once the server sent it (paramiko sets ``status_event`` on
    ``exit-status`` or when the channel closes); a server that sends neither in time is a
    timeout, not a hang."""
    event = getattr(channel, "status_event", None)
    if event is not None and not event.wait(max(0.0, deadline - time.monotonic())):
        raise TimeoutError
    status: int = channel.recv_exit_status()
    return status


def _why(exc: BaseException) -> str:
    return printable(str(exc).strip() or type(exc).__name__)
