"""The command line that runs one nccl-tests binary across the GPU hosts.

nccl-tests runs across hosts only under MPI: "NCCL tests rely on MPI to work on multiple
processes, hence multiple nodes" (its README, "Build"; the binaries built with ``MPI=1``).
It has no launcher of its own for several nodes (one process drives several GPUs of one host
with ``-g``, which measures no fabric). So the command is Open MPI's ``mpirun``, run on the
first host, as the README's multi-node example is (``mpirun -np 64 -N 8 ./build/all_reduce_perf
-b 8 -e 8G -f 2 -g 1``): one rank per GPU (``-g 1``), ``-np`` the GPUs of all hosts.

Open MPI options used, all from mpirun(1) (open-mpi.org/doc/current/man1/mpirun.1.php, v4.1):

- ``-np N``: the number of processes;
- ``-H host:slots,...``: the hosts and how many processes each takes (as nccl-tests' users
  run it: NVIDIA/nccl-tests#309 ``-H spt01:8,spt02:8,...``, NVIDIA/nccl#1199);
- ``-x NAME=VALUE``: "Export the specified environment variables to the remote nodes before
  executing the program. Only one environment variable can be specified per -x option";
- the MIMD form ``mpirun [global options] [local options1] prog1 : [local options2] prog2``
  when hosts need different values (a GID index differs between hosts: ``roce-agent nccl``
  reports them per host, never averaged): each host is its own application context, its
  variables set by ``env NAME=VALUE ... prog`` (env(1)), in one MPI_COMM_WORLD.

No ``--mca`` option is added: Open MPI picks its own transports; a site that needs
``btl_tcp_if_include`` sets it in ``openmpi-mca-params.conf`` or ``OMPI_MCA_*``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agent.intent.model import NcclTestPolicy


@dataclass(frozen=True)
class HostSlots:
    """One host of the run: the address mpirun reaches it at, its GPUs and its variables."""

    name: str
    address: str
    gpus: int
    environment: Mapping[str, str]

    def __post_init__(self) -> None:
        if self.gpus < 1:
            raise ValueError(f"host {self.name}: Expected: one GPU or more Actual: {self.gpus}")
        if not self.address or any(c in self.address for c in ":, \t\n"):
            raise ValueError(
                f"host {self.name} address: Expected: a host name or IPv4 address for "
                f"mpirun -H Actual: {self.address!r:.60}"
            )
        for name in self.environment:
            if not name.replace("_", "").isalnum() or name[0].isdigit():
                raise ValueError(
                    f"host {self.name} variable: Expected: a shell variable name "
                    f"Actual: {name!r:.60}"
                )


@dataclass(frozen=True)
class NcclTestCommand:
    test: str  # the binary: all_reduce_perf
    hosts: tuple[HostSlots, ...]
    policy: NcclTestPolicy
    mpirun: str = "mpirun"

    def __post_init__(self) -> None:
        if len(self.hosts) < 2:
            raise ValueError(
                "nccl-tests: Expected: two or more GPU hosts (one host measures no network "
                f"link) Actual: {', '.join(h.name for h in self.hosts) or 'none'}"
            )
        if not re.fullmatch(r"[a-z0-9_]+_perf", self.test):
            raise ValueError(
                f"test: Expected: an nccl-tests binary name (all_reduce_perf) "
                f"Actual: {self.test!r:.60}"
            )

    @property
    def binary(self) -> str:
        directory = self.policy.binary_dir
        return f"{directory.rstrip('/')}/{self.test}" if directory else self.test

    @property
    def ranks(self) -> int:
        return sum(h.gpus for h in self.hosts)

    def test_args(self) -> list[str]:
        """nccl-tests' own options (README "Arguments"): sizes, iterations, checks, one GPU
        per process."""
        p = self.policy
        return [
            "-b", str(p.min_bytes), "-e", str(p.max_bytes), "-f", str(p.step_factor),
            "-g", "1", "-n", str(p.iters), "-w", str(p.warmup_iters), "-c", str(p.check_iters),
        ]  # fmt: skip

    def common_environment(self) -> dict[str, str] | None:
        """The variables when every host has the same ones, else None."""
        first = dict(self.hosts[0].environment)
        if all(dict(h.environment) == first for h in self.hosts[1:]):
            return first
        return None

    def argv(self) -> list[str]:
        common = self.common_environment()
        if common is not None:
            hosts = ",".join(f"{h.address}:{h.gpus}" for h in self.hosts)
            exports = [part for k, v in common.items() for part in ("-x", f"{k}={v}")]
            return [self.mpirun, "-np", str(self.ranks), "-H", hosts, *exports, self.binary,
                    *self.test_args()]  # fmt: skip
        argv = [self.mpirun]
        for index, host in enumerate(self.hosts):
            if index:
                argv.append(":")
            argv += ["-np", str(host.gpus), "-H", f"{host.address}:{host.gpus}", "env"]
            argv += [f"{k}={v}" for k, v in host.environment.items()]
            argv += [self.binary, *self.test_args()]
        return argv

    def shell(self) -> str:
        """The command for the first host's shell (quoted for it)."""
        return shlex.join(self.argv())


def host_slots(
    names: Sequence[str],
    addresses: Mapping[str, str],
    gpus: Mapping[str, int],
    environments: Mapping[str, Mapping[str, str]],
) -> tuple[HostSlots, ...]:
    return tuple(HostSlots(n, addresses[n], gpus[n], environments[n]) for n in names)
