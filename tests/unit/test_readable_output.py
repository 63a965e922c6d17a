"""Output a person can read where they read it (issue #41): tables fit ``COLUMNS`` and fold
to 100 columns in a pipe or a file; ports sort naturally (swp2 before swp10) by one key,
common.text.natural_key, everywhere a port list is printed; shell completion generates."""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.app.cli import main
from agent.device.state import InterfaceState, QosState, diff
from agent.intent.loader import load_fabric
from agent.intent.plan import build_plan
from agent.intent.plan_tables import plan_sections
from common.conventions import PIPE_WIDTH, console, env_columns
from common.text import natural_item_key, natural_key

ROOT = Path(__file__).resolve().parents[2]
MIXED = ROOT / "playbooks" / "fabrics" / "pod-mixed.yml"
POD = ROOT / "playbooks" / "fabrics" / "pod-400g.yml"

# ------------------------------------------------------------------------------ width


def _widths(text: str) -> list[int]:
    return [len(line) for line in text.splitlines()]


@pytest.mark.parametrize(
    ("columns", "width"),
    [(None, PIPE_WIDTH), ("140", 140), ("60", 60), ("abc", PIPE_WIDTH), ("0", PIPE_WIDTH),
     ("", PIPE_WIDTH), ("99999999999", PIPE_WIDTH), ("²", PIPE_WIDTH)],
)  # fmt: skip
def test_tables_in_a_pipe_fit_columns_or_100(
    monkeypatch: pytest.MonkeyPatch, columns: str | None, width: int
) -> None:
    """``plan`` into a pipe (CliRunner's stdout is no terminal): every line within the width,
    and a wide table uses it (pod-mixed's plan has cells longer than 100 columns), no cell cut."""
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    done = CliRunner().invoke(main, ["plan", str(MIXED)])
    assert done.exit_code == 0, done.output
    widths = _widths(done.stdout)
    assert max(widths) <= width
    assert max(widths) > min(width, 100) - 15  # the width is used, not a narrower default
    assert "…" not in done.stdout


@pytest.mark.parametrize(
    ("text", "value"),
    [("80", 80), ("20", 20), ("19", None), ("10000", 10_000), ("10001", None), ("8O", None)],
)
def test_env_columns(monkeypatch: pytest.MonkeyPatch, text: str, value: int | None) -> None:
    monkeypatch.setenv("COLUMNS", text)
    assert env_columns() == value


@pytest.mark.parametrize(("name", "value"), [("COLUMNS", "²"), ("COLUMNS", "99999999999"),
                                             ("LINES", "²"), ("LINES", "0")])  # fmt: skip
def test_a_garbage_size_in_the_environment_is_not_obeyed(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    """rich would crash on ``²`` (isdigit() yet no int) or pad to 10^11 columns; every console
    the commands make, stdout's and stderr's, has a sane size instead."""
    monkeypatch.setenv(name, value)
    for screen in (console(), console(stderr=True)):
        assert 20 <= screen.width <= 10_000 and 1 <= screen.height <= 10_000
    done = CliRunner().invoke(main, ["check", str(MIXED / "missing.yml")])
    assert done.exit_code == 2 and "Traceback" not in done.output


def test_a_given_width_wins_over_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "150")
    assert console(width=70).width == 70
    assert console().width == 150  # a pipe: COLUMNS


# ------------------------------------------------------------------------------ natural order


def _reference(name: str) -> tuple[object, ...]:
    """The textbook key (int() of each digit run) for names whose numbers int() takes."""
    parts = re.split(r"([0-9]+)", name)
    return tuple(p if i % 2 == 0 else (int(p), len(p)) for i, p in enumerate(parts))


NAMES = st.text(alphabet="swpEthernet/:-.0123456789", max_size=14)


@settings(max_examples=300, deadline=None)
@given(st.lists(NAMES, max_size=20))
def test_natural_order_is_the_numbers_order(names: list[str]) -> None:
    """On names nobody tuned it on, the key orders as numbers would (leading zeros after)."""
    assert sorted(names, key=natural_key) == sorted(names, key=_reference)


@pytest.mark.parametrize(
    ("names", "order"),
    [
        (["swp10", "swp2", "swp1"], ["swp1", "swp2", "swp10"]),
        (["Ethernet1/10", "Ethernet1/2", "Ethernet2/1"],
         ["Ethernet1/2", "Ethernet1/10", "Ethernet2/1"]),
        (["leaf10:Ethernet1", "leaf9:Ethernet2", "leaf9:Ethernet10"],
         ["leaf9:Ethernet2", "leaf9:Ethernet10", "leaf10:Ethernet1"]),
        (["eth01", "eth1", "eth0"], ["eth0", "eth1", "eth01"]),
        (["Ethernet0", "Ethernet8", "Ethernet100", "Ethernet16"],
         ["Ethernet0", "Ethernet8", "Ethernet16", "Ethernet100"]),
    ],
)  # fmt: skip
def test_natural_order_table(names: list[str], order: list[str]) -> None:
    assert sorted(names, key=natural_key) == order
    assert [n for n, _ in sorted(((n, 0) for n in names), key=natural_item_key)] == order


def test_a_hostile_name_sorts_in_linear_time() -> None:
    """int() refuses more than 4 300 digits; the key never converts, and stays linear."""
    rng = random.Random(41)
    long = ["p" + "".join(rng.choice("0123456789") for _ in range(n)) for n in (5_000, 50_000)]
    started = time.perf_counter()
    for _ in range(20):
        sorted([*long, "p1", "p" + "9" * 4_999], key=natural_key)
    assert time.perf_counter() - started < 2.0
    big = "p" + "1" * 200_000
    started = time.perf_counter()
    natural_key(big)
    assert time.perf_counter() - started < 0.5


def test_the_copies_are_one() -> None:
    """The agent's platforms, LLDP discovery and the lab's SONiC commands sort with the same
    function, and no module defines a natural key of its own."""
    from agent.device import lldp
    from agent.device.platforms import _common
    from lab.mgmt.sonic import text

    assert lldp.natural_key is _common.natural_key is text.natural_key is natural_key
    own = [
        str(path.relative_to(ROOT))
        for package in ("agent", "lab", "exporters", "common")
        for path in (ROOT / package).rglob("*.py")
        if re.search(r"^def \w*natural\w*key\(", path.read_text(), re.M)
        and path != ROOT / "common" / "text.py"
    ]
    assert own == []


def test_plan_tables_list_ports_in_natural_order() -> None:
    """pod-mixed's leaf1 has its host ports swp1-2 and, derived from the spines, swp31-32
    after them in the fabric: the table says swp1, swp2, swp31, swp32."""
    plan = build_plan(load_fabric(MIXED).intent)
    leaf = next(d for d in plan.devices if d.name == "leaf1")
    assert [p.name for p in leaf.ports] != sorted((p.name for p in leaf.ports), key=natural_key)
    (section,) = [s for s in plan_sections(plan) if s.title == "leaf1 ports"]
    shown = [row[0] for row in section.rows]
    assert shown == sorted(shown, key=natural_key) == ["swp1", "swp2", "swp31", "swp32"]


def test_a_diff_lists_interfaces_in_natural_order() -> None:
    """A switch whose ports trust differently: the differences name them swp2 before swp10."""
    names = ("swp1", "swp2", "swp10")
    desired = QosState(trust="dscp", interfaces={n: InterfaceState() for n in names})
    actual = QosState(trust="mixed", interfaces={
        "swp10": InterfaceState(trust="pcp"), "swp2": InterfaceState(trust="pcp"),
        "swp1": InterfaceState(trust="dscp")})  # fmt: skip
    named = [d.interface for d in diff("leaf1", desired, actual) if d.setting == "trust"]
    assert named == ["swp2", "swp10"]


# ------------------------------------------------------------------------------ completion


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_the_completion_script_generates(shell: str) -> None:
    done = CliRunner().invoke(
        main, [], prog_name="roce-agent", env={"_ROCE_AGENT_COMPLETE": f"{shell}_source"}
    )
    assert done.exit_code == 0
    assert "_ROCE_AGENT_COMPLETE" in done.output and "roce-agent" in done.output


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ("roce-agent pl", "plan"),
        ("roce-agent tune --obj", "--objective"),  # a command loaded on first use
        ("roce-agent lab fa", "fault"),  # the lab's group, loaded on first use
        ("roce-agent twin --scenario ", "storm"),  # a choice's values
    ],
)
def test_completion_completes(words: str, expected: str) -> None:
    # COMP_CWORD: the index of the word being completed (a new one after a trailing space)
    cword = len(words.split()) - (0 if words.endswith(" ") else 1)
    env = {"_ROCE_AGENT_COMPLETE": "bash_complete", "COMP_WORDS": words, "COMP_CWORD": str(cword)}
    done = CliRunner().invoke(main, [], prog_name="roce-agent", env=env)
    assert done.exit_code == 0
    assert expected in [line.split(",", 1)[1] for line in done.output.splitlines()], done.output


def test_the_console_script_prints_the_bash_script() -> None:
    """As docs/install.md has it: ``eval "$(_ROCE_AGENT_COMPLETE=bash_source roce-agent)"``."""
    script = Path(sys.executable).parent / "roce-agent"
    if not script.exists():
        pytest.skip(f"no console script beside {sys.executable}")
    env = {**os.environ, "_ROCE_AGENT_COMPLETE": "bash_source"}
    done = subprocess.run([str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "complete -o nosort -F _roce_agent_completion roce-agent" in done.stdout
