"""Checks for the names that end up in device commands, sysfs paths and argv: plain Python,
so that what runs on hosts (the probe and perftest workers) need not import pydantic."""

from __future__ import annotations

import base64
import binascii
import re
import struct
from collections.abc import Callable

from common.errors import excerpt


def token_check(kind: str, pattern: str, allowed: str, max_length: int) -> Callable[[str], str]:
    """A check for strings that end up inside device commands.

    One pattern per kind of name keeps CLI injection (newlines, ``;``, spaces) out, and the
    message says what is allowed rather than echoing a regex.
    """
    compiled = re.compile(pattern)

    def check(value: str) -> str:
        # The length first: no pattern ever runs on a longer string.
        if len(value) > max_length or not compiled.fullmatch(value):
            raise ValueError(
                f"invalid {kind} {excerpt(value)}: expected 1-{max_length} characters, {allowed}"
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


# The SSH host key types the agent can check (agent.device.hostkeys), each with the host key
# algorithms that negotiate it.
KEY_ALGORITHMS: dict[str, tuple[str, ...]] = {
    "ssh-ed25519": ("ssh-ed25519",),
    "ecdsa-sha2-nistp256": ("ecdsa-sha2-nistp256",),
    "ecdsa-sha2-nistp384": ("ecdsa-sha2-nistp384",),
    "ecdsa-sha2-nistp521": ("ecdsa-sha2-nistp521",),
    "ssh-rsa": ("rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"),
}
# TYPE, a space, at most 8 192 base64 characters and a 200-character comment.
MAX_KEY_LINE = 8500
_KEY_LINE = re.compile(
    r"(?P<type>ssh-ed25519|ecdsa-sha2-nistp(?:256|384|521)|ssh-rsa) "
    r"(?P<blob>[A-Za-z0-9+/]{16,8192}={0,2})(?: [\x20-\x7e]{0,200})?"
)


def check_host_key_line(value: str) -> str:
    """Validate a pinned ``host_key`` (``TYPE BASE64 [comment]``, as in ``*.pub`` files).

    Cheap and paramiko-free (it runs at load time): the base64 must decode and name the same
    key type as the text before it.
    """
    value = value.strip()
    match = _KEY_LINE.fullmatch(value) if len(value) <= MAX_KEY_LINE else None
    if not match:
        raise ValueError(
            "invalid host_key: expected 'TYPE BASE64' with TYPE one of "
            f"{', '.join(KEY_ALGORITHMS)} (as in the switch's ssh_host_*_key.pub)"
        )
    try:
        blob = base64.b64decode(match["blob"], validate=True)
        (length,) = struct.unpack(">I", blob[:4])
        embedded = blob[4 : 4 + length].decode("ascii")
    except (binascii.Error, struct.error, UnicodeDecodeError):
        raise ValueError("invalid host_key: the base64 part is not an SSH public key") from None
    if embedded != match["type"]:
        raise ValueError(
            f"invalid host_key: Expected: key type {match['type']} inside the base64 "
            f"Actual: {embedded[:40]!r}"
        )
    return f"{match['type']} {match['blob']}"
