"""The job file: the user's jobs as the twin runs them (``twin --job FILE``).

A job is a set of GPUs and the collective they run: the hosts (names, shell globs, or a
hostfile as ``mpirun`` takes it), which of each host's NICs serve its GPUs (``nics``, rail
order; default every NIC the fabric links), the collective and its size, QPs per connection,
the QP split and PXN; or a ``step`` of several collectives, each with its size and how many
times a training step calls it (:mod:`agent.twin.step`). Several jobs run side by side in one
run, each on GPUs of its own, and each is reported on its own (docs/collectives.md, "Job
file").

Hostfiles: Open MPI's ``HOST [slots=N] [max_slots=M]`` (orte_hosts(7),
https://manpages.ubuntu.com/manpages/jammy/en/man7/orte_hosts.7.html) and MPICH Hydra's
``HOST[:N]`` (https://github.com/pmodels/mpich/blob/main/doc/wiki/how_to/Using_the_Hydra_Process_Manager.md),
``#`` comments; a host's slots are its ranks here: its first N NICs.

Every problem names FILE:LINE and the field, the hostfile's line for one of its own.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, ValidationError, model_validator

from agent.errors import IntentError, Problem, SourcePosition
from agent.intent.model import Bytes, InterfaceName, Name, StrictModel
from agent.twin.collectives import check_placement
from agent.twin.network import TwinError, TwinNetwork
from agent.twin.placement import CollectiveSpec, nics_by_host
from agent.twin.step import MAX_PER_STEP, MAX_STEP_COLLECTIVES, StepPart, describe_step
from agent.twin.workloads import (
    MAX_CHANNELS,
    MAX_QPS,
    P2P_COLLECTIVES,
    AlgorithmName,
    CollectiveName,
)
from common.validation import validation_problems
from common.yamlsource import SourceMap, dotted_path, load_yaml, read_bounded

MAX_JOBS = 8  # side by side in one run
MAX_HOSTFILE_BYTES = 1 << 20
MAX_HOSTFILE_LINE = 512  # a host name and its slots; longer is not a hostfile line
# A host name, HOST:PORT, or a shell glob over host names (gpu*, gpu[1-4]).
HostRef = Annotated[
    str,
    Field(
        pattern=r"^[A-Za-z0-9*?\[][A-Za-z0-9_.*?\[\]!-]*(:[A-Za-z][A-Za-z0-9_./-]*)?$",
        max_length=120,
    ),
]
# Where the docs site publishes it (scripts/gen_docs.py writes it; mkdocs copies it).
SCHEMA_ID = "https://roce-fabric-agent.readthedocs.io/en/latest/reference/job.schema.json"
DEFAULT_SIZE = 64 << 20  # 64 MiB, the default collective and tune's


class StepCollective(StrictModel):
    """One collective of a job's training step."""

    collective: CollectiveName
    size: Bytes = Field(description="its size as nccl-tests prints it (64MiB, 1GB)")
    per_step: int = Field(
        default=1,
        ge=1,
        le=MAX_PER_STEP,
        description="how many times one training step calls it at this size",
    )
    channels: int = Field(
        default=1,
        ge=1,
        le=MAX_CHANNELS,
        description="ring channels per NIC (NCCL_MIN_NCHANNELS); 1 for alltoall and sendrecv",
    )

    @model_validator(mode="after")
    def _p2p_one_channel(self) -> StepCollective:
        _check_channels(self.collective, self.channels)
        return self


def _check_channels(collective: str, channels: int) -> None:
    if channels > 1 and collective in P2P_COLLECTIVES:
        raise ValueError(
            f"channels: Expected: 1 for {collective} (its connections are per peer) "
            f"Actual: {channels}"
        )


class Job(StrictModel):
    """One job: its GPUs' NICs and the collective they run (or its step's collectives)."""

    name: Name
    hosts: list[HostRef] | None = Field(
        default=None,
        min_length=1,
        max_length=4096,
        description="the ranks' hosts in ring order: names, HOST:PORT for one NIC, or shell "
        "globs (gpu*, gpu[1-4]) matched in fabric-file order; default: every GPU NIC of the "
        "fabric (one job only)",
    )
    hostfile: str | None = Field(
        default=None,
        min_length=1,
        max_length=4096,
        description="an mpirun hostfile (HOST slots=N, or HOST:N), relative to the job file; "
        "a host's slots are its ranks: its first N NICs",
    )
    nics: list[InterfaceName] | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        description="each host's GPU NICs in rail order, by port name (eth0, eth1 ...) or by "
        "the rdma_device the fabric file declares for the port (mlx5_0, mlx5_0/1); default: "
        "every port of the host the fabric links to a switch",
    )
    collective: CollectiveName = "allreduce"
    size: Bytes = Field(
        default=DEFAULT_SIZE,
        description="the collective's size as nccl-tests prints it (64MiB, 1GB)",
    )
    qps_per_connection: int = Field(default=1, ge=1, le=MAX_QPS)
    channels: int = Field(
        default=1,
        ge=1,
        le=MAX_CHANNELS,
        description="ring channels per NIC, each its own ring of connections "
        "(NCCL_MIN_NCHANNELS); 1 for alltoall",
    )
    split_data_on_qps: bool = False
    pxn: bool = Field(
        default=True,
        description="all-to-all on multi-NIC hosts through PXN (NCCL_PXN_DISABLE=0); false: "
        "every GPU sends over its own NIC to every GPU of the other hosts",
    )
    algorithm: AlgorithmName = Field(
        default="ring",
        description="NCCL's algorithm for the job's all-reduces (NCCL_ALGO=allreduce:tree): "
        "its rings, its double binary tree between the hosts, or auto (the one NCCL's cost "
        "model picks for each all-reduce's size and ranks, with NCCL_PROTO=Simple)",
    )
    step: list[StepCollective] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_STEP_COLLECTIVES,
        description="a training step's collectives, run one after the other on the job's GPUs "
        "(instead of collective, size and channels); the job is judged by the step's busbw "
        "(its bus bytes over its collective time)",
    )

    @model_validator(mode="after")
    def _one_way_to_name_hosts(self) -> Job:
        if self.hosts is not None and self.hostfile is not None:
            raise ValueError("Expected: hosts or hostfile Actual: both")
        both = sorted({"collective", "size", "channels"} & self.model_fields_set)
        if self.step is not None and both:
            raise ValueError(f"Expected: step, or {', '.join(both)} Actual: both")
        _check_channels(self.collective, self.channels)
        if self.algorithm == "tree" and all(p.workload != "allreduce" for p in self.parts):
            workloads = ", ".join(sorted({p.workload for p in self.parts}))
            raise ValueError(
                "algorithm: Expected: ring, or an allreduce in the job (NCCL's tree runs "
                f"all-reduce only) Actual: tree for {workloads}"
            )
        return self

    @property
    def parts(self) -> tuple[StepPart, ...]:
        """Its step's collectives; one (its collective) without a step."""
        if self.step is None:
            return (StepPart(self.collective, self.size, 1, self.channels),)
        return tuple(StepPart(c.collective, c.size, c.per_step, c.channels) for c in self.step)


class JobFile(StrictModel):
    """``twin --job FILE``: the jobs that run side by side."""

    jobs: list[Job] = Field(min_length=1, max_length=MAX_JOBS)

    @model_validator(mode="after")
    def _names_once(self) -> JobFile:
        names = [job.name for job in self.jobs]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"Expected: each job's name once Actual: {', '.join(twice)} twice")
        return self


@dataclass(frozen=True)
class LoadedJobs:
    """The job file validated, with where each of its values came from."""

    file: Path
    jobs: JobFile
    source: SourceMap


@dataclass(frozen=True)
class NamedSpec:
    """A job resolved on a fabric: its name, its first collective as placed, and its step's
    collectives (one, the same as ``spec``, for a job of one collective)."""

    name: str
    spec: CollectiveSpec
    step: tuple[StepPart, ...] = ()  # a job file's ``step``; () for one collective


def load_jobs(path: Path) -> LoadedJobs:
    """The job file, validated; an :class:`IntentError` naming FILE:LINE and the field."""
    data, source = load_yaml(path)
    try:
        jobs = JobFile.model_validate(data)
    except ValidationError as exc:
        raise IntentError(validation_problems(exc, data, source)) from None
    return LoadedJobs(path, jobs, source)


def resolve_jobs(loaded: LoadedJobs, network: TwinNetwork) -> list[NamedSpec]:
    """Each job's collective on ``network``: its ranks' endpoints (HOST:PORT on a multi-NIC
    host) in ring order; an :class:`IntentError` at the line that names what is wrong."""
    specs = []
    problems: list[Problem] = []
    for index, job in enumerate(loaded.jobs.jobs):
        try:
            spec = _placed_spec(loaded, index, network)
            step = job.parts if job.step is not None else ()
            specs.append(NamedSpec(job.name, spec, step))
        except _Located as exc:
            problems.append(exc.problem)
    if problems:
        raise IntentError(problems)
    if len(specs) > 1:
        _check_side_by_side(loaded, specs)
    return specs


def _check_side_by_side(loaded: LoadedJobs, specs: list[NamedSpec]) -> None:
    """Jobs side by side each name their GPUs and run one collective."""
    bare = [i for i, s in enumerate(specs) if s.spec.hosts is None]
    stepped = [i for i, s in enumerate(specs) if s.step]
    if bare:
        where: tuple[str | int, ...] = ("jobs", bare[0])
        said = (
            "Expected: hosts, hostfile or nics on every job when several run side by side "
            "Actual: none (this job would take every GPU NIC of the fabric)"
        )
    elif stepped:
        where = ("jobs", stepped[0], "step")
        said = (
            "Expected: one collective per job when several run side by side (the twin does "
            "not model how two jobs' steps interleave) Actual: a step of "
            f"{describe_step(specs[stepped[0]].step)}"
        )
    else:
        return
    raise IntentError([Problem(loaded.source.locate(where), dotted_path(where), said)])


def _placed_spec(loaded: LoadedJobs, index: int, network: TwinNetwork) -> CollectiveSpec:
    """Job ``index``'s first collective, placed as the run will place it (a refusal located
    at the job, or at its step's collective: a host twice, hosts with different NIC counts, a
    size too small for the ranks)."""
    job = loaded.jobs.jobs[index]
    base = CollectiveSpec(
        job.collective,
        0,
        job.size,
        job.qps_per_connection,
        _endpoints(loaded, index, network),
        split_data_on_qps=job.split_data_on_qps,
        pxn=job.pxn,
        channels=job.channels,
        algorithm=job.algorithm,
    )
    specs = [part.of(base) for part in job.parts]
    for position, spec in enumerate(specs):
        try:
            check_placement(network, spec)
        except TwinError as exc:
            # The run's own message names twin's option; here the job file says it.
            said = _TWIN_OPTION.sub("", str(exc))
            where: tuple[str | int, ...] = ("jobs", index)
            if job.step is not None:
                where = ("jobs", index, "step", position)
            raise _Located(Problem(loaded.source.locate(where), dotted_path(where), said)) from None
    return specs[0]


_TWIN_OPTION = re.compile(r"^twin --[a-z-]+:\s*")


class _Located(Exception):
    def __init__(self, problem: Problem) -> None:
        super().__init__(str(problem))
        self.problem = problem


def _endpoints(loaded: LoadedJobs, index: int, network: TwinNetwork) -> tuple[str, ...] | None:
    """The job's ranks' endpoints, or None for the fabric's own job (every GPU NIC)."""
    job = loaded.jobs.jobs[index]
    nics = nics_by_host(network)
    if job.nics is not None:
        nics = _chosen_nics(loaded, index, nics, network)
    if job.hostfile is not None:
        return tuple(_from_hostfile(loaded, index, nics))
    if job.hosts is None:
        if job.nics is None:
            return None
        return tuple(e for endpoints in nics.values() for e in endpoints)
    out: list[str] = []
    for position, pattern in enumerate(job.hosts):
        where = ("jobs", index, "hosts", position)
        out += _matching(loaded, where, pattern, nics, network)
    return tuple(out)


def _chosen_nics(
    loaded: LoadedJobs, index: int, nics: dict[str, list[str]], network: TwinNetwork
) -> dict[str, list[str]]:
    """Per host, its endpoints for the job's ``nics`` (port or RDMA device names) in that
    order; a host that has none of them is left out, one that has only some is an error."""
    wanted = loaded.jobs.jobs[index].nics or []
    chosen: dict[str, list[str]] = {}
    for host, endpoints in nics.items():
        by_name = {n: e for e in endpoints for n in network.hosts[e].names[1:]}
        # A port's own name wins over another port's RDMA device of the same name.
        by_name.update({network.hosts[e].port.name: e for e in endpoints})
        have = [by_name[p] for p in wanted if p in by_name]
        if have:
            problem = _nics_problem(wanted, by_name, have)
            if problem:
                raise _nics_error(loaded, index, f"host {host}: {problem}")
            chosen[host] = have
    if not chosen:
        raise _nics_error(
            loaded, index, f"Expected: a host with a NIC linked to a switch named "
            f"{', '.join(wanted)} (a port or its rdma_device) Actual: none",
        )  # fmt: skip
    return chosen


def _nics_problem(wanted: list[str], by_name: dict[str, str], have: list[str]) -> str:
    """Why a host that has some of the job's NICs cannot serve it ("" if it can)."""
    if len(have) != len(wanted):
        missing = [p for p in wanted if p not in by_name]
        return (
            f"Expected: a NIC linked to a switch for each of {', '.join(wanted)} "
            f"Actual: none for {', '.join(missing)}"
        )
    twice = sorted({e for e in have if have.count(e) > 1})
    if twice:
        return "Expected: each NIC once Actual: " + ", ".join(
            f"{e} named {have.count(e)} times" for e in twice
        )
    return ""


def _nics_error(loaded: LoadedJobs, index: int, message: str) -> _Located:
    where = ("jobs", index, "nics")
    return _Located(Problem(loaded.source.locate(where), dotted_path(where), message))


def _matching(
    loaded: LoadedJobs,
    where: tuple[str | int, ...],
    pattern: str,
    nics: dict[str, list[str]],
    network: TwinNetwork,
) -> list[str]:
    """The endpoints one entry of ``hosts`` names: a host (all its chosen NICs), HOST:PORT,
    or a glob over host names (fabric order)."""
    if pattern in network.hosts and ":" in pattern:
        return [pattern]
    if pattern in nics:
        return list(nics[pattern])
    if any(ch in pattern for ch in "*?["):
        hosts = [h for h in nics if fnmatch.fnmatchcase(h, pattern)]
        if hosts:
            return [e for h in hosts for e in nics[h]]
    raise _Located(
        Problem(
            loaded.source.locate(where),
            dotted_path(where),
            f"Expected: a host of the fabric with a GPU NIC (or HOST:PORT, or a glob that "
            f"matches one) Actual: {pattern}",
        )
    )


_OPEN_MPI = re.compile(r"^(?P<host>\S+)((\s+(slots|max_slots|max-slots)=(?P<n>[0-9]+))*)\s*$")
_HYDRA = re.compile(r"^(?P<host>[^\s:]+):(?P<n>[0-9]+)\s*$")
_SLOTS = re.compile(r"\bslots=([0-9]+)")


def _from_hostfile(loaded: LoadedJobs, index: int, nics: dict[str, list[str]]) -> list[str]:
    """The endpoints an mpirun hostfile names: per line a host and its slots (its first N
    NICs; all of them without a count)."""
    hostfile = Path(loaded.jobs.jobs[index].hostfile or "")
    path = hostfile if hostfile.is_absolute() else loaded.file.parent / hostfile
    try:
        text = read_bounded(path, MAX_HOSTFILE_BYTES).decode("utf-8")
    except (IntentError, UnicodeDecodeError) as exc:
        raise _Located(
            Problem(
                loaded.source.locate(("jobs", index, "hostfile")),
                dotted_path(("jobs", index, "hostfile")),
                f"Expected: a readable UTF-8 hostfile Actual: {exc}",
            )
        ) from None
    out: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        at = SourcePosition(path, number, 1)
        if len(line) > MAX_HOSTFILE_LINE:
            raise _Located(
                Problem(at, "", f"Expected: at most {MAX_HOSTFILE_LINE} characters a line "
                        f"(HOST slots=N) Actual: {len(line)}")
            )  # fmt: skip
        host, slots = _hostfile_line(line)
        if host is None or host not in nics:
            what = "HOST [slots=N] or HOST:N" if host is None else "a host of the fabric"
            raise _Located(Problem(at, "", f"Expected: {what} with a GPU NIC Actual: {line[:80]}"))
        endpoints = nics[host]
        if slots is not None and not 1 <= slots <= len(endpoints):
            raise _Located(
                Problem(
                    at,
                    "",
                    f"host {host}: Expected: slots 1-{len(endpoints)} (one rank per GPU NIC) "
                    f"Actual: {slots}",
                )
            )
        out += endpoints[: slots or len(endpoints)]
    if not out:
        raise _Located(Problem(SourcePosition(path, 1, 1), "", "Expected: hosts Actual: none"))
    return out


def _hostfile_line(line: str) -> tuple[str | None, int | None]:
    """(host, slots) of one hostfile line, (None, None) when it is neither format."""
    hydra = _HYDRA.match(line)
    if hydra:
        return hydra["host"], int(hydra["n"])
    open_mpi = _OPEN_MPI.match(line)
    if open_mpi is None:
        return None, None
    slots = _SLOTS.search(line)
    return open_mpi["host"], int(slots[1]) if slots else None


def job_file_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the job file, for editors."""
    schema = JobFile.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = SCHEMA_ID
    return schema
