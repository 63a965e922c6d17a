"""``roce-agent probe nccl``: nccl-tests on the fabric's GPU hosts, judged against line rate
per NIC, with the switches' and NICs' counters read before and after.

1. Each RDMA host (a port with ``rdma_device``) is asked, over the SSH session of
   :func:`agent.observe.hostfacts.collect_many` (one per host, side by side): its GPUs
   (``nvidia-smi -L``), whether ``mpirun`` and the test binaries are there; the hosts with a
   GPU then their GID table (for the job environment).
2. Hosts without a GPU take no part. Fewer than two GPU hosts: the acceptance is skipped with
   each host's reason (nvidia-smi missing, no GPU listed, its error): nothing pretends to run.
3. The job environment of each GPU host: :func:`agent.observe.jobenv.job_environment`, the
   same variables ``roce-agent nccl`` prints. A host with a problem stops the run (exit 2).
4. The switches (``read_switches``) and each host's NIC counters (hw_counters, ``ethtool -S``)
   are read; each test runs once (:mod:`agent.observe.nccltests.command`) from the first GPU
   host, in the background there (``setsid``, output to a scratch directory) and polled over
   short commands, so an SSH session never has to stay open for the whole run; then the
   counters again.
5. The output is parsed (:mod:`agent.observe.nccltests.output`) and judged
   (:mod:`agent.observe.nccltests.verdict`).
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypedDict, Unpack

from agent.device.push import Pusher
from agent.errors import AgentError
from agent.intent.model import Device, FabricIntent, NcclTestPolicy
from agent.observe.hostfacts import (
    CommandResult,
    HostFacts,
    HostShell,
    RdmaPortFacts,
    collect_many,
    open_shell,
    rdma_port_facts,
)
from agent.observe.hostnic import NicCounters, parse_ethtool_stats, pause_from_stats
from agent.observe.hostsources import SOURCES, HostSource
from agent.observe.jobenv import HostEnvironment, job_environment
from agent.observe.locate.counters import PortSymptoms, switch_symptoms
from agent.observe.locate.gather import read_switches as read_fabric_switches
from agent.observe.nccltests.command import HostSlots, NcclTestCommand
from agent.observe.nccltests.output import NcclTestsOutputError, parse_output
from agent.observe.nccltests.verdict import (
    BinaryRun,
    NcclAcceptanceInput,
    NcclVerdict,
    evaluate,
)
from agent.observe.perftest.inputs import NicDelta, nic_delta
from agent.observe.perftest.scenario import rdma_hosts
from common.text import is_decimal

# nvidia-smi -L: "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-...)", one line per GPU (nvidia-smi(1),
# "-L, --list-gpus  List each of the NVIDIA GPUs in the system, along with their UUIDs").
GPU_LINE = re.compile(r"^GPU (\d+): (.+?)(?: \(UUID: [^)]*\))?\s*$")
NOT_FOUND = 127  # POSIX sh: "command not found" (XCU 2.8.2, Exit Status for Commands)
POLL_S = 5.0
OUTPUT_TAIL_BYTES = 256 * 1024
MARKER = "__roce_agent_counters_ethtool__"


class NcclProbeError(AgentError):
    """The acceptance cannot run: unknown host, a host's environment or tools missing."""


def gpu_source() -> HostSource:
    return HostSource("gpus", "nvidia-smi -L")


def tool_sources(policy: NcclTestPolicy) -> tuple[HostSource, ...]:
    """``command -v`` of mpirun and of every test binary (POSIX: exit 0 and the path when
    found, non-zero when not)."""
    binaries = [f"{policy.binary_dir.rstrip('/')}/{t}" if policy.binary_dir else t
                for t in policy.tests]  # fmt: skip
    check = " && ".join(f"command -v {shlex.quote(b)}" for b in binaries)
    return (
        HostSource("mpirun", f"command -v {shlex.quote(policy.mpirun)}"),
        HostSource("nccl-tests", check),
    )


def gpus_of(result: CommandResult | None) -> tuple[list[str], str | None]:
    """The GPUs ``nvidia-smi -L`` listed, or why there are none on this host."""
    if result is None:
        return [], "nvidia-smi -L was not run"
    if result.exit_status == NOT_FOUND:
        return [], "nvidia-smi not found (no NVIDIA driver installed)"
    if not result.ok:
        return [], f"no usable GPU: {result.failure()}"
    gpus = [m.group(2) for line in result.output.splitlines() if (m := GPU_LINE.match(line))]
    if not gpus:
        last = (result.output.strip().splitlines() or ["no output"])[-1]
        return [], f"nvidia-smi -L listed no GPU ({last[:120]})"
    return gpus, None


# --------------------------------------------------------------------------- NIC counters


def counters_command(port: RdmaPortFacts) -> str:
    """hw_counters of the RDMA port as ``name value`` lines, then ``ethtool -S`` of its netdev
    (the files and the tool agent.observe.hostnic reads on a host it runs on)."""
    base = (
        f'"${{SYSFS:-/sys}}"/class/infiniband/{shlex.quote(port.device)}/ports/'
        f"{port.ib_port}/hw_counters"
    )
    return (
        f'for f in {base}/*; do [ -f "$f" ] && [ "${{f##*/}}" != lifespan ] && '
        f'printf \'%s %s\\n\' "${{f##*/}}" "$(cat "$f" 2>/dev/null)"; done; '
        f"echo {MARKER}; ethtool -S {shlex.quote(port.netdev)} 2>&1"
    )


def parse_counters(port: RdmaPortFacts, result: CommandResult) -> NicCounters:
    hw_text, _, ethtool = result.output.partition(MARKER)
    hw = {}
    for line in hw_text.splitlines():
        name, _, value = line.strip().partition(" ")
        if is_decimal(value):
            hw[name] = int(value)
    return NicCounters(
        hw={(port.device, str(port.ib_port)): hw},
        pause={port.netdev: pause_from_stats(parse_ethtool_stats(ethtool))},
    )


# --------------------------------------------------------------------------- the report


@dataclass
class NcclReport:
    """The acceptance's result: skipped (with why), or a verdict over the tests that ran."""

    hosts: dict[str, dict[str, Any]] = field(default_factory=dict)  # per RDMA host: gpus, why
    skipped: str | None = None
    verdict: NcclVerdict | None = None
    runs: list[BinaryRun] = field(default_factory=list)
    environments: dict[str, HostEnvironment] = field(default_factory=dict)
    switches_read: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    duration_s: float = 0.0

    @property
    def passed(self) -> bool | None:
        return None if self.verdict is None else self.verdict.passed

    def as_json(self) -> dict[str, Any]:
        return {
            "skipped": self.skipped is not None,
            "reason": self.skipped,
            "passed": self.passed,
            "hosts": self.hosts,
            "verdict": self.verdict.as_json() if self.verdict else None,
            "runs": [
                {
                    "test": r.test,
                    "host": r.host,
                    "command": r.command,
                    "exit_status": r.exit_status,
                    "error": r.error,
                    "output_tail": list(r.output_tail),
                    "parsed": r.run.as_json() if r.run else None,
                }
                for r in self.runs
            ],
            "environment": {h: e.as_json() for h, e in self.environments.items()},
            "switches_read": self.switches_read,
            "notes": self.notes,
            "duration_s": round(self.duration_s, 1),
        }


ShellFor = Callable[[Device], HostShell]


@contextmanager
def host_shell(device: Device, shell_for: ShellFor | None) -> Iterator[HostShell]:
    """The host's shell for a block: the given one (tests), else its own SSH session."""
    if shell_for is not None:
        yield shell_for(device)
        return
    with open_shell(device) as (plain, _):
        yield plain


def _selected(intent: FabricIntent, names: Sequence[str] | None) -> list[Device]:
    hosts = rdma_hosts(intent)
    if not names:
        return hosts
    known = {d.name: d for d in hosts}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise NcclProbeError(
            f"no host with an rdma_device named {', '.join(map(repr, unknown))} in fabric "
            f"{intent.name} (hosts with one: {', '.join(known) or 'none'})"
        )
    return [known[n] for n in dict.fromkeys(names)]


def survey(
    intent: FabricIntent,
    devices: Sequence[Device],
    policy: NcclTestPolicy,
    shell_for: ShellFor | None = None,
) -> tuple[dict[str, HostFacts], dict[str, dict[str, Any]]]:
    """Every host's GPUs and tools and, per host, its GPUs or why it has none (the GID table,
    for the environment, is read only from the hosts that have a GPU)."""
    sources = (gpu_source(), *tool_sources(policy))
    facts = collect_many(devices, intent, sources=sources, shell_for=shell_for)
    hosts: dict[str, dict[str, Any]] = {}
    for name, fact in facts.items():
        if fact.error is not None:
            hosts[name] = {"gpus": [], "reason": fact.error}
            continue
        gpus, why = gpus_of(fact.result("gpus"))
        hosts[name] = {"gpus": gpus, "reason": why}
    return facts, hosts


def _skip_reason(hosts: Mapping[str, Mapping[str, Any]]) -> str | None:
    with_gpus = [h for h, info in hosts.items() if info["gpus"]]
    if len(with_gpus) >= 2:
        return None
    why = "; ".join(f"{h}: {info['reason']}" for h, info in hosts.items() if not info["gpus"])
    if not hosts:
        return "no host declares an rdma_device"
    if with_gpus:
        return (
            f"only {with_gpus[0]} has GPUs: nccl-tests on one host crosses no network link ({why})"
        )
    return f"no host has a GPU ({why})"


def _tools_problems(
    first: str, facts: Mapping[str, HostFacts], policy: NcclTestPolicy
) -> list[str]:
    problems = []
    mpirun = facts[first].result("mpirun")
    if mpirun is None or not mpirun.ok:
        problems.append(
            f"host {first}: Expected: Open MPI's {policy.mpirun} (nccl-tests runs across hosts "
            "only under MPI: its README, 'NCCL tests rely on MPI to work on multiple processes, "
            f"hence multiple nodes') Actual: not found"
        )
    for name, fact in facts.items():
        tests = fact.result("nccl-tests")
        if tests is None or not tests.ok:
            problems.append(
                f"host {name}: Expected: nccl-tests built with MPI=1 ({', '.join(policy.tests)}"
                f"{' in ' + policy.binary_dir if policy.binary_dir else ' on PATH'}) "
                "Actual: not found"
            )
    return problems


class NcclOptions(TypedDict, total=False):
    """How :func:`run_nccl_acceptance` runs: on which hosts (default: every host), by which
    policy (default: the intent's), whether the switches are read around the run (yes), how
    a host's shell is reached (default: SSH) and how to wait (tests pass their own)."""

    hosts: Sequence[str] | None
    policy: NcclTestPolicy | None
    read_switches: bool
    shell_for: ShellFor | None
    sleep: Callable[[float], None]


def run_nccl_acceptance(intent: FabricIntent, **options: Unpack[NcclOptions]) -> NcclReport:
    """The acceptance (module docstring). Raises :class:`NcclProbeError` when it cannot run
    on hosts that have GPUs; returns a skipped report when fewer than two have one."""
    started = time.monotonic()
    policy = options.get("policy") or intent.validation.nccl
    shell_for = options.get("shell_for")
    devices = _selected(intent, options.get("hosts"))
    facts, survey_hosts = survey(intent, devices, policy, shell_for)
    report = NcclReport(hosts=survey_hosts)
    report.skipped = _skip_reason(survey_hosts)
    if report.skipped is not None:
        report.duration_s = time.monotonic() - started
        return report
    gpu_devices = [d for d in devices if survey_hosts[d.name]["gpus"]]
    report.notes += [f"{h}: not in the run ({info['reason']})"
                     for h, info in survey_hosts.items() if not info["gpus"]]  # fmt: skip
    gpu_facts = {d.name: facts[d.name] for d in gpu_devices}
    problems = _tools_problems(gpu_devices[0].name, gpu_facts, policy)
    gids = collect_many(gpu_devices, intent, sources=SOURCES, shell_for=shell_for)
    for device in gpu_devices:
        env = job_environment(intent, gids[device.name])
        report.environments[device.name] = env
        problems += env.problems
    if problems:
        raise NcclProbeError("nccl-tests cannot run:\n  " + "\n  ".join(problems))
    gpus = {d.name: len(survey_hosts[d.name]["gpus"]) for d in gpu_devices}
    session = _Session(intent, gpu_devices, policy, gpus, options)
    read_switches = options.get("read_switches", True)
    before = session.read(read_switches)
    report.runs = [session.run_test(test, report.environments) for test in policy.tests]
    after = session.read(read_switches)
    report.switches_read = sorted(after.switches)
    report.verdict = session.judge(report.runs, before, after)
    report.notes += before.notes + after.notes
    report.duration_s = time.monotonic() - started
    return report


@dataclass
class _Reading:
    switches: dict[str, Any] = field(default_factory=dict)  # DeviceData per switch
    nics: dict[tuple[str, str], NicCounters] = field(default_factory=dict)  # (host, dev/port)
    notes: list[str] = field(default_factory=list)


class _Session:
    """One acceptance run over the GPU hosts."""

    def __init__(
        self,
        intent: FabricIntent,
        devices: Sequence[Device],
        policy: NcclTestPolicy,
        gpus: Mapping[str, int],
        options: NcclOptions,
    ) -> None:
        self.intent = intent
        self.devices = list(devices)
        self.gpus = gpus
        self.policy = policy
        self.shell_for = options.get("shell_for")
        self.sleep = options.get("sleep", time.sleep)
        self.switches = [d for d in intent.devices if d.role != "host"]
        self.pusher: Pusher | None = None

    def read(self, switches: bool) -> _Reading:
        reading = _Reading()
        if switches and self.switches:
            self.pusher = self.pusher or Pusher.for_intent(self.intent)
            reading.switches = read_fabric_switches(self.pusher, self.switches, len(self.switches))
        for device in self.devices:
            with host_shell(device, self.shell_for) as shell:
                for port in rdma_port_facts(device):
                    result = shell(counters_command(port))
                    key = (device.name, f"{port.device}/{port.ib_port}")
                    if result.exit_status is None:
                        reading.notes.append(f"{device.name} NIC counters: {result.failure()}")
                        continue
                    reading.nics[key] = parse_counters(port, result)
        return reading

    def command(self, test: str, environments: Mapping[str, HostEnvironment]) -> NcclTestCommand:
        slots = tuple(
            HostSlots(d.name, d.host or d.name, self.gpus[d.name], environments[d.name].variables)
            for d in self.devices
        )  # fmt: skip
        return NcclTestCommand(test, slots, self.policy, self.policy.mpirun)

    def run_test(self, test: str, environments: Mapping[str, HostEnvironment]) -> BinaryRun:
        first = self.devices[0]
        command = self.command(test, environments).shell()
        with host_shell(first, self.shell_for) as shell:
            exit_status, output, error = run_in_background(
                shell, command, self.policy.timeout_s, self.sleep
            )
        tail = tuple(output.strip().splitlines()[-8:])
        if error is not None:
            return BinaryRun(test, first.name, None, error, exit_status, tail, command)
        try:
            parsed = parse_output(output)
        except NcclTestsOutputError as exc:
            return BinaryRun(test, first.name, None, f"output not nccl-tests': {exc}",
                             exit_status, tail, command)  # fmt: skip
        failed = f"exited {exit_status}" if exit_status else None
        return BinaryRun(test, first.name, parsed, failed, exit_status, tail, command)

    def judge(self, runs: list[BinaryRun], before: _Reading, after: _Reading) -> NcclVerdict:
        nics: list[NicDelta] = []
        for (host, rdma_port), counters in after.nics.items():
            if (host, rdma_port) in before.nics:
                netdev = next(iter(counters.pause), None)
                nics.append(nic_delta(host, rdma_port, before.nics[(host, rdma_port)],
                                      counters, netdev=netdev))  # fmt: skip
        ports: list[PortSymptoms] = []
        profile = self.intent.profile
        for name, last in after.switches.items():
            first = before.switches.get(name)
            if first is None or first.counters is None or last.counters is None:
                continue
            ports += switch_symptoms(first, last, profile)
        speeds = [p.speed for d in self.devices for p in d.rdma_ports()]
        per_host = {len(d.rdma_ports()) for d in self.devices}
        inputs = NcclAcceptanceInput(
            runs=tuple(runs),
            hosts=tuple(d.name for d in self.devices),
            nics_per_host=min(per_host),
            line_rate_bps=min(speeds),
            min_busbw_fraction=self.policy.min_busbw_fraction,
            ports=tuple(ports),
            switches_read=bool(after.switches) and bool(before.switches),
            nics=tuple(nics),
        )
        return evaluate(inputs)


def run_in_background(
    shell: HostShell, command: str, timeout_s: float, sleep: Callable[[float], None]
) -> tuple[int | None, str, str | None]:
    """Start ``command`` on the host detached (``setsid``, its own process group, output to a
    scratch directory), poll until it wrote its exit status, return (status, output, error).
    Past ``timeout_s`` its process group is killed and the error says so."""
    script = (
        'd=$(mktemp -d /tmp/roce_nccl.XXXXXX) || exit 1; cd "$d" || exit 1; '
        f"setsid sh -c {shlex.quote(command + ' > out 2>&1; echo $? > rc')} "
        '</dev/null >/dev/null 2>&1 & echo "$!" > pid; echo "dir=$d"'
    )
    started = shell(script)
    match = re.search(r"^dir=(/tmp/roce_nccl\.\S+)$", started.output, re.MULTILINE)
    if not started.ok or match is None:
        return started.exit_status, started.output, f"not started: {started.failure()}"
    where = shlex.quote(match.group(1))
    deadline = time.monotonic() + timeout_s
    while True:
        done = shell(f"cat {where}/rc 2>/dev/null")
        if done.ok and is_decimal(done.output.strip()):
            status = int(done.output.strip())
            break
        if time.monotonic() > deadline:
            shell(f"kill -TERM -- -$(cat {where}/pid) 2>/dev/null")
            return None, _tail(shell, where), f"did not finish within {timeout_s:g} s (killed)"
        sleep(POLL_S)
    return status, _tail(shell, where), None


def _tail(shell: HostShell, where: str) -> str:
    """The end of the run's output; a first line cut by ``tail -c`` is dropped."""
    output = shell(f"tail -c {OUTPUT_TAIL_BYTES} {where}/out; rm -rf {where}").output
    if len(output.encode()) >= OUTPUT_TAIL_BYTES:
        output = output.partition("\n")[2]
    return output
