"""The mpirun command line for nccl-tests (agent.observe.nccltests.command)."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.intent.model import NcclTestPolicy
from agent.observe.nccltests.command import HostSlots, NcclTestCommand

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
