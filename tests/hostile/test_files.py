"""Hostile files (issues #41 and #42): the files the tool reads, and the secrets in them.

Each case builds its input in a fresh folder and runs the real command in its own forked
process (tests/unit/bounded_cli.py: 2 GiB of address space, 30 s at most), then holds it to the
issue's bar: exit 2, an error that names the file (and the line, where there is one), within
5 s and under 1.5 GB resident, no traceback or "internal error", and never a word of a secret.
The cases tests/unit/test_hostile_input.py and test_bad_corpus.py already run through `check`
(alias bombs, NUL bytes, FIFOs, decimal 5 000-digit numbers, .inf, foreign profiles) are not
repeated here.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.unit.bounded_cli import BoundedCli
from tests.unit.test_hostile_input import BOMB

SECONDS = 5.0
MEMORY = 1.5 * 1024**3
SECRET = "hunter2-SECRET-CONTENT"
ENV = {"ROCE_TEST_PASSWORD": "x"}

HEADER = """\
name: t
profile: nvidia-default
defaults:
  username: netops
  credentials: {password_env: ROCE_TEST_PASSWORD}
  ports: {speed: 400G, mtu: 9214, cable_m: 3}
devices:
"""
LEAF = (
    "  - {name: leaf1, role: leaf, platform: arista_eos, host: 127.0.0.1, port: 9, ports: [%s]}\n"
)
SPINE = "  - {name: spine1, role: spine, platform: arista_eos, host: 127.0.0.2, port: 9}\n"


@dataclass(frozen=True)
class Case:
    """``make(folder)`` writes the input and returns the command line (``{}`` is the folder)."""

    make: Callable[[Path], list[str]]
    names: str  # the file the error must name (relative to the folder, or absolute)
    line: int  # the line it must name; 0: the whole file (no line); -1: any line
    words: str  # in the error output
    lines_at_most: int = 0  # error lines, when the case is about how many
    env: dict[str, str] = field(default_factory=dict)


def _write(folder: Path, name: str, text: str, mode: int = 0o644) -> Path:
    path = folder / name
    path.write_text(text)
    path.chmod(mode)
    return path


def _check(body: str) -> Callable[[Path], list[str]]:
    def make(folder: Path) -> list[str]:
        return ["check", str(_write(folder, "fabric.yml", HEADER + body))]

    return make


def _leaf_port(port: str) -> Callable[[Path], list[str]]:
    return _check(LEAF % port + SPINE)


# ------------------------------------------------------------------ item 1: both ends agree

MISMATCH = (
    "  - {name: spine1, role: spine, platform: arista_eos, host: 127.0.0.2, port: 9,\n"
    "     port_defaults: {cable_m: 20}}\n"
    "  - {name: leaf1, role: leaf, platform: arista_eos, host: 127.0.0.1, port: 9,\n"
    "     ports: [{name: Ethernet49, peer: 'spine1:Ethernet1', cable_m: 3}]}\n"
)

# ------------------------------------------------------------------ item 2: linear parsing


def _long_range_name(name: str) -> Callable[[Path], list[str]]:
    return _leaf_port(f"{{name: {name}, peer: 'spine1:Ethernet1'}}")


# ------------------------------------------------------------------ item 3: discover


def _discover(text: str) -> Callable[[Path], list[str]]:
    def make(folder: Path) -> list[str]:
        return ["discover", str(_write(folder, "fabric.yml", text))]

    return make


# ------------------------------------------------------------------ item 5: numbers


def _validation(line: str) -> Callable[[Path], list[str]]:
    return _check(LEAF % "" + SPINE + "validation:\n" + line)


def _many_ports(folder: Path) -> list[str]:
    """65 536 links declared on the leaf, one range of 4 096 ports per line: with the spine
    ends derived, 131 072 ports (849 MB before the limit counted derived ends)."""
    ranges = ", ".join(
        f"{{name: Ethernet{k}/1-4096, peer: 'spine1:Ethernet{k}/{{n}}'}}" for k in range(1, 17)
    )
    return ["check", str(_write(folder, "fabric.yml", HEADER + LEAF % ranges + SPINE))]


def _many_mistakes(folder: Path) -> list[str]:
    ports = ", ".join(f"{{name: Ethernet{k}, mtu: {k}}}" for k in range(1, 121))
    return ["check", str(_write(folder, "fabric.yml", HEADER + LEAF % ports + SPINE))]


# ------------------------------------------------------------------ item 4: secrets


def _fabric_with_password(folder: Path, password_file: str) -> Path:
    text = HEADER.replace(
        "{password_env: ROCE_TEST_PASSWORD}", f"{{password_file: '{password_file}'}}"
    )
    return _write(
        folder, "fabric.yml", text + LEAF % "{name: Ethernet1, peer: 'spine1:Ethernet1'}" + SPINE
    )


def _password(
    make_file: Callable[[Path], object], command: str = "diff"
) -> Callable[[Path], list[str]]:
    """A fabric whose password_file is what ``make_file`` makes at folder/pw; ``diff`` reads
    it before connecting to anything."""

    def make(folder: Path) -> list[str]:
        make_file(folder / "pw")
        return [command, str(_fabric_with_password(folder, "pw"))]

    return make


def _readable(path: Path) -> None:
    _write(path.parent, path.name, SECRET + "\n", 0o644)


def _symlink(path: Path) -> None:
    target = _write(path.parent, "real-pw", SECRET + "\n", 0o600)
    path.symlink_to(target)


def _key(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


def _outside(named: str) -> Callable[[Path], list[str]]:
    def make(folder: Path) -> list[str]:
        return ["check", str(_fabric_with_password(folder, named))]

    return make


def _world_writable(folder: Path) -> list[str]:
    return ["check", str(_write(folder, "fabric.yml", HEADER + LEAF % "" + SPINE, 0o666))]


NOT_SHOWN = "its content is not shown"
SHADOW = f"root:$6$salt${SECRET}:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n"


def _agent_yaml(folder: Path, web_config: str) -> list[str]:
    fabric = _write(folder, "fabric.yml", HEADER + LEAF % "" + SPINE)
    config = _write(
        folder,
        "agent.yaml",
        f"fabric: {fabric}\nstate_dir: {folder / 'state'}\n"
        f"exporter: {{web_config: {web_config}}}\n",
    )
    return ["serve", "--config", str(config), "--check-config"]


def _web_config_is_shadow(folder: Path) -> list[str]:
    _write(folder, "web.yml", SHADOW, 0o600)
    return _agent_yaml(folder, str(folder / "web.yml"))


def _fabric_is_shadow(folder: Path) -> list[str]:
    return ["check", str(_write(folder, "fabric.yml", SHADOW, 0o600))]


def _fabric_is_a_key(folder: Path) -> list[str]:
    _key(folder / "fabric.yml")
    return ["check", str(folder / "fabric.yml")]


def _playbook_is_shadow(folder: Path) -> list[str]:
    fabric = _write(folder, "fabric.yml", HEADER + LEAF % "" + SPINE)
    return ["run", str(_write(folder, "playbook.yml", SHADOW, 0o600)), str(fabric)]


CASES: dict[str, Case] = {
    # item 1 (#41): a default on one end, a value on the other
    "cable-length-port-defaults-vs-port": Case(
        _check(MISMATCH), "fabric.yml", 11,
        "spine1:Ethernet1 has 20 m from port_defaults of spine1"),
    # item 2: the all-digit port names, and other patterns fed long adversarial text
    "port-name-20000-digits": Case(
        _long_range_name(f"'{'1' * 20_000}'"), "fabric.yml", 8, "(20000 characters)"),
    "port-name-200000-digits": Case(
        _long_range_name(f"'{'1' * 200_000}'"), "fabric.yml", 8, "(200000 characters)"),
    "port-name-200000-digits-unquoted": Case(
        _long_range_name("1" * 200_000), "fabric.yml", 8, "Actual: 200000 digits"),
    "port-range-of-100000-digits": Case(
        _long_range_name(f"Ethernet{'1' * 100_000}-{'2' * 100_000}"), "fabric.yml", 8,
        "(200009 characters)"),
    "speed-with-100000-spaces": Case(
        _leaf_port("{name: Ethernet1, speed: '1" + " " * 100_000 + "x'}"), "fabric.yml", 8,
        "expected a speed such as"),
    "credential-path-of-dollar-braces": Case(
        lambda d: ["check", str(_fabric_with_password(d, "${" * 50_000))], "fabric.yml", 5,
        "Expected: a path of at most 4096 characters"),
    "peer-of-50000-braces": Case(
        _leaf_port("{name: Ethernet1-2, peer: '" + "{" * 50_000 + "'}"), "fabric.yml", 8,
        "Expected: a peer with a pattern"),
    # item 3: discover reads its fabric file with the bounded loader
    "discover-alias-bomb": Case(_discover(BOMB), "fabric.yml", 6, "too many values"),
    "discover-deep-nesting": Case(
        _discover("a: " + "[" * 200 + "]" * 200 + "\n"), "fabric.yml", 1, "nesting too deep"),
    # item 5: numbers, expansion and error limits
    "hex-key-of-5000-digits": Case(
        _check(LEAF % "" + SPINE + "x-a:\n  ? 0x" + "f" * 5000 + "\n  : 1\n"), "fabric.yml", 11,
        "number too long: Expected: at most 30 digits Actual: 5000 digits"),
    "hex-threshold-of-5000-digits": Case(
        _validation("  max_storms: 0x" + "f" * 5000 + "\n"), "fabric.yml", 11, "number too long"),
    "threshold-inf-string": Case(
        _validation('  max_pause_frames_per_s: "inf"\n'), "fabric.yml", 11, "finite number"),
    "threshold-nan-string": Case(
        _validation('  max_pause_frames_per_s: "nan"\n'), "fabric.yml", 11, "finite number"),
    "threshold-1e309": Case(
        _validation('  max_pause_frames_per_s: "1e309"\n'), "fabric.yml", 11, "finite number"),
    "threshold-beyond-a-counter": Case(
        _validation("  max_storms: 99999999999999999999999999\n"), "fabric.yml", 11,
        "less than or equal to 18446744073709551615"),
    "65536-links-declared-once": Case(
        _many_ports, "fabric.yml", 8, "at most 65536 ports in the fabric after expanding ranges "
        "and deriving the other ends of links"),
    "one-range-typo-is-one-error": Case(
        _leaf_port("{name: Ethernet1-4096, peer: 'gpuu{n}:eth0'}"), "fabric.yml", 8,
        "(Ethernet1 and 4095 more): IR010", lines_at_most=1),
    "errors-capped-at-50": Case(
        _many_mistakes, "fabric.yml", 8, "and 70 more problem(s) from here on", lines_at_most=51),
    # item 4: secrets
    "password-file-readable-by-others": Case(
        _password(_readable), "pw", 0, "Actual: mode 0644, others can read it; fix: chmod 600"),
    "password-file-symlink": Case(_password(_symlink), "pw", 0, "Actual: a symbolic link"),
    "password-file-fifo": Case(_password(lambda p: os.mkfifo(p, 0o600)), "pw", 0, "Actual: a FIFO"),
    "password-file-is-a-key": Case(_password(_key), "pw", 0, "one line of text Actual:"),
    "password-file-etc-shadow": Case(_outside("/etc/shadow"), "fabric.yml", 5, "(outside them"),
    "password-file-root-ssh-key": Case(
        _outside("/root/.ssh/id_ed25519"), "fabric.yml", 5, "(outside them"),
    "fabric-anyone-can-write": Case(_world_writable, "fabric.yml", 0, "fix: chmod o-w"),
    "fabric-is-etc-shadow-alike": Case(_fabric_is_shadow, "fabric.yml", 0, NOT_SHOWN),
    "fabric-is-a-private-key": Case(_fabric_is_a_key, "fabric.yml", 1, "must be a mapping"),
    "web-config-is-etc-shadow-alike": Case(_web_config_is_shadow, "web.yml", 0, NOT_SHOWN),
    "playbook-is-etc-shadow-alike": Case(_playbook_is_shadow, "playbook.yml", 0, NOT_SHOWN),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_hostile_file_exits_2_located_within_5s_and_1_5gb(
    name: str,
    tmp_path: Path,
    bounded_cli: BoundedCli,
) -> None:
    case = CASES[name]
    argv = case.make(tmp_path)
    outcome = bounded_cli.run(*argv, env={**ENV, **case.env})
    output = outcome.stdout + outcome.stderr
    assert outcome.code == 2, f"{name}: exit {outcome.code}\n{output[-3000:]}"
    assert outcome.seconds < SECONDS, f"{name}: {outcome.seconds:.1f} s"
    assert outcome.max_rss_kb * 1024 < MEMORY, f"{name}: {outcome.max_rss_kb} kB"
    for banned in ("Traceback", "internal error", SECRET):
        assert banned not in output, f"{name}: {banned!r} in\n{output[-3000:]}"
    assert len(output) < 20_000, f"{name}: {len(output)} characters of output"
    errors = [row for row in outcome.stderr.splitlines() if row.startswith("error: ")]
    assert errors, output
    named = case.names if case.names.startswith("/") else str(tmp_path / case.names)
    # the file first (FILE:LINE:COL: ...), or after the device and field that named it
    located = re.compile(rf"^error: (?:.*? )?{re.escape(named)}(?::(?P<line>\d+):\d+)?: ")
    found = [m for m in map(located.match, errors) if m]
    assert found, f"{name}: no error names {named}:\n{output[-3000:]}"
    if case.line > 0:
        assert any(m["line"] == str(case.line) for m in found), output[-3000:]
    elif case.line == 0:
        assert any(m["line"] is None for m in found), output[-3000:]
    assert case.words in output, f"{name}: {case.words!r} not in\n{output[-3000:]}"
    if case.lines_at_most:
        assert len(errors) <= case.lines_at_most, f"{name}: {len(errors)} error lines"
