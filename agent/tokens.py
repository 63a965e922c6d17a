"""Checks for the names that end up in device commands, sysfs paths and argv: plain Python,
so that what runs on hosts (the probe and perftest workers) need not import pydantic."""

from __future__ import annotations

import re
from collections.abc import Callable


def token_check(kind: str, pattern: str, allowed: str, max_length: int) -> Callable[[str], str]:
    """A check for strings that end up inside device commands.

    One pattern per kind of name keeps CLI injection (newlines, ``;``, spaces) out, and the
    message says what is allowed rather than echoing a regex.
    """
    compiled = re.compile(pattern)

    def check(value: str) -> str:
        if len(value) > max_length or not compiled.fullmatch(value):
            raise ValueError(
                f"invalid {kind} {value!r}: expected 1-{max_length} characters, {allowed}"
            )
        return value

    return check


# An RDMA device as the kernel names it (/sys/class/infiniband/NAME: mlx5_0, rxe0, bnxt_re0),
# optionally with its port: "mlx5_0/1". It ends up in sysfs paths and perftest's -d/-i.
check_rdma_port_ref = token_check(
    "RDMA device",
    r"[A-Za-z][A-Za-z0-9_-]*(?:/[1-9][0-9]{0,2})?",
    "a kernel RDMA device name such as mlx5_0, optionally with its port (mlx5_0/1)",
    64,
)
