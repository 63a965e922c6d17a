"""What a host says about its RDMA setup: raw command outputs, read once, judged later.

The job environment (``roce-agent nccl``) and the host pre-flight checks (RC2xx) both work on
a :class:`HostFacts`: the outputs of the commands in :data:`agent.observe.hostsources.SOURCES`
run on the host over the same SSH session the agent uses for ``linux_host`` (lab VM hosts are
reached the same way). Collection and judgement are apart, as for switches (checks never touch
a live connection): parsers and checks are tested on recorded outputs.

A command that could not run, or exited non-zero, is kept with its exit status and output: a
check that needs it says "unverified" and names the command, never passes silently.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class CommandResult:
    """One command as run on the host."""

    command: str
    exit_status: int | None  # None: it could not be run at all (no session, timed out)
    output: str = ""  # stdout and stderr together, as a shell session shows them
    error: str = ""  # why it could not be run (exit_status None)

    @property
    def ok(self) -> bool:
        return self.exit_status == 0

    def failure(self) -> str:
        """``command: why`` for an "unverified" message."""
        if self.exit_status is None:
            return f"`{self.command}`: not run ({self.error or 'no session'})"
        detail = self.output.strip().splitlines()[-1:] or ["no output"]
        return f"`{self.command}`: exit {self.exit_status} ({detail[0][:160]})"


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
