"""argv for perftest's bandwidth tests, server and client: lists of strings, never a shell line.

Every flag is in perftest 4.5-0.17 (Debian 12's ``perftest 4.5+0.17-1``, whose ``--help`` lists
them; the long options are in the ``long_options`` table of ``parser`` in
src/perftest_parameters.c): ``-d``, ``-i``, ``-x``, ``-q``, ``-s``, ``-D``, ``-p``, ``-F``,
``-b``, ``--report_gbits``, ``--report-both`` and ``--tclass`` since at least 4.4-0.8;
``--out_json`` and ``--out_json_file`` since v4.5-0.11 (commit 45e574b, 2021): older packages
(Ubuntu 20.04's 4.4) need ``json_path=None`` and their stdout. Newer perftest changes only the
output (standard JSON from 24.01.0-0.38, "MiB/sec" labels from 24.07.0-0.44), which
:mod:`agent.observe.perftest.output` reads either way.

Limits enforced here are perftest's own (src/perftest_parameters.h, same in 4.5-0.17 and
26.04): ``-x`` 0..64 (``MAX_GID_IX``), ``-q`` 1..16384 (``MAX_QP_NUM``), ``-s`` 1..2^31-1
(``UINT_MAX / 2``), ``-i`` a ``uint8_t``, ``-D`` a positive ``int`` of seconds. Of ``-D N``
perftest measures ``N - 2 * (N // 4)`` seconds: it skips a margin of ``N // 4`` at each end
(``margin = duration / 4`` in src/perftest_parameters.c, ``catch_alarm`` in
src/perftest_resources.c).

Both sides get ``--tclass``: each sets the traffic class of what it sends (``grh.traffic_class``
in ``ctx_modify_qp_to_rtr``), and the server sends the ACKs of write and send and the data of
read. ``-F`` keeps perftest from warning on stderr when the CPU frequency is not at maximum
(get_clock.c), which is noise, not a failure. ``-b`` gets ``--report-both`` so that stdout
carries each direction, except for ``ib_send_bw``: with ``-D`` it never exchanges the two
sides' reports, and the "Remote results" row it prints is uninitialised memory (send_bw.c).
"""

from __future__ import annotations

import ipaddress
import math
import re
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Literal, Required, TypedDict, Unpack

from agent.errors import AgentError, printable
from agent.observe.perftest.gid import GidSelectionError, check_port, check_rdma_device

if TYPE_CHECKING:  # the worker on a host imports this module: no pydantic at run time
    from agent.intent.model import PerftestPolicy

Test = Literal["write", "read", "send"]
BINARIES: dict[str, str] = {"write": "ib_write_bw", "read": "ib_read_bw", "send": "ib_send_bw"}

MAX_GID_INDEX = 64  # MAX_GID_IX
MAX_QPS = 16384  # MAX_QP_NUM
MAX_MESSAGE_BYTES = 2**31 - 1  # UINT_MAX / 2
MAX_DURATION_S = 2**31 - 1  # an int
MAX_PATH_CHARS = 4096
# -u: the QP's ACK timeout is 4.096 us * 2^u (IBTA; perftest's default u = 14, ~67 ms).
DEFAULT_QP_TIMEOUT = 14
MAX_QP_TIMEOUT = 31
DEFAULT_TX_DEPTH = 128  # -t, perftest's default send queue depth
MAX_TX_DEPTH = 8192
# After -D ends, perftest waits for every posted message to complete: at most this much of
# line rate may be outstanding, or the drain (and, on a slow link, the ACK timeout) decides
# the run.
MAX_OUTSTANDING_S = 0.25
_HOSTNAME_RE = re.compile(
    r"(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"
)
_PATH_RE = re.compile(r"/[A-Za-z0-9_./@+-]*")


class PerftestCommandError(AgentError):
    """A perftest command that cannot be built: names the option and the allowed values."""


def _problem(option: str, expected: str, actual: object) -> PerftestCommandError:
    return PerftestCommandError(
        f"perftest {option}: Expected: {expected} Actual: {printable(repr(actual))}"
    )


def _int_in(option: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _problem(option, f"an integer {low}-{high}", value)
    return value


def duration_seconds(duration_s: float) -> int:
    """perftest's ``-D`` for a policy duration: whole seconds, rounded up (it parses an int)."""
    if not math.isfinite(duration_s) or duration_s <= 0:
        raise _problem("-D", "a positive duration", duration_s)
    return _int_in("-D", math.ceil(duration_s), 1, MAX_DURATION_S)


def measured_seconds(duration: int) -> int:
    """Of ``-D duration``, the seconds perftest measures (the margins excluded)."""
    return duration - 2 * (duration // 4)


def check_server_address(address: str) -> str:
    """An IP address or host name: perftest takes the last non-option argument as the server,
    so anything starting with '-' or holding spaces would be read as something else."""
    if not isinstance(address, str):
        raise _problem("server address", "an IP address or a host name", address)
    try:
        return str(ipaddress.ip_address(address))
    except ValueError:
        pass
    if not _HOSTNAME_RE.fullmatch(address):
        raise _problem("server address", "an IP address or a host name", address)
    return address


@dataclass(frozen=True)
class PerftestCommand:
    """One side pair of a perftest bandwidth run; :meth:`server_argv` and :meth:`client_argv`
    give the two command lines."""

    test: Test
    device: str
    gid_index: int
    qps: int
    message_bytes: int
    duration_s: int
    tcp_port: int
    ib_port: int = 1
    tclass: int | None = None
    bidirectional: bool = False
    json_path: str | None = None
    qp_timeout: int | None = None  # -u; None: perftest's 14
    tx_depth: int | None = None  # -t; None: perftest's 128

    def __post_init__(self) -> None:
        if self.test not in BINARIES:
            raise _problem("test", "write, read or send", self.test)
        try:
            check_rdma_device(self.device)
            check_port(self.ib_port)
        except GidSelectionError as exc:
            raise PerftestCommandError(f"perftest -d/-i: {exc}") from None
        _int_in("-x", self.gid_index, 0, MAX_GID_INDEX)
        _int_in("-q", self.qps, 1, MAX_QPS)
        _int_in("-s", self.message_bytes, 1, MAX_MESSAGE_BYTES)
        _int_in("-D", self.duration_s, 1, MAX_DURATION_S)
        _int_in("-p", self.tcp_port, 1, 65535)
        if self.tclass is not None:
            _int_in("--tclass", self.tclass, 0, 255)
        if self.qp_timeout is not None:
            _int_in("-u", self.qp_timeout, 0, MAX_QP_TIMEOUT)
        if self.tx_depth is not None:
            _int_in("-t", self.tx_depth, 1, MAX_TX_DEPTH)
        if self.json_path is not None and (
            len(self.json_path) > MAX_PATH_CHARS or not _PATH_RE.fullmatch(self.json_path)
        ):
            raise _problem(
                "--out_json_file", "an absolute path of letters, digits and _./@+-",
                self.json_path,
            )  # fmt: skip

    @property
    def binary(self) -> str:
        return BINARIES[self.test]

    @property
    def report_both(self) -> bool:
        return self.bidirectional and self.test != "send"

    @property
    def measured_seconds(self) -> int:
        return measured_seconds(self.duration_s)

    def _common(self) -> list[str]:
        argv = [
            self.binary,
            "-d", self.device,
            "-i", str(self.ib_port),
            "-x", str(self.gid_index),
            "-q", str(self.qps),
            "-s", str(self.message_bytes),
            "-D", str(self.duration_s),
            "-p", str(self.tcp_port),
            "-F",
            "--report_gbits",
        ]  # fmt: skip
        if self.tclass is not None:
            argv.append(f"--tclass={self.tclass}")
        if self.qp_timeout is not None:
            argv += ["-u", str(self.qp_timeout)]
        if self.tx_depth is not None:
            argv += ["-t", str(self.tx_depth)]
        if self.bidirectional:
            argv.append("-b")
        if self.report_both:
            argv.append("--report-both")
        if self.json_path is not None:
            argv += ["--out_json", f"--out_json_file={self.json_path}"]
        return argv

    def server_argv(self) -> list[str]:
        """The listening side (start it first; it waits for the client on ``tcp_port``)."""
        return self._common()

    def client_argv(self, server_address: str) -> list[str]:
        """The connecting side; its stdout is the measurement of write and read."""
        return [*self._common(), check_server_address(server_address)]


def tcp_port_for(policy: PerftestPolicy, index: int) -> int:
    """perftest's exchange port of the ``index``-th concurrent pair on a host (an incast's
    receiver runs one server per sender)."""
    port = policy.base_tcp_port + _int_in("pair index", index, 0, 65535)
    return _int_in("-p", port, 1, 65535)


# What a host side of a run is told of the command (the perftest worker's spec): all of it
# but the GID index, which the host looks up itself, and the report file, which it makes.
COMMAND_FIELDS = tuple(
    f.name for f in fields(PerftestCommand) if f.name not in ("gid_index", "json_path")
)


def qp_timeout_for(time_dilation: int) -> int | None:
    """``-u`` for a fabric whose links stand for ones ``time_dilation`` times faster (the lab:
    emulation.time_dilation): the NIC's timers run that much slower, as the lab hosts' DCQCN
    timers do (agent.observe.probes.dilation), so the ACK timeout grows by the same factor, a power
    of
    two at a time. None (perftest's 14) on a real fabric."""
    if time_dilation <= 1:
        return None
    return min(MAX_QP_TIMEOUT, DEFAULT_QP_TIMEOUT + math.ceil(math.log2(time_dilation)))


def tx_depth_for(line_rate_bps: float, qps: int, message_bytes: int) -> int | None:
    """``-t`` so that what the client posts ahead drains in :data:`MAX_OUTSTANDING_S` of line
    rate; None (perftest's 128) when 128 per QP already does, as on any 25G+ link with the
    default 64 KiB messages. On a 10 Mb/s lab link 128 x 4 QPs x 64 KiB is 27 s of data:
    the run would end in the drain, and every message would wait longer than its ACK timeout."""
    fits = int(line_rate_bps / 8 * MAX_OUTSTANDING_S / (qps * message_bytes))
    return None if fits >= DEFAULT_TX_DEPTH else max(1, fits)


class CommandSite(TypedDict, total=False):
    """Where and how one perftest command runs: the RDMA device, its GID index and the TCP
    port (required); the device's port (1), the traffic class, ``-b``, a JSON output path,
    the link's line rate and the fabric's time dilation (1)."""

    device: Required[str]
    gid_index: Required[int]
    tcp_port: Required[int]
    ib_port: int
    tclass: int | None
    bidirectional: bool
    json_path: str | None
    line_rate_bps: float | None
    time_dilation: int


def command_from_policy(policy: PerftestPolicy, **site: Unpack[CommandSite]) -> PerftestCommand:
    """The command the validation policy asks for (test, QPs, size, duration); with the
    link's ``line_rate_bps`` and the fabric's ``time_dilation``, the send depth and ACK
    timeout that suit them (:func:`tx_depth_for`, :func:`qp_timeout_for`)."""
    line_rate_bps = site.get("line_rate_bps")
    return PerftestCommand(
        test=policy.test,
        device=site["device"],
        ib_port=site.get("ib_port", 1),
        gid_index=site["gid_index"],
        qps=policy.qps,
        message_bytes=policy.message_bytes,
        duration_s=duration_seconds(policy.duration_s),
        tcp_port=site["tcp_port"],
        tclass=site.get("tclass"),
        bidirectional=site.get("bidirectional", False),
        json_path=site.get("json_path"),
        qp_timeout=qp_timeout_for(site.get("time_dilation", 1)),
        tx_depth=(
            tx_depth_for(line_rate_bps, policy.qps, policy.message_bytes)
            if line_rate_bps is not None
            else None
        ),
    )
