"""The command line's conventions (docs/cli-conventions.md), checked over the whole click tree.

Every command `roce-agent` can run -- the lazy groups (probe, lab, …) included -- is walked
once; each convention is a table-driven test over that walk, so a new command or option that
breaks one fails here with its name in the test ID.
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import click
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from agent.app import change
from agent.app.cli import main
from agent.device.push import DeviceResult
from agent.device.state import Difference
from common.clicktypes import Duration
from common.conventions import console, duration, named_durations, select_devices, table

ROOT = Path(__file__).resolve().parents[2]
LAB = str(ROOT / "playbooks" / "fabrics" / "lab-leafspine.yml")
POD = str(ROOT / "playbooks" / "fabrics" / "pod-400g.yml")

# --------------------------------------------------------------------------- the walk


def _walk(
    command: click.Command, path: list[str], ctx: click.Context
) -> Iterator[tuple[str, click.Command]]:
    yield " ".join(path), command
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None, f"{' '.join(path)} {name}: does not load"
            yield from _walk(sub, [*path, name], click.Context(sub, parent=ctx, info_name=name))


COMMANDS = dict(_walk(main, ["roce-agent"], click.Context(main, info_name="roce-agent")))
LEAVES = {path: cmd for path, cmd in COMMANDS.items() if not isinstance(cmd, click.Group)}


def _options(kind: type[click.Parameter] = click.Option) -> list[tuple[str, click.Parameter]]:
    return [
        (f"{path} {max(param.opts, key=len)}", param)
        for path, command in LEAVES.items()
        for param in command.params
        if isinstance(param, kind)
    ]


OPTIONS = _options()


def test_the_walk_finds_every_kind_of_command() -> None:
    assert {
        "roce-agent plan",
        "roce-agent diff",
        "roce-agent drift",
        "roce-agent apply",
        "roce-agent exporter",
        "roce-agent locate",
        "roce-agent probe incast",
        "roce-agent probe sniff-pfc",
        "roce-agent nccl",
        "roce-agent twin",
        "roce-agent lab fault add",
    } <= set(COMMANDS)


# --------------------------------------------------------------------------- FABRIC

# The commands that read a fabric file: FABRIC is their first argument (a walk that finds
# a `fabric` parameter anywhere else fails below too).
READS_FABRIC = [
    "roce-agent check",
    "roce-agent plan",
    "roce-agent diff",
    "roce-agent drift",
    "roce-agent apply",
    "roce-agent exporter",
    "roce-agent locate",
    "roce-agent nccl",
    "roce-agent twin",
    "roce-agent probe incast",
    "roce-agent probe pairwise",
    "roce-agent probe storm",
    "roce-agent probe allreduce",
    "roce-agent probe perftest",
    "roce-agent probe nccl",
]
FABRIC_COMMANDS = sorted(
    {*READS_FABRIC, *(p for p, c in LEAVES.items() if any(x.name == "fabric" for x in c.params))}
)


@pytest.mark.parametrize("path", FABRIC_COMMANDS)
def test_a_fabric_is_the_first_argument_with_a_hidden_fabric_alias(path: str) -> None:
    command = LEAVES[path]
    arguments = [p for p in command.params if isinstance(p, click.Argument)]
    # `run PLAYBOOK FABRIC` names what it runs first, as it always has; every other command
    # takes FABRIC first.
    first = 1 if path == "roce-agent run" else 0
    assert len(arguments) > first and arguments[first].name == "fabric", (
        f"{path}: FABRIC is not its argument"
    )
    assert arguments[first].human_readable_name == "FABRIC"
    aliases = [p for p in command.params if isinstance(p, click.Option) and "--fabric" in p.opts]
    assert aliases, f"{path}: --fabric FILE (older scripts) no longer works"
    assert all(getattr(a, "hidden", False) for a in aliases), f"{path}: --fabric is not hidden"


@pytest.mark.parametrize(
    "args",
    [
        ["plan", LAB, "-o", "json"],
        ["plan", "--fabric", LAB, "-o", "json"],  # the alias
        ["plan", LAB, "--fabric", LAB, "-o", "json"],  # the same file twice is fine
    ],
)
def test_fabric_as_argument_or_alias_reads_the_same_file(args: list[str]) -> None:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["fabric"] == "roce-leafspine"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["plan", LAB, "--fabric", POD], "FABRIC given twice"),
        (["plan"], "Missing argument 'FABRIC'"),
        (["exporter"], "Missing argument 'FABRIC'"),
    ],
)
def test_fabric_missing_or_given_twice_exits_2(args: list[str], says: str) -> None:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and says in result.output, result.output


# --------------------------------------------------------------------------- -o/--output

OUTPUTS = [(name, p) for name, p in OPTIONS if "--output" in p.opts]


@pytest.mark.parametrize(("name", "param"), OUTPUTS, ids=[n for n, _ in OUTPUTS])
def test_every_output_option_has_o_and_known_formats(name: str, param: click.Parameter) -> None:
    assert "-o" in param.opts, f"{name}: --output without -o"
    assert isinstance(param.type, click.Choice), f"{name}: the formats are not a choice"
    assert set(param.type.choices) <= {"table", "json", "markdown", "junit", "env", "yaml", "text"}


@pytest.mark.parametrize(("name", "param"), OUTPUTS, ids=[n for n, _ in OUTPUTS])
def test_an_unknown_format_exits_2_naming_the_option(name: str, param: click.Parameter) -> None:
    path = name.rsplit(" ", 1)[0]
    result = CliRunner().invoke(main, [*path.split()[1:], "-o", "nope", LAB])
    assert result.exit_code == 2, result.output
    assert "'-o' / '--output'" in result.output and "'nope'" in result.output, result.output


def test_the_walk_finds_the_report_formats() -> None:
    formats = {name: set(p.type.choices) for name, p in OUTPUTS}  # type: ignore[attr-defined]
    assert {"markdown", "junit"} <= formats["roce-agent drift --output"]
    assert "markdown" in formats["roce-agent diff --output"]
    assert "markdown" in formats["roce-agent locate --output"]
    assert {"markdown", "junit"} <= formats["roce-agent probe perftest --output"]


# --------------------------------------------------------------------------- durations

TIME_WORDS = {"duration", "interval", "timeout", "hold", "deadline", "after", "ms", "delay", "rto"}


def _means_time(param: click.Parameter) -> bool:
    words = {w for opt in param.opts for w in opt.lstrip("-").split("-")}
    return bool(words & TIME_WORDS)


TIME_OPTIONS = [(name, p) for name, p in OPTIONS if _means_time(p)]


def test_the_walk_finds_the_time_options() -> None:
    names = {name for name, _ in TIME_OPTIONS}
    assert {
        "roce-agent exporter --interval",
        "roce-agent exporter --timeout",
        "roce-agent exporter --device-interval",
        "roce-agent apply --confirm-timeout",
        "roce-agent apply --hold",
        "roce-agent apply --pending-timeout",
        "roce-agent locate --duration",
        "roce-agent probe allreduce --deadline",
        "roce-agent probe sniff-pfc --storm-after",
        "roce-agent lab fault add --delay",
    } <= names


@pytest.mark.parametrize(("name", "param"), TIME_OPTIONS, ids=[n for n, _ in TIME_OPTIONS])
def test_every_time_option_takes_a_unit(name: str, param: click.Parameter) -> None:
    if isinstance(param.type, Duration):
        return
    # NAME=DURATION pairs are strings the command parses with named_durations().
    assert "DURATION" in (param.metavar or ""), (
        f"{name}: a time option of type {param.type.name}; use common.conventions.duration()"
    )


def _prefix(path: str) -> list[str]:
    return path.split()[1:]


# Options that need another value before them to be reached (none today: click converts
# options in the order they are given, so the bad one goes first).
@pytest.mark.parametrize(("name", "param"), TIME_OPTIONS, ids=[n for n, _ in TIME_OPTIONS])
def test_a_bare_number_exits_2_naming_the_option(name: str, param: click.Parameter) -> None:
    path, option = name.rsplit(" ", 1)
    value = "leaf1=5" if "DURATION" in (param.metavar or "") else "5"
    result = CliRunner().invoke(main, [*_prefix(path), option, value, LAB])
    assert result.exit_code == 2, result.output
    assert option in result.output, result.output
    assert "unit" in result.output, result.output
    assert "Traceback" not in result.output


UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


@given(st.integers(min_value=1, max_value=10**6), st.sampled_from(sorted(UNITS)))
def test_a_number_with_its_unit_is_that_many_units(number: int, unit: str) -> None:
    kind = duration(1e9)
    assert math.isclose(kind.parse(f"{number}{unit}"), number * UNITS[unit])


@given(st.one_of(st.integers(min_value=0), st.floats(allow_nan=True, allow_infinity=True)))
def test_a_bare_number_is_never_a_duration(number: float) -> None:
    with pytest.raises(ValueError, match="with its unit"):
        duration(1e9).parse(str(number))


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["leaf1=5s"], {"leaf1": 5.0}),
        (["leaf1=500ms", "spine1=1s"], {"leaf1": 0.5, "spine1": 1.0}),
        (["leaf1=5"], "with its unit"),
        (["leaf1"], "NAME=DURATION"),
        (["=5s"], "NAME=DURATION"),
        (["leaf1=0s"], "more than 0"),
    ],
)
def test_named_durations(values: list[str], expected: dict[str, float] | str) -> None:
    if isinstance(expected, dict):
        assert named_durations(values, "'--device-interval'", duration(60)) == expected
        return
    with pytest.raises(click.BadParameter, match=expected) as caught:
        named_durations(values, "'--device-interval'", duration(60))
    assert caught.value.param_hint == "'--device-interval'"


@pytest.mark.parametrize(
    ("value", "ok"), [("4s", False), ("5s", True), ("3600s", True), ("3601s", False)]
)
def test_the_confirm_timeout_is_bounded_both_ways(value: str, ok: bool) -> None:
    result = CliRunner().invoke(main, ["apply", LAB, "--confirm-timeout", value, "--device", "x*"])
    # a valid timeout reaches the selection (which refuses 'x*'), a bad one stops before
    assert result.exit_code == 2
    assert ("'--confirm-timeout'" in result.output) != ok, result.output


def test_fault_delay_reaches_the_fault_in_milliseconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lab import faults

    seen: dict[str, Any] = {}

    def add(self: Any, kind: str, target: str, **params: Any) -> Any:
        seen.update(params)
        raise faults.FaultError("stop here")

    monkeypatch.setattr(faults.LabFaults, "add", add)
    monkeypatch.setattr(faults.LabFaults, "__init__", lambda self, state_dir: None)
    result = CliRunner().invoke(
        main,
        ["lab", "fault", "add", "latency", "leaf1:eth1>spine1", "--delay", "2.5ms",
         "--lab", "x", "--state-dir", str(tmp_path)],
    )  # fmt: skip
    assert result.exit_code == 2 and "stop here" in result.output, result.output
    assert math.isclose(seen["ms"], 2.5)


# --------------------------------------------------------------------------- selection

SELECTING = ["plan", "diff", "drift", "apply"]


@pytest.mark.parametrize("command", SELECTING)
def test_selection_options_are_there(command: str) -> None:
    params = {p.name: p for p in LEAVES[f"roce-agent {command}"].params}
    assert params["devices"].multiple and params["roles"].multiple  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--device", "leaf*"], ["leaf1", "leaf2"]),
        (["--device", "spine[12]", "--device", "h1"], ["spine1", "spine2", "h1"]),
        (["--role", "host"], ["h1", "h2", "h3", "h4"]),
        (["--device", "*1", "--role", "leaf"], ["leaf1"]),
        (["--role", "spine", "--role", "leaf"], ["spine1", "spine2", "leaf1", "leaf2"]),
    ],
)
def test_plan_selects_by_glob_and_role(args: list[str], names: list[str]) -> None:
    result = CliRunner().invoke(main, ["plan", LAB, "-o", "json", *args])
    assert result.exit_code == 0, result.output
    assert [d["name"] for d in json.loads(result.stdout)["devices"]] == names


@pytest.mark.parametrize("command", SELECTING)
@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--device", "leaf9*"], "'--device'"),
        (["--role", "border"], "'--role'"),
        (["--device", "spine*", "--role", "leaf"], "'--role'"),
    ],
)
def test_a_selection_of_nothing_exits_2_naming_the_option(
    command: str, args: list[str], option: str
) -> None:
    extra = ["--yes"] if command == "apply" else []
    result = CliRunner().invoke(main, [command, LAB, *args, *extra])
    assert result.exit_code == 2, result.output
    assert option in result.output, result.output


def test_hosts_alone_are_not_switches_for_diff() -> None:
    result = CliRunner().invoke(main, ["diff", LAB, "--role", "host"])
    assert result.exit_code == 2 and "only hosts selected" in result.output, result.output


def test_select_devices_keeps_fabric_order() -> None:
    devices = [("b1", "leaf"), ("a1", "leaf"), ("s1", "spine")]
    assert select_devices(devices, ["s*", "*1"]) == ["b1", "a1", "s1"]
    assert select_devices(devices, [], ["spine"]) == ["s1"]


# --------------------------------------------------------------------------- examples


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_every_help_has_examples(path: str) -> None:
    command = COMMANDS[path]
    assert "Examples:" in (command.help or ""), f"{path}: no Examples: in its --help"


def _examples(command: click.Command) -> list[str]:
    text = (command.help or "").split("Examples:", 1)
    return [line.strip() for line in text[1].splitlines() if line.strip()] if len(text) > 1 else []


EXAMPLES = [(path, line) for path, cmd in sorted(COMMANDS.items()) for line in _examples(cmd)]


@pytest.mark.parametrize(("path", "line"), EXAMPLES)
def test_every_example_parses(path: str, line: str) -> None:
    """The example names real commands and options with valid values (nothing is run)."""
    words = shlex.split(line)
    cut = [i for i, w in enumerate(words) if w in ("|", ">", "&&", ";", "2>")]
    words = words[: cut[0]] if cut else words
    assert words[0] == "roce-agent", line
    command: click.Command = main
    ctx = click.Context(main, info_name="roce-agent")
    rest = words[1:]
    while isinstance(command, click.Group) and rest and not rest[0].startswith("-"):
        sub = command.get_command(ctx, rest[0])
        assert sub is not None, f"{line}: no command {rest[0]!r}"
        ctx = click.Context(sub, parent=ctx, info_name=rest[0])
        command, rest = sub, rest[1:]
    with command.make_context(words[-1], rest, parent=ctx.parent) as parsed:
        assert parsed.params is not None


# --------------------------------------------------------------------------- literal text


def _line_100_col_68(tmp_path: Path) -> Path:
    """A fabric whose only error (an MTU out of range) is at line 100, column 68."""
    head = (
        "name: t\nprofile: nvidia-default\n"
        "defaults: {username: admin, credentials: {password_env: X}}\ndevices:\n"
    )
    start = "- {ports: [{"
    value = "mtu: 99999"
    pad = 67 - len(start) - len("mtu: ")
    line = (
        start + " " * pad + value + ", name: Ethernet1, speed: 400G, cable_m: 3}], "
        "name: leaf1, platform: arista_eos, role: leaf, host: h}\n"
    )
    comments = "".join(f"# {i}\n" for i in range(100 - 1 - head.count("\n")))
    path = tmp_path / "m3-peer.yml"
    path.write_text(comments + head + line)
    assert (comments + head + line).splitlines()[99].index("99999") == 67
    return path


@pytest.mark.parametrize("command", ["check", "plan", "diff", "drift", "apply", "nccl"])
def test_a_location_at_line_100_prints_literally(tmp_path: Path, command: str) -> None:
    fabric = _line_100_col_68(tmp_path)
    result = CliRunner().invoke(main, [command, str(fabric)])
    assert result.exit_code == 2
    assert f"error: {fabric}:100:68: devices[0].ports[0].mtu:" in result.stderr, result.stderr
    assert "\N{HUNDRED POINTS SYMBOL}" not in result.stderr


def test_the_default_rich_console_would_have_broken_it() -> None:
    """The test above can fail: rich's own defaults turn ``:100:`` into an emoji."""
    plain = Console(file=None, width=100, force_terminal=False, record=True)
    with plain.capture() as captured:
        plain.print("m3-peer.yml:100:68: [bold]x:100:")
    assert "\N{HUNDRED POINTS SYMBOL}" in captured.get()
    assert "[bold]" not in captured.get()


@pytest.mark.parametrize(
    "text",
    ["[bold]x:100:", "file.yml:100:68: bad", "[red]leaf1[/red] :smile: :thumbs_up:", "a\\[b]"],
)
def test_console_and_tables_print_user_text_literally(text: str) -> None:
    out = console(width=100)
    with out.capture() as captured:
        out.print(text)
        listing = table(text, "device", "description")
        listing.add_row("leaf1", text)
        out.print(listing)
    printed = captured.get()
    assert printed.count(text) == 3, printed  # the line, the title, the cell


def _result(**fields: Any) -> DeviceResult:
    base: dict[str, Any] = {"device": "leaf1", "platform": "arista_eos", "result": "changes"}
    return DeviceResult(**{**base, **fields})


def test_diff_tables_print_descriptions_literally(capsys: pytest.CaptureFixture[str]) -> None:
    described = Difference("leaf1", "Ethernet1/1", "description", "[bold]x:100:", "m3:100:68:")
    results = [_result(differences=[described], lines=["description [bold]x:100:"])]
    change._emit(results, "table", "diff", show_lines=True)
    out = capsys.readouterr().out
    assert out.count("[bold]x:100:") == 2 and "m3:100:68:" in out, out


# --------------------------------------------------------------------------- tables fold

LONG = "Ethernet1/1/1-a-port-name-longer-than-any-column"


def test_tables_fold_at_100_columns_never_cut() -> None:
    differences = [
        Difference(f"leaf{i}-{LONG}", LONG, f"ecn.queues[3].{LONG}", LONG * 2, LONG)
        for i in range(3)
    ]
    results = [_result(device=f"leaf{i}-{LONG}", differences=differences[i : i + 1])
               for i in range(3)]  # fmt: skip
    for render in (change._differences_table, change._summary_table):
        out = console(width=100)
        with out.capture() as captured:
            out.print(render(results, "diff"))
        printed = captured.get()
        assert "…" not in printed
        assert all(len(line) <= 100 for line in printed.splitlines())
        # the first column (device), its folded pieces joined again: every name whole
        rows = [line.split("│") for line in printed.splitlines() if line.startswith("│")]
        first = "".join(row[1].strip() for row in rows)
        for i in range(3):
            assert f"leaf{i}-{LONG}" in first, printed


# --------------------------------------------------------------------------- report formats


def test_drift_junit_is_one_case_per_device() -> None:
    results = [
        _result(device="leaf1", differences=[Difference("leaf1", "Et1", "pfc", "3", "none")]),
        _result(device="leaf2", result="no-change"),
        _result(device="spine1", result="unreachable", error="ssh: timed out <&>"),
    ]
    root = ElementTree.fromstring(change.render_junit(results, "drift").split("?>", 1)[1])
    suite = root.find("testsuite")  # the one JUnit shape: <testsuites> of <testsuite>
    assert root.tag == "testsuites" and suite is not None
    assert suite.get("tests") == "3" and suite.get("failures") == "1"
    assert suite.get("errors") == "1"
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert list(cases) == ["leaf1", "leaf2", "spine1"]
    failure = cases["leaf1"].find("failure")
    assert failure is not None and "Et1 pfc: Expected: 3 Actual: none" in (failure.text or "")
    assert cases["leaf2"].find("failure") is None and cases["leaf2"].find("error") is None
    error = cases["spine1"].find("error")
    assert error is not None and "<&>" in (error.text or "")


def test_markdown_escapes_cells() -> None:
    results = [_result(differences=[Difference("leaf1", "Et1", "description", "a|b", "c")],
                       lines=["description a|b"])]  # fmt: skip
    text = change.render_markdown(results, "diff", show_lines=True)
    assert "`a\\|b`" in text
    assert change._cell("x`y") == "`` x`y ``" and change._cell("") == ""
    assert "```\ndescription a|b\n```" in text  # the lines as sent, in a code block
    rows = [line for line in text.splitlines() if line.startswith("| `leaf1`")]
    assert len(rows) == 2 and all(row.count(" | ") == 4 for row in rows)


def test_lab_status_prints_topology_names_literally(capsys: pytest.CaptureFixture[str]) -> None:
    from lab import cli as lab_cli

    port = {"ifname": "eth1", "fabric_port": "Ethernet1", "ipv4": "198.18.0.1/31",
            "mac": "02:00:00:00:00:01", "peer": "[red]h1[/red]:100:"}  # fmt: skip
    switch = {"role": "leaf", "netns": "lab-leaf1", "netns_present": False, "kind": "lab-switch",
              "mgmt_host": "127.0.0.1", "mgmt_port": 20001, "mgmt_state": "up", "alive": True,
              "pid": 7, "vswitch": "ok", "interfaces": [port]}  # fmt: skip
    host = {"role": "host", "netns": "lab-h1", "netns_present": True, "kind": "host",
            "gateway": "198.18.0.0", "interfaces": []}  # fmt: skip
    lab_cli._print_status({
        "name": "pod:100:", "phase": "up", "healthy": False,
        "nodes": {"[bold]leaf1": switch, "h1": host},
        "credentials": {"username": "admin", "password": "admin"}, "password_env": "PW",
        "state_dir": "/run/x", "fabric_file": "/run/x/fabric.yml",
    })  # fmt: skip
    out = capsys.readouterr().out
    for text in ("lab pod:100:", "NOT healthy", "[bold]leaf1", "(missing)", "alive",
                 "[red]h1[/red]:100:"):  # fmt: skip
        assert text in out, out


def test_lab_counters_print_literally(capsys: pytest.CaptureFixture[str]) -> None:
    from lab import cli as lab_cli

    queue = {"tail_drops": 2, "ecn_marked": 3, "watermark_bytes": 1500}
    port = {"rx_packets": 10, "tx_packets": 9, "drops": {"ttl": 1}, "queues": {"3": queue},
            "pfc": {"tx_xoff": [0, 0, 0, 4], "rx_xoff": 5}}  # fmt: skip
    lab_cli._print_counters("[bold]leaf1:100:", {"uptime_s": 7, "ports": {"eth1": port}})
    out = capsys.readouterr().out
    assert "[bold]leaf1:100: counters (uptime 7 s)" in out, out
    assert "1500" in out and "eth1" in out
