"""Push at fleet scale, measured fairly: the agent's canary-plus-batches apply against plain
netmiko in a thread pool (what Nornir's threaded runner does), same run, same switches, same
lines; then drift and poll cycles over one shard.

The switches are lab management planes (lab.mgmt: the real SSH server and EOS-style CLI,
config sessions with commit timer) over an in-memory data plane that validates like the real
one. Each command's reply is held back like a real NOS's (``--command-ms``, default 30-200 ms,
uniform) and each commit longer (``--commit-s``, default 1-2 s). The hold is a sleep, not
burnt CPU, so the two cores go to the agent and to the SSH/CLI work the emulator cannot avoid;
the emulator's own CPU is reported beside the agent's so the reader can see what it took.

Each push phase gets freshly started switches (identical state), so both sides make the same
change. CPU is measured in this process only (``time.process_time``): the switches run in
``--servers`` child processes, whose CPU is reported separately (``RUSAGE_CHILDREN``).

    python bench/push_fanout.py [--switches 1000] [--parallelism 32] [--batch-size 250]
                                [--agent-parallelism 32,40]

``--agent-parallelism`` runs the agent once per value (fresh switches each time), so the same
run shows how many sessions the agent needs to match the pool's wall time at its CPU cost.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from lab.mgmt.ssh_server import Faults  # noqa: E402 -- after the sys.path insert above

PASSWORD = "bench-secret"
PORTS = 4
START_TIMEOUT_S = 30.0  # per server process, plus START_PER_SWITCH_S for each of its switches
START_PER_SWITCH_S = 0.5
_COMMIT = re.compile(
    r"^\s*(commit(\s+timer\b.*)?|copy running-config startup-config|write memory)\s*$"
)


class BenchError(Exception):
    """Bad bench arguments, or the emulated switches could not be started."""


@dataclass(frozen=True)
class Latency:
    """How long an emulated NOS holds back its reply: a uniform range per kind, in seconds."""

    command: tuple[float, float]
    commit: tuple[float, float]

    def delay(self, line: str, rng: random.Random) -> float:
        """The hold for one input line. An empty line (netmiko looking for the prompt) is
        answered at once, as a NOS's line discipline does; a commit or save costs a commit."""
        if not line.strip():
            return 0.0
        low, high = self.commit if _COMMIT.match(line) else self.command
        return rng.uniform(low, high)


def parse_range(text: str, option: str, scale: float = 1.0) -> tuple[float, float]:
    """``"30,200"`` (or one number) -> (low, high) times ``scale``; a clear error otherwise."""
    parts = text.split(",")
    try:
        values = [float(part) for part in parts]
    except ValueError:
        raise BenchError(f"{option}: Expected: LOW,HIGH or one number. Actual: {text!r}") from None
    if len(values) == 1:
        values *= 2
    if len(values) != 2 or not all(math.isfinite(v) and v >= 0 for v in values):
        raise BenchError(f"{option}: Expected: LOW,HIGH, both >= 0. Actual: {text!r}")
    low, high = values
    if low > high:
        raise BenchError(f"{option}: Expected: LOW <= HIGH. Actual: {text!r}")
    return low * scale, high * scale


def parse_sessions(text: str | None, default: int) -> tuple[int, ...]:
    """``"32,40"`` -> (32, 40); None -> (default,); a clear error otherwise."""
    if text is None:
        return (default,)
    try:
        values = tuple(int(part) for part in text.split(","))
    except ValueError:
        values = ()
    if not values or min(values) < 1:
        raise BenchError(f"--agent-parallelism: Expected: N[,N...], each >= 1. Actual: {text!r}")
    return values


class EmulatedNos(Faults):
    """The management plane's reply hold (its fault knob) set to a real NOS's latency."""

    def __init__(self, latency: Latency, seed: int) -> None:
        super().__init__()
        self.latency = latency
        self.rng = random.Random(seed)

    def delay_for(self, line: str) -> float:
        return self.latency.delay(line, self.rng)


# --------------------------------------------------------------------------- switches


async def _serve(indices: range, state: Path, port_file: Path, latency: Latency, seed: int) -> None:
    import asyncssh

    from lab.mgmt.eos.personality import EosPersonality
    from lab.mgmt.persistence import HOST_KEY
    from lab.mgmt.ssh_server import AuthSettings, SshSettings, start_ssh_server
    from lab.mgmt.switch import LoopClock, PortInfo, SwitchManager
    from lab.mgmt.testing import FakeDataplane, fake_switch_config

    # Read, never create: the parent made the key before starting any server (no race).
    key = asyncssh.read_private_key(str(state / HOST_KEY))
    auth = AuthSettings("admin", PASSWORD, None)
    ports: dict[str, int] = {}
    parent = os.getppid()
    for index in indices:
        name = f"sw{index}"
        directory = state / name
        directory.mkdir(parents=True, exist_ok=True)
        dataplane = FakeDataplane(fake_switch_config(name, [f"eth{i}" for i in range(1, 5)]))
        manager = SwitchManager(
            name,
            [PortInfo(f"Ethernet{i}", 10_000_000) for i in range(1, PORTS + 1)],
            dataplane,
            LoopClock(),
        )
        eos = EosPersonality(manager, directory)
        await eos.start()
        nos = EmulatedNos(latency, seed * 1_000_003 + index)
        server = await start_ssh_server(SshSettings("127.0.0.1", 0, key, auth), eos, nos)
        ports[name] = int(server.sockets[0].getsockname()[1])
    tmp = port_file.with_name(port_file.name + ".tmp")
    tmp.write_text(json.dumps(ports))
    os.replace(tmp, port_file)  # whole or absent: the parent never reads half a file
    while os.getppid() == parent:  # until terminated, or the bench itself is gone
        await asyncio.sleep(1.0)


def start_servers(
    size: int, servers: int, state: Path, latency: Latency, seed: int
) -> tuple[list[subprocess.Popen[bytes]], dict[str, int]]:
    """``size`` switches in ``servers`` processes; their ports by switch name. Every wait is
    bounded, and a server that exits early stops the others and raises."""
    from lab.mgmt.persistence import load_or_create_host_key

    state.mkdir(parents=True, exist_ok=True)
    load_or_create_host_key(state)  # once, here: the servers only read it
    processes: list[subprocess.Popen[bytes]] = []
    files = []
    # Round robin: neighbouring switches (which a rollout's workers reach together) live in
    # different processes, so no single emulator process becomes the bottleneck.
    share = (size + servers - 1) // servers
    log = (state / "servers.log").open("ab")
    try:
        for server in range(min(servers, size)):
            port_file = state / f"ports-{server}.json"
            files.append(port_file)
            processes.append(
                subprocess.Popen(
                    [
                        sys.executable, __file__, "--serve", str(server), str(size),
                        str(servers), str(state), str(port_file),
                        f"{latency.command[0]},{latency.command[1]}",
                        f"{latency.commit[0]},{latency.commit[1]}", str(seed),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                )
            )  # fmt: skip
    finally:
        log.close()
    ports: dict[str, int] = {}
    limit = START_TIMEOUT_S + START_PER_SWITCH_S * share
    deadline = time.monotonic() + limit
    try:
        for port_file in files:
            while not port_file.exists():
                # A server that died (or never came up) must not leave its sibling running.
                dead = [p for p in processes if p.poll() is not None]
                if dead:
                    raise BenchError(
                        f"management plane server exited with {dead[0].returncode} during "
                        f"start-up (log: {state / 'servers.log'})"
                    )
                if time.monotonic() > deadline:
                    raise BenchError(f"management planes not up after {limit:.0f}s")
                time.sleep(0.1)
            ports.update(json.loads(port_file.read_text()))
    except BaseException:
        stop_servers(processes)
        raise
    # By switch number, so whoever walks them in order spreads over the processes.
    return processes, dict(sorted(ports.items(), key=lambda item: int(item[0][2:])))


def stop_servers(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def write_fabric(ports: dict[str, int], path: Path) -> None:
    from lab.mgmt.launcher import host_public_key

    host_key = host_public_key(path.parent)  # the servers' shared key: checking stays on
    lines = [
        "name: fanout",
        "profile: nvidia-default",
        "overrides:",
        "  ecn: {queues: {3: {min_threshold: 6KB, max_threshold: 18KB}}}",
        "  buffers: {pause_threshold: 30000}",
        "defaults: {username: admin, credentials: {password_env: ROCE_BENCH_PASSWORD}}",
        "devices:",
    ]
    for name, port in sorted(ports.items(), key=lambda item: int(item[0][2:])):
        lines += [
            f"  - name: {name}",
            "    platform: arista_eos",
            "    role: leaf",
            "    host: 127.0.0.1",
            f"    port: {port}",
            f"    host_key: {host_key}",
            "    ports:",
            *(f"      - {{name: Ethernet{i}, speed: 10M, cable_m: 1, mtu: 9000}}"
              for i in range(1, PORTS + 1)),
        ]  # fmt: skip
    path.write_text("\n".join(lines) + "\n")


# --------------------------------------------------------------------------- measurements


@dataclass
class Phase:
    """One measured phase: wall and this process's CPU, the switch processes' CPU, outcome."""

    name: str
    devices: int
    wall_s: float
    cpu_s: float
    switch_cpu_s: float
    outcome: dict[str, int]

    def line(self) -> str:
        per = self.cpu_s / max(1, self.devices)
        switch = self.switch_cpu_s / max(1, self.devices)
        return (
            f"{self.name:<34} {self.devices:>5} {self.wall_s:>8.1f} {self.cpu_s:>8.1f} "
            f"{per:>9.3f} {switch:>10.3f}  {dict(sorted(self.outcome.items()))}"
        )


_TICK = os.sysconf("SC_CLK_TCK")


def processes_cpu(pids: Sequence[int]) -> float:
    """User + system CPU seconds of running processes (``/proc/PID/stat``, Linux)."""
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15 of stat)
    return total / _TICK


def measure(
    name: str, devices: int, work: Callable[[], list[str]], switches: Sequence[int]
) -> Phase:
    """Run ``work``; wall time, this process's CPU and the switch processes' CPU over it."""
    switch_cpu = processes_cpu(switches)
    cpu, wall = time.process_time(), time.perf_counter()
    results = work()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return Phase(
        name, devices, wall, cpu, processes_cpu(switches) - switch_cpu, dict(Counter(results))
    )


def netmiko_push(ports: dict[str, int], lines: Sequence[str], workers: int) -> list[str]:
    """The ecosystem's way: per host, ``ConnectHandler`` + ``send_config_set`` +
    ``save_config`` (Nornir's netmiko_send_config and netmiko_save_config tasks), hosts over a
    ThreadPoolExecutor of ``workers`` (Nornir's threaded runner)."""
    from netmiko import ConnectHandler

    def one(port: int) -> str:
        try:
            with ConnectHandler(
                device_type="arista_eos",
                host="127.0.0.1",
                port=port,
                username="admin",
                password=PASSWORD,
                fast_cli=True,
                conn_timeout=10,
            ) as conn:
                output = conn.send_config_set(list(lines), cmd_verify=True)
                conn.save_config()
        except Exception as exc:  # counted, and the run goes on (Nornir's failed host)
            return f"failed ({type(exc).__name__})"
        return "failed (refused)" if "\n%" in output else "applied"

    pool = ThreadPoolExecutor(max_workers=max(1, min(workers, len(ports))))
    try:
        return list(pool.map(one, ports.values()))
    finally:  # interrupted: the queued hosts are dropped, not run one by one first
        pool.shutdown(wait=False, cancel_futures=True)


@dataclass
class Options:
    switches: int
    servers: int
    parallelism: int
    agent_parallelism: tuple[int, ...]
    canary: int
    batch_size: int
    shards: int
    latency: Latency
    seed: int
    baseline: bool
    poll_concurrency: int


def push_phase(options: Options, tmp: Path, agent_parallelism: int | None) -> None:
    """Fresh switches; push with the agent (canary + batches, ``agent_parallelism`` sessions)
    or, when that is None, with plain netmiko (``options.parallelism`` workers). Drift and
    poll cycles follow the first agent phase only: they do not depend on the push."""
    from agent.device.push import Pusher, Rollout
    from agent.intent.loader import load_fabric

    state = tmp / ("netmiko" if agent_parallelism is None else f"agent-{agent_parallelism}")
    processes, ports = start_servers(
        options.switches, options.servers, state, options.latency, options.seed
    )
    pids = [p.pid for p in processes]
    extra: list[Phase] = []
    try:
        fabric = state / "fabric.yml"
        write_fabric(ports, fabric)
        intent = load_fabric(fabric).intent
        if agent_parallelism is not None:
            pusher = Pusher.for_intent(intent, audit_dir=state / "agent-state")
            devices = pusher.select(())
            name = f"agent apply (canary {options.canary}, batches {options.batch_size})"
            if agent_parallelism != options.parallelism:
                name += f", {agent_parallelism} sessions"
            phase = measure(
                name,
                len(devices),
                lambda: [
                    r.result
                    for r in pusher.apply_all(
                        devices,
                        Rollout(
                            canary=options.canary,
                            batch_size=options.batch_size,
                            parallelism=agent_parallelism,
                        ),
                    )
                ],
                pids,
            )
            if not any(p.name.startswith("agent apply") for p in PHASES):
                extra = drift_and_poll(options, pusher, devices, pids)
        else:
            # The lines the agent would push to these (identical, fresh) switches.
            probe = Pusher.for_intent(intent)
            dry = probe.inspect(probe.select(())[0])
            if dry.result != "changes":
                raise BenchError(f"dry run on {dry.device}: {dry.result} {dry.error or ''}")
            lines = dry.lines
            phase = measure(
                "netmiko thread pool (Nornir's way)",
                len(ports),
                lambda: netmiko_push(ports, lines, options.parallelism),
                pids,
            )
            # The same end state as the agent's, checked the agent's way on a sample.
            sample = probe.select(())[:: max(1, len(ports) // 8)]
            left = [r for r in probe.inspect_all(sample) if r.result != "no-change"]
            if left:
                raise BenchError(
                    f"netmiko push left {left[0].device} {left[0].result} "
                    f"({len(left[0].differences)} differences, {left[0].error})"
                )
    finally:
        stop_servers(processes)
    PHASES.extend([phase, *extra])


PHASES: list[Phase] = []


def drift_and_poll(
    options: Options, pusher: Any, devices: Sequence[Any], pids: Sequence[int]
) -> list[Phase]:
    """Cycle times over one shard (``1/N``) of the same switches, right after the rollout:
    the agent's drift read (one login per device), then the exporter's switch poller twice
    (first cycle logs in, the second reuses the kept sessions, as the exporter does)."""
    from agent.intent.shard import parse_shard
    from exporters.poller import SwitchPoller, SwitchRead

    shard = parse_shard(f"1/{options.shards}")
    mine = [d for d in devices if shard.owns(d.name)]
    phases = [
        measure(
            f"drift read, shard 1/{options.shards}",
            len(mine),
            lambda: [r.result for r in pusher.inspect_all(mine, options.parallelism)],
            pids,
        )
    ]
    pollers = [
        SwitchPoller(
            d, store=None, interval_s=30, timeout_s=30,  # type: ignore[arg-type]
            read=SwitchRead(desired=pusher._desired(d, pusher_platform(d))),
        )
        for d in mine
    ]  # fmt: skip

    def cycle() -> list[str]:
        def one(poller: SwitchPoller) -> str:
            try:
                poll = poller.poll()
            except Exception as exc:
                return f"failed ({type(exc).__name__})"
            return "polled, drift 0" if poll.drift == 0 else f"polled, drift {poll.drift}"

        with ThreadPoolExecutor(max_workers=options.poll_concurrency) as pool:
            return list(pool.map(one, pollers))

    try:
        for label in ("1 (logins)", "2 (kept sessions)"):
            name = f"poll cycle {label}, shard 1/{options.shards}"
            phases.append(measure(name, len(mine), cycle, pids))
    finally:
        for poller in pollers:
            poller.close()
    return phases


def pusher_platform(device: Any) -> Any:
    from agent.device.platforms import platform_for

    return platform_for(device.platform)


def _terminated(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--switches", type=int, default=1000)
    parser.add_argument("--servers", type=int, default=4, help="switch server processes")
    parser.add_argument("--parallelism", type=int, default=None, help="default: the agent's")
    parser.add_argument(
        "--agent-parallelism",
        default=None,
        help="the agent's sessions, one phase per comma-separated value; default: --parallelism",
    )
    parser.add_argument("--canary", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=250)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--poll-concurrency", type=int, default=None, help="default: exporter's")
    parser.add_argument("--command-ms", default="30,200", help="reply hold per command, ms")
    parser.add_argument("--commit-s", default="1,2", help="reply hold per commit or save, s")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-baseline", action="store_true", help="skip the netmiko side")
    parser.add_argument("--serve", nargs=8, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        if args.serve:
            server, size, servers, state, port_file, command, commit, seed = args.serve
            latency = Latency(parse_range(command, "command"), parse_range(commit, "commit"))
            indices = range(int(server), int(size), int(servers))
            asyncio.run(_serve(indices, Path(state), Path(port_file), latency, int(seed)))
            return 0
        # SIGTERM unwinds like ^C, so the switch processes are stopped on the way out.
        signal.signal(signal.SIGTERM, _terminated)
        return run(args)
    except BenchError as exc:
        print(f"push_fanout: {exc}", file=sys.stderr)
        return 2


def run(args: argparse.Namespace) -> int:
    from agent.device.fanout import DEFAULT_PARALLELISM
    from exporters.exporter import DEFAULT_CONCURRENCY

    for option in ("switches", "servers", "batch_size", "shards"):
        if getattr(args, option) < 1:
            raise BenchError(
                f"--{option.replace('_', '-')}: Expected: >= 1. Actual: {getattr(args, option)}"
            )
    from agent.intent.shard import ShardError, parse_shard

    try:
        parse_shard(f"1/{args.shards}")
    except ShardError as exc:
        raise BenchError(f"--shards: {exc}") from None
    parallelism = args.parallelism or DEFAULT_PARALLELISM
    options = Options(
        switches=args.switches,
        servers=min(args.servers, args.switches),
        parallelism=parallelism,
        agent_parallelism=parse_sessions(args.agent_parallelism, parallelism),
        canary=args.canary,
        batch_size=args.batch_size,
        shards=args.shards,
        latency=Latency(
            parse_range(args.command_ms, "--command-ms", 1e-3),
            parse_range(args.commit_s, "--commit-s"),
        ),
        seed=args.seed,
        baseline=not args.no_baseline,
        poll_concurrency=args.poll_concurrency or DEFAULT_CONCURRENCY,
    )
    os.environ["ROCE_BENCH_PASSWORD"] = PASSWORD
    lat = options.latency
    print(
        f"push at fleet scale: {options.switches} emulated EOS switches in {options.servers} "
        f"server processes, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; reply hold "
        f"{lat.command[0] * 1e3:g}-{lat.command[1] * 1e3:g} ms per command, "
        f"{lat.commit[0]:g}-{lat.commit[1]:g} s per commit/save; parallelism "
        f"{options.parallelism}, poll concurrency {options.poll_concurrency}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        if options.baseline:
            push_phase(options, Path(tmp), agent_parallelism=None)
        for sessions in options.agent_parallelism:
            push_phase(options, Path(tmp), agent_parallelism=sessions)
    header = f"{'phase':<34} {'N':>5} {'wall s':>8} {'cpu s':>8} {'cpu s/sw':>9}"
    print(f"{header} {'switch cpu':>10}  results")
    for phase in PHASES:
        print(phase.line())
    print(f"(load average after: {os.getloadavg()[0]:.1f}; cpu s = this process only; "
          "switch cpu = the emulator's processes, per switch)")  # fmt: skip
    pushes = [p for p in PHASES if p.name.startswith(("agent apply", "netmiko"))]
    ok = all(set(p.outcome) == {"applied"} for p in pushes)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
