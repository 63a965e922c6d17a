"""Every pattern a user string meets in agent/intent and common runs in linear time (#42).

The range pattern of the compact fabric form took 10 s to refuse a 20 000-digit port name and
never finished 200 000 digits; a speed written as "1", 50 000 spaces and "x" was quadratic too.
Each parser below is timed on adversarial strings hypothesis builds (a short unit of the
characters its pattern cares about, repeated, then a character that makes the match fail)
at two lengths ten times apart: the longer must cost well under 100 times the shorter (the
mark of quadratic work), and stay under an absolute bound.

The parsers are every regular expression on user input in agent/intent and common (the audit
in docs/fabric-file.md, "Input limits"): a new one belongs in PARSERS.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.intent import credpaths, expand, model, portnames, shard, tokens, units
from agent.intent.loader import _collapse
from common import errors, text, validation, yamlsource
from common.clicktypes import Duration
from common.errors import Problem

REPO = Path(__file__).resolve().parents[2]
SHORT, LONG = 5_000, 50_000
# Ten times the input: linear work costs ~10x, quadratic ~100x. Timer noise on a busy machine
# is absorbed by the floor: below it, a run is too fast to be quadratic at LONG characters.
MAX_RATIO = 30.0
FLOOR_S = 0.02
MAX_LONG_S = 0.5


def _quiet(parse: Callable[[str], object]) -> Callable[[str], object]:
    def run(text: str) -> object:
        try:
            return parse(text)
        except (ValueError, TypeError):  # refusing is the expected outcome
            return None

    return run


def _fill(text: str) -> object:
    if expand._has_pattern(text):
        return expand._fill(expand._template(text), 1, 0)
    return None


def _collapsed(text: str) -> object:
    return _collapse([Problem(None, f"devices[0].ports[0].peer ({text})", "m")] * 2)


# name -> (parser, the characters its pattern cares about)
PARSERS: dict[str, tuple[Callable[[str], object], str]] = {
    "expand.split_range": (expand.split_range, "0123456789-/a"),
    "expand._fill": (_fill, "{}ni+-0123456789 "),
    "units.parse_speed": (units.parse_speed, "0123456789. Gb/s"),
    "units.parse_size": (units.parse_size, "0123456789. KiB"),
    "credpaths.expand": (lambda t: credpaths.expand(t, {"CREDENTIALS_DIRECTORY": "/c"}), "${}a_"),
    "shard.parse_shard": (shard.parse_shard, "0123456789 /"),
    "model.check_name": (model.check_name, "a0_.-"),
    "model.check_interface": (model.check_interface, "a0/.-_"),
    "model._mac": (model._mac, "0a:"),
    "model._peer": (model._peer, "a0:/"),
    "tokens.check_host_key_line": (tokens.check_host_key_line, "ssh-ed25519 AAAA+/="),
    "tokens.check_rdma_port_ref": (tokens.check_rdma_port_ref, "mlx5_0/1"),
    "portnames.arista_eos": (lambda t: portnames.check_port_name("arista_eos", t), "Ethern1/0"),
    "portnames.cumulus_nvue": (lambda t: portnames.check_port_name("cumulus_nvue", t), "swp1s0"),
    "errors.printable": (errors.printable, "a\x1b\u202e\n"),
    "yamlsource.dotted_path": (lambda t: yamlsource.dotted_path(("a", t, 0)), "a-_[]'."),
    "yamlsource.control": (lambda t: yamlsource._CONTROL.search(t), "a \t"),
    "validation.data_loc": (lambda t: validation.data_loc((t,), {}), "a-[]z"),
    "loader._collapse": (_collapsed, "() a"),
    "clicktypes.Duration": (Duration(3600).parse, "0123456789. ms"),
    "text.natural_key": (text.natural_key, "swp0123456789 "),
}


def _seconds(parse: Callable[[str], object], text: str) -> float:
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        parse(text)
        best = min(best, time.perf_counter() - started)
    return best


def _adversarial(head: str, unit: str, tail: str, length: int) -> str:
    return head + (unit * (length // len(unit) + 1))[:length] + tail


def _assert_linear(name: str, head: str, unit: str, tail: str) -> None:
    run = _quiet(PARSERS[name][0])
    short = _seconds(run, _adversarial(head, unit, tail, SHORT))
    long = _seconds(run, _adversarial(head, unit, tail, LONG))
    shown = f"{name}: {head!r} + {LONG} characters of {unit!r} + {tail!r}"
    assert long < MAX_LONG_S, f"{shown} took {long:.3f} s"
    assert long < max(MAX_RATIO * short, FLOOR_S), (
        f"{shown} cost {long / short:.0f}x {SHORT} ({short:.4f} s -> {long:.4f} s): not linear"
    )


@pytest.mark.parametrize("name", sorted(PARSERS))
@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_parsing_a_long_adversarial_string_is_linear(name: str, data: st.DataObject) -> None:
    alphabet = PARSERS[name][1]
    head = data.draw(st.text(alphabet, max_size=4), label="head")
    unit = data.draw(st.text(alphabet, min_size=1, max_size=6), label="unit")
    tail = data.draw(st.sampled_from(["", "!", "x", "\x00", " ", "-", "}"]), label="tail")
    _assert_linear(name, head, unit, tail)


# The shapes that were quadratic before (#42), and their kin, always tried.
WORST = [
    ("expand.split_range", "", "1", ""),  # the issue's all-digit port name
    ("expand.split_range", "", "1", "-"),
    ("units.parse_speed", "1", " ", "x"),  # two runs of spaces around the unit
    ("units.parse_size", "1", " ", "x"),
    ("credpaths.expand", "", "${", ""),
    ("expand._fill", "", "{", ""),
    ("shard.parse_shard", "", "1", "x"),
    ("validation.data_loc", "a", "-a", "!"),
    ("clicktypes.Duration", "", "1", " x"),
]


@pytest.mark.parametrize(("name", "head", "unit", "tail"), WORST)
def test_known_worst_cases_are_linear(name: str, head: str, unit: str, tail: str) -> None:
    _assert_linear(name, head, unit, tail)


def test_the_issue_s_port_name_is_refused_at_once() -> None:
    """200 000 digits never finished before; now a name longer than any interface name is
    no range at all, and the model refuses it by its length."""
    started = time.perf_counter()
    assert expand.split_range("1" * 200_000) is None
    with pytest.raises(ValueError, match=r"\(200000 characters\)"):
        model.check_interface("1" * 200_000)
    assert time.perf_counter() - started < 0.1


@pytest.mark.parametrize(
    ("name", "parts"),
    [
        ("Ethernet1/1-8", ("Ethernet1/", "1", "8")),
        ("Ethernet1/1/1-4", ("Ethernet1/1/", "1", "4")),
        ("swp1s0-3", ("swp1s", "0", "3")),
        ("eth08-10", ("eth", "08", "10")),
        ("Eth1-2-3", ("Eth1-", "2", "3")),
        ("1-2", ("", "1", "2")),
        ("Ethernet1", None),
        ("Ethernet-1", None),
        ("Ethernet1-", None),
        ("Ethernet\u0661-\u0663", None),  # Arabic-Indic digits: not a range of ASCII names
        ("E" * 47 + "1-2", None),  # longer than an interface name
    ],
)
def test_split_range(name: str, parts: tuple[str, str, str] | None) -> None:
    assert expand.split_range(name) == parts


def test_every_pattern_on_user_input_is_in_the_table() -> None:
    """A module of agent/intent or common that runs a pattern is timed above."""
    timed = {name.split(".")[0] for name in PARSERS}
    for folder in ("agent/intent", "common"):
        for path in sorted((REPO / folder).glob("*.py")):
            relative = path.relative_to(REPO).as_posix()
            if not re.search(r"\bre\.(compile|fullmatch|match|search|sub)\(", path.read_text()):
                continue
            assert path.stem in timed, relative
