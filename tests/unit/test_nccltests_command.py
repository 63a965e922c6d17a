"""The mpirun command line for nccl-tests (agent.observe.nccltests.command) and the glue that
runs it (agent.observe.nccltests.run)."""

from __future__ import annotations

import ipaddress
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.intent.model import Device, FabricIntent, NcclTestPolicy
from agent.observe.hostfacts import CommandResult, run_local
from agent.observe.nccltests.command import HostSlots, NcclTestCommand
from agent.observe.nccltests.run import (
    MARKER,
    NcclProbeError,
    gpus_of,
    run_nccl_acceptance,
)

ENV = {"NCCL_IB_HCA": "=mlx5_0:1", "NCCL_IB_GID_INDEX": "3", "NCCL_IB_TC": "106"}


def hosts(*gids: str, gpus: int = 8) -> tuple[HostSlots, ...]:
    return tuple(
        HostSlots(f"gpu{i}", f"10.0.0.{i + 1}", gpus, {**ENV, "NCCL_IB_GID_INDEX": gid})
        for i, gid in enumerate(gids)
    )


def test_hosts_that_agree_share_one_x_per_variable() -> None:
    command = NcclTestCommand("all_reduce_perf", hosts("3", "3"), NcclTestPolicy())
    assert command.argv() == [
        "mpirun", "-np", "16", "-H", "10.0.0.1:8,10.0.0.2:8",
        "-x", "NCCL_IB_HCA==mlx5_0:1", "-x", "NCCL_IB_GID_INDEX=3", "-x", "NCCL_IB_TC=106",
        "all_reduce_perf",
        "-b", "8", "-e", "8589934592", "-f", "2", "-g", "1", "-n", "20", "-w", "5", "-c", "1",
    ]  # fmt: skip


def test_hosts_that_disagree_get_one_application_context_each() -> None:
    policy = NcclTestPolicy(binary_dir="/opt/nccl-tests/build/", min_bytes="1MiB",
                            max_bytes="1GiB", iters=50)  # fmt: skip
    command = NcclTestCommand("alltoall_perf", hosts("3", "5", gpus=4), policy, "/usr/bin/mpirun")
    args = ["-b", "1048576", "-e", "1073741824", "-f", "2", "-g", "1", "-n", "50", "-w", "5",
            "-c", "1"]  # fmt: skip
    assert command.argv() == [
        "/usr/bin/mpirun",
        "-np", "4", "-H", "10.0.0.1:4", "env", "NCCL_IB_HCA==mlx5_0:1", "NCCL_IB_GID_INDEX=3",
        "NCCL_IB_TC=106", "/opt/nccl-tests/build/alltoall_perf", *args, ":",
        "-np", "4", "-H", "10.0.0.2:4", "env", "NCCL_IB_HCA==mlx5_0:1", "NCCL_IB_GID_INDEX=5",
        "NCCL_IB_TC=106", "/opt/nccl-tests/build/alltoall_perf", *args,
    ]  # fmt: skip
    assert command.ranks == 8


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: NcclTestCommand("all_reduce_perf", hosts("3"), NcclTestPolicy()),
         "two or more GPU hosts"),
        (lambda: NcclTestCommand("rm -rf /", hosts("3", "3"), NcclTestPolicy()),
         "nccl-tests binary name"),
        (lambda: HostSlots("h1", "10.0.0.1", 0, {}), "one GPU or more"),
        (lambda: HostSlots("h1", "10.0.0.1,evil", 1, {}), "address"),
        (lambda: HostSlots("h1", "10.0.0.1", 1, {"A;B": "1"}), "shell variable name"),
    ],
)  # fmt: skip
def test_bad_inputs_are_refused(build, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=message):
        build()


@settings(max_examples=100, deadline=None)
@given(
    value=st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                  max_size=40),
    gpus=st.lists(st.integers(1, 16), min_size=2, max_size=6),
)  # fmt: skip
def test_the_shell_line_quotes_every_value(value: str, gpus: list[int]) -> None:
    slots = tuple(
        HostSlots(f"h{i}", f"h{i}.example", n, {"NCCL_IB_HCA": value}) for i, n in enumerate(gpus)
    )
    command = NcclTestCommand("all_reduce_perf", slots, NcclTestPolicy())
    assert shlex.split(command.shell()) == command.argv()  # a shell reads back the argv
    assert command.argv()[2] == str(sum(gpus))


def test_policy_refuses_sizes_out_of_order() -> None:
    with pytest.raises(ValueError, match="min_bytes <= max_bytes"):
        NcclTestPolicy(min_bytes="1GiB", max_bytes="1MiB")


# --------------------------------------------------------------------------- the run glue
# agent.observe.nccltests.run with each host's shell replaced: the GID script runs for real
# over a sysfs tree laid out as the kernel's (as tests/unit/test_jobenv.py does); nvidia-smi,
# mpirun and the nccl-tests output are answered from published outputs
# (tests/data/nccl-tests/README.md). Nothing here runs nccl-tests: these test the glue.

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "nccl-tests"
SMI_A100 = "".join(
    f"GPU {i}: NVIDIA A100-SXM4-40GB (UUID: GPU-{i:08d}-0000-0000-0000-000000000000)\n"
    for i in range(8)
)


def _gid_tree(root: Path, ipv4: str) -> Path:
    base = root / "class" / "infiniband" / "mlx5_0" / "ports" / "1"
    for sub in ("gids", "gid_attrs/types", "gid_attrs/ndevs"):
        (base / sub).mkdir(parents=True, exist_ok=True)
    packed = ipaddress.IPv4Address(ipv4).packed.hex()
    mapped = f"0000:0000:0000:0000:0000:ffff:{packed[:4]}:{packed[4:]}"
    slots = {2: (mapped, "IB/RoCE v1"), 3: (mapped, "RoCE v2")}
    for index in range(4):
        gid, kind = slots.get(index, ("0000:0000:0000:0000:0000:0000:0000:0000", ""))
        (base / "gids" / str(index)).write_text(gid + "\n")
        if kind:
            (base / "gid_attrs" / "types" / str(index)).write_text(kind + "\n")
            (base / "gid_attrs" / "ndevs" / str(index)).write_text("ens1f0np0\n")
    return root


def _fabric(count: int = 2) -> FabricIntent:
    profile = yaml.safe_load((REPO / "playbooks" / "profiles" / "nvidia-default.yml").read_text())
    hosts = [
        {"name": f"gpu{i}", "platform": "linux_host", "role": "host", "netns": f"ns-gpu{i}",
         "ports": [{"name": "ens1f0np0", "speed": "200G", "cable_m": 3, "mtu": 9000,
                    "rdma_device": "mlx5_0",
                    "ipv4": f"198.18.0.{2 * i + 1}/31"}]}
        for i in range(count)
    ]  # fmt: skip
    return FabricIntent.model_validate({"name": "t", "profile": profile, "devices": hosts})


class FakeHosts:
    """Each host's shell: the GID script over its sysfs tree, the rest from ``answers``."""

    def __init__(self, tmp: Path, intent: FabricIntent, **answers: Any) -> None:
        self.trees = {
            d.name: _gid_tree(tmp / d.name, str(d.ports[0].ipv4.ip))  # type: ignore[union-attr]
            for d in intent.devices
        }
        self.answers = {"smi": SMI_A100, "output": "", "rc": "0", "mpirun": 0, **answers}
        self.sent: list[tuple[str, str]] = []

    def __call__(self, device: Device) -> Any:
        def shell(command: str) -> CommandResult:
            self.sent.append((device.name, command))
            return self.answer(device.name, command)

        return shell

    def answer(self, host: str, command: str) -> CommandResult:
        a = self.answers
        if "n_gids_found" in command:
            return run_local(["env", f"SYSFS={self.trees[host]}", "sh", "-s"], command)
        if command == "nvidia-smi -L":
            smi = a["smi"](host) if callable(a["smi"]) else a["smi"]
            return CommandResult(command, *smi) if isinstance(smi, tuple) else CommandResult(
                command, 0, smi)  # fmt: skip
        if command.startswith("command -v mpirun"):
            return CommandResult(command, a["mpirun"], "/usr/bin/mpirun" if not a["mpirun"] else "")
        if command.startswith("command -v"):
            return CommandResult(command, 0, "/usr/local/bin/all_reduce_perf")
        if MARKER in command:
            return CommandResult(command, 0, f"out_of_sequence 0\npacket_seq_err 0\n{MARKER}\n"
                                 "NIC statistics:\n     rx_prio3_pause: 0\n")  # fmt: skip
        if "mktemp -d /tmp/roce_nccl" in command:
            return CommandResult(command, 0, "dir=/tmp/roce_nccl.x1\n")
        if command.startswith("cat /tmp/roce_nccl.x1/rc"):
            return CommandResult(command, 0, a["rc"])
        if command.startswith("tail -c"):
            return CommandResult(command, 0, a["output"])
        raise AssertionError(f"unexpected command on {host}: {command[:80]}")


def _run(fake: FakeHosts, intent: FabricIntent, **kw: Any) -> Any:
    return run_nccl_acceptance(intent, shell_for=fake, read_switches=False,
                               sleep=lambda _: None, **kw)  # fmt: skip


GPU_CASES = [
    (CommandResult("nvidia-smi -L", 127, "sh: 1: nvidia-smi: not found"),
     ([], "nvidia-smi not found (no NVIDIA driver installed)")),
    (CommandResult("nvidia-smi -L", 9, "NVIDIA-SMI has failed because it couldn't communicate "
                   "with the NVIDIA driver."),
     ([], "no usable GPU: `nvidia-smi -L`: exit 9 (NVIDIA-SMI has failed because it couldn't "
          "communicate with the NVIDIA driver.)")),
    (CommandResult("nvidia-smi -L", 0, "No devices were found\n"),
     ([], "nvidia-smi -L listed no GPU (No devices were found)")),
    (CommandResult("nvidia-smi -L", 0, SMI_A100), (["NVIDIA A100-SXM4-40GB"] * 8, None)),
    (None, ([], "nvidia-smi -L was not run")),
]  # fmt: skip


@pytest.mark.parametrize(("result", "expected"), GPU_CASES)
def test_gpus_of(result: CommandResult | None, expected: tuple[list[str], str | None]) -> None:
    assert gpus_of(result) == expected


def test_no_gpu_anywhere_is_skipped_with_each_hosts_reason(tmp_path: Path) -> None:
    intent = _fabric()
    fake = FakeHosts(tmp_path, intent, smi=(127, "sh: 1: nvidia-smi: not found"))
    report = _run(fake, intent)
    assert report.skipped == (
        "no host has a GPU (gpu0: nvidia-smi not found (no NVIDIA driver installed); "
        "gpu1: nvidia-smi not found (no NVIDIA driver installed))"
    )
    assert report.verdict is None and report.passed is None
    assert not any("mktemp" in c for _, c in fake.sent)  # nothing was started
    assert not any("n_gids_found" in c for _, c in fake.sent)  # nor the GID table read


def test_one_gpu_host_is_skipped(tmp_path: Path) -> None:
    intent = _fabric()
    fake = FakeHosts(
        tmp_path, intent, smi=lambda h: SMI_A100 if h == "gpu0" else (0, "No devices were found")
    )
    report = _run(fake, intent)
    assert report.skipped is not None
    assert report.skipped.startswith("only gpu0 has GPUs: nccl-tests on one host crosses no")


def test_missing_mpirun_stops_the_run_naming_the_host(tmp_path: Path) -> None:
    intent = _fabric()
    with pytest.raises(NcclProbeError, match="host gpu0: Expected: Open MPI's mpirun"):
        _run(FakeHosts(tmp_path, intent, mpirun=1), intent)


def test_unknown_host_is_refused(tmp_path: Path) -> None:
    intent = _fabric()
    with pytest.raises(NcclProbeError, match="no host with an rdma_device named 'gpu9'"):
        _run(FakeHosts(tmp_path, intent), intent, hosts=["gpu9"])


def test_a_run_over_two_gpu_hosts(tmp_path: Path) -> None:
    # The output: nccl-tests#119's rows and footer (4 NICs per host there); here one 200G NIC
    # per host, so busbw 95.74 per NIC is above line rate: unverified, as the rule says.
    intent = _fabric()
    output = (DATA / "issue119_all_reduce_tail.txt").read_text()
    fake = FakeHosts(tmp_path, intent, output=output)
    report = _run(fake, intent)
    assert report.skipped is None
    (run,) = report.runs
    assert run.command is not None and run.command.startswith(
        "mpirun -np 16 -H gpu0:8,gpu1:8 -x NCCL_IB_HCA=mlx5_0:1 -x NCCL_IB_GID_INDEX=3 "
    )
    assert "all_reduce_perf -b 8 -e 8589934592" in run.command
    started = next(c for h, c in fake.sent if "mktemp" in c)
    assert "setsid sh -c" in started and [h for h, c in fake.sent if c == started] == ["gpu0"]
    outcomes = {(o.rule, o.subject): o.status for o in report.verdict.outcomes}
    assert outcomes[("NT001", "all_reduce_perf")] == "pass"
    assert outcomes[("NT003", "all_reduce_perf")] == "unverified"
    assert outcomes[("NT004", "fabric")] == "unverified"  # switches not read
    assert outcomes[("NT004", "gpu0")] == "pass"  # out_of_sequence read twice, no change


def test_a_failed_run_is_an_error_naming_host_and_last_lines(tmp_path: Path) -> None:
    intent = _fabric()
    output = (DATA / "issue185_nccl_failure_tail.txt").read_text()
    report = _run(FakeHosts(tmp_path, intent, output=output, rc="1"), intent)
    assert report.passed is False
    failed = next(o for o in report.verdict.outcomes if o.rule == "NT001")
    assert failed.messages[0].startswith("all_reduce_perf on gpu0: Expected: a complete run")
    assert (
        "Test NCCL failure common.cu:908" in failed.messages[0]
        and "(exit 1)" in (failed.messages[0])
    )


# --------------------------------------------------------------------------- the CLI


def _fabric_file(tmp_path: Path) -> Path:
    path = tmp_path / "fabric.yml"
    hosts = [d.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
             for d in _fabric().devices]  # fmt: skip
    path.write_text(yaml.safe_dump({"name": "t", "profile": "nvidia-default", "devices": hosts}))
    return path


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--min-busbw-fraction", "1.5"], "--min-busbw-fraction"),
        (["--min-busbw-fraction", "nan"], "--min-busbw-fraction"),
        (["--test", "rm_perf"], "--test"),
    ],
)
def test_bad_options_exit_2_naming_the_option(
    tmp_path: Path, args: list[str], message: str
) -> None:
    from click.testing import CliRunner

    from agent.app.cli import main

    result = CliRunner().invoke(main, ["probe", "nccl", str(_fabric_file(tmp_path)), *args])
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_skipped_exits_2_with_the_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from agent.app.cli import main
    from agent.observe.nccltests import run as nccl_run

    intent = _fabric()
    fake = FakeHosts(tmp_path, intent, smi=(127, "sh: 1: nvidia-smi: not found"))
    real = nccl_run.run_nccl_acceptance
    monkeypatch.setattr(nccl_run, "run_nccl_acceptance",
                        lambda i, **kw: real(i, **{**kw, "shell_for": fake}))  # fmt: skip
    result = CliRunner().invoke(
        main, ["probe", "nccl", str(_fabric_file(tmp_path)), "--no-switches", "--output", "json"]
    )
    assert result.exit_code == 2
    assert '"skipped": true' in result.output and "no host has a GPU" in result.output


# --------------------------------------------------------------------------- the playbook step


def test_acceptance_playbook_has_the_nccl_step() -> None:
    from agent.ops.playbooks import load_playbook, playbook_path

    playbook = load_playbook(playbook_path("acceptance"))
    assert [s.kind() for s in playbook.steps].count("nccl") == 1


def test_the_step_skips_without_gpu_hosts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent.observe.nccltests import run as nccl_run
    from agent.ops.playbooks import NcclStepSpec, PlaybookRunner

    intent = _fabric()
    fake = FakeHosts(tmp_path, intent, smi=(0, "No devices were found"))
    real = nccl_run.run_nccl_acceptance
    monkeypatch.setattr(nccl_run, "run_nccl_acceptance",
                        lambda i, **kw: real(i, **{**kw, "shell_for": fake,
                                                   "read_switches": False}))  # fmt: skip
    outcome = PlaybookRunner(intent)._nccl(NcclStepSpec())
    assert outcome.status == "skipped"
    assert outcome.detail["reason"].startswith("no host has a GPU (gpu0: nvidia-smi -L listed")


def test_the_step_refuses_a_bad_test_name() -> None:
    from pydantic import ValidationError

    from agent.ops.playbooks import NcclStepSpec, PlaybookRunner

    with pytest.raises(ValidationError):
        NcclStepSpec(min_busbw_fraction=2)
    from agent.errors import AgentError

    with pytest.raises(AgentError, match="tests"):
        PlaybookRunner(_fabric())._nccl(NcclStepSpec(tests=["rm_perf"]))


def test_nic_counters_read_by_the_real_script() -> None:
    """counters_command run by sh over the recorded rxe sysfs tree (tests/data/perftest/sysfs,
    README there); its ethtool line answered by a shell function with mlx5's pause names
    (kernel Documentation/networking/device_drivers/ethernet/mellanox/mlx5/counters.rst)."""
    from agent.observe.hostfacts import RdmaPortFacts
    from agent.observe.nccltests.run import counters_command, parse_counters

    sysfs = REPO / "tests" / "data" / "perftest" / "sysfs"
    port = RdmaPortFacts("eth1", "rxe0", 1, "eth1", "198.18.99.1")
    ethtool = "ethtool() { printf 'NIC statistics:\\n     rx_prio3_pause: 7\\n'; }; "
    result = run_local(["env", f"SYSFS={sysfs}", "sh", "-s"], ethtool + counters_command(port))
    assert result.ok, result.output
    counters = parse_counters(port, result)
    hw = counters.hw[("rxe0", "1")]
    files = sysfs / "class" / "infiniband" / "rxe0" / "ports" / "1" / "hw_counters"
    assert hw == {f.name: int(f.read_text()) for f in files.iterdir() if f.name != "lifespan"}
    pause = counters.pause["eth1"]
    assert pause is not None and pause.rx_frames[3] == 7
