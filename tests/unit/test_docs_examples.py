"""Docs that run (issue #41): every ``roce-agent`` command line of README.md and docs/*.md, and
every ``--help``'s ``Examples:``, is executed here against the shipped fabrics -- or, when it
needs what a unit test has not (a switch, a lab, root, a cluster, minutes of search), parsed
against the command (the command and every option exist, the values are valid) and listed as
skipped with the reason.  docs/contributing-docs.md says how an example is written and marked.

How a line is read:

* console blocks: lines after ``$ `` (or root's ``# ``), ``\\`` continuations joined; blocks
  without a language or ``sh``: lines that start with ``roce-agent``; a trailing ``# …`` is a
  comment;
* ``a; b`` and ``a && b`` run both; ``| jq …`` and ``> file`` take the command's stdout (the
  command is what is checked); ``sudo`` and ``NAME=value`` prefixes are the shell's;
* ``FABRIC`` and ``fabric.yml`` stand for a fabric: the block's ``fabric=`` (default
  :data:`DEFAULT_FABRIC`); a shipped fabric's bare name (``pod-400g.yml``, as install.md copies
  it) is that fabric; a path of the repository (``playbooks/fabrics/…``) is itself;
* the exit code is 0 unless the block says otherwise: ``$ echo $?`` after the command (or
  ``; echo $?``) and the number printed, or ``exit=N`` in the marker;
* a synopsis (``[--option …]``, ``a|b``, ``…``, placeholders such as ``TARGET``) is checked
  option by option, never run.

The marker is an HTML comment on the line before the block (invisible on the site):
``<!-- examples: needs=device -->`` (every line), ``needs=device:diff,apply`` (the lines of
those commands), ``needs=lab``, ``fabric=pod-mixed.yml``, ``exit=1``, ``synopsis``.  What a
command needs is also known here (:data:`NEEDS`); a page of docs/ must say it in its marker,
so a reader of the source sees it and the page cannot forget it.

A run is offline: every connection other than loopback and a local socket, and every name
lookup, is refused and fails the example (nothing reaches a network).
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from agent.app.cli import main

ROOT = Path(__file__).resolve().parents[2]
FABRICS = ROOT / "playbooks" / "fabrics"
SHIPPED = {path.name: path for path in sorted(FABRICS.glob("*.yml"))}
DEFAULT_FABRIC = "pod-400g.yml"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# Repository folders an example may name by a relative path (it runs in a scratch folder).
REPO_DIRS = ("playbooks", "tests", "containerlab", "deploy", "docs", "exporters")

# What each command needs beyond this machine, by its words (the longest match wins); a
# command not here runs offline. The reasons are what the skipped examples say.
NEEDS: dict[str, str] = {
    "diff": "device",
    "apply": "device",
    "drift": "device",
    "validate": "device",
    "locate": "device",
    "discover": "device",
    "nccl": "device",  # each host's GID table, over SSH
    "run": "device",
    "exporter": "device",  # polls the switches until stopped
    "serve": "device",  # the daemon
    "probe": "device",  # probes run on the fabric's hosts
    "probe analyze": "",  # a capture file: offline
    "probe send": "root",
    "probe receive": "root",
    "probe sniff-pfc": "root",
    "lab": "lab",
    "tune": "minutes",
}
WHY = {
    "device": "needs a device: the fabric's switches or hosts",
    "lab": "needs a lab: root and network namespaces (the lab suite runs the lab)",
    "root": "needs root and a network interface",
    "cluster": "needs a Dask cluster",
    "minutes": "a search of minutes: ROCE_DOCS_SLOW=1 runs it",
    "capture": "needs a capture file of yours",
}
# Substitutions for files an example names that a scratch folder has not.
FILES = {
    "capture.pcap": ROOT / "tests/data/bad/captures/many-qps.pcap",
    "capture.pcapng": ROOT / "tests/data/bad/captures/mixed-linktypes.pcapng",
}
SLOW = os.environ.get("ROCE_DOCS_SLOW") == "1"


@dataclass(frozen=True)
class Example:
    """One command line as documented, where, and what the documentation says of it."""

    where: str  # FILE:LINE, or "roce-agent twin --help"
    words: tuple[str, ...]  # the roce-agent command's words (program and env prefix dropped)
    text: str  # the line as written
    fabric: str = DEFAULT_FABRIC
    exit: int = 0
    needs: str = ""  # what the marker says ("" when it says nothing)
    synopsis: bool = False
    strict: bool = False  # docs/: the marker must say what the command needs
    env: tuple[tuple[str, str], ...] = field(default=())

    @property
    def command(self) -> tuple[str, ...]:
        """The command's path below ``roce-agent`` (``("probe", "incast")``)."""
        path: list[str] = []
        group: click.Command = main
        ctx = click.Context(main, info_name="roce-agent")
        for word in _without_root_options(self.words):
            if not isinstance(group, click.Group) or word.startswith("-"):
                break
            sub = group.get_command(ctx, word)
            if sub is None:
                break
            path.append(word)
            ctx = click.Context(sub, parent=ctx, info_name=word)
            group = sub
        return tuple(path)

    def required(self) -> str:
        """What the command needs, by :data:`NEEDS` (``--executor``: a cluster)."""
        path = self.command
        for size in range(len(path), 0, -1):
            need = NEEDS.get(" ".join(path[:size]))
            if need is not None:
                if need == "minutes" and any(w.startswith("--executor") for w in self.words):
                    return "cluster"
                return need
        return ""


# ------------------------------------------------------------------------------ reading


_MARKER = re.compile(r"<!--\s*examples:(?P<body>.*?)-->")
_COMMAND = re.compile(r"^(?:sudo |[A-Z_]+=\S* )*(?:\S*/)?roce-agent\b")
_FENCE = re.compile(r"^```(?P<lang>\w*)\s*$")
_SYNOPSIS = re.compile(r"\[-|\]|\.\.\.|…|<\w+>|\b(?!FABRIC\b)[A-Z][A-Z_]{2,}\b|\w\|\w")


def _marker(lines: list[str], fence: int) -> dict[str, str]:
    """The ``<!-- examples: … -->`` on the line before the fence at ``fence`` (0-based)."""
    before = next((lines[i] for i in range(fence - 1, -1, -1) if lines[i].strip()), "")
    found = _MARKER.search(before)
    if not found:
        return {}
    spec: dict[str, str] = {}
    for item in found["body"].split():
        key, _, value = item.partition("=")
        spec[key] = f"{spec[key]} {value}" if key in spec else value  # needs= repeats
    return spec


def _commands(block: list[tuple[int, str]], lang: str) -> Iterator[tuple[int, str, int]]:
    """(line number, command text, documented exit) for each command of a block."""
    pending: tuple[int, str] | None = None
    out: list[tuple[int, str]] = []
    exits: dict[int, int] = {}
    for number, raw in block:
        line = raw.rstrip()
        if pending is not None:
            line = pending[1] + " " + line.strip()
            number = pending[0]
            pending = None
        elif lang == "console":
            prompt = re.match(r"^[$#] (.*)$", line)
            if prompt is None:
                if out and re.fullmatch(r"\s*\d+\s*", line) and out[-1][1] == "echo $?":
                    exits[len(out) - 2] = int(line)
                continue
            line = prompt.group(1)
        elif not _COMMAND.match(line.strip()):
            continue  # a block without prompts: only roce-agent lines are commands
        if line.endswith("\\"):
            pending = (number, line[:-1].rstrip())
            continue
        out.append((number, line.strip()))
    for index, (number, line) in enumerate(out):
        if line == "echo $?":
            continue
        code = exits.get(index, 0)
        if line.endswith("; echo $?"):
            line = line.removesuffix("; echo $?")
        yield number, line, code


def _program(words: list[str]) -> tuple[list[str], list[tuple[str, str]]] | None:
    """The roce-agent words and the env prefix of a shell command, None for another program."""
    env: list[tuple[str, str]] = []
    while words and (words[0] == "sudo" or re.fullmatch(r"[A-Z_]+=\S*", words[0])):
        if words[0] != "sudo":
            name, _, value = words[0].partition("=")
            env.append((name, value))
        words = words[1:]
    if not words or not (words[0] == "roce-agent" or words[0].endswith("/roce-agent")):
        return None
    return words[1:], env


def _segments(text: str) -> list[tuple[str, list[str]]]:
    """The commands of a shell line (``a; b``, ``a && b``) as (text, words), each cut at a
    pipe or a redirection, comments and ``$(…)`` removed."""
    text = re.sub(r"\$\([^)]*\)", "fabric.yml", text)
    text = re.sub(r"<(\w+)>", r"\1", text)  # a <placeholder> of a synopsis
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|>")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    commands: list[list[str]] = [[]]
    for token in lexer:
        if token in (";", "&&"):
            commands.append([])
        else:
            commands[-1].append(token)
    out = []
    for words in commands:
        cut = next((i for i, w in enumerate(words) if w[0] in "|>"), len(words))
        kept = words[:cut]
        if cut < len(words) and kept and kept[-1] == "2":  # 2> FILE
            kept = kept[:-1]
        if kept and kept != ["echo", "$?"]:
            out.append((shlex.join(kept), kept))
    return out


def page_examples(page: Path) -> Iterator[Example]:
    lines = page.read_text().splitlines()
    strict = page.parent.name == "docs" or any(_MARKER.search(line) for line in lines)
    name = page.relative_to(ROOT).as_posix()
    fence: tuple[int, str] | None = None
    block: list[tuple[int, str]] = []
    for i, line in enumerate(lines):
        opened = _FENCE.match(line)
        if fence is None and opened is not None:
            fence, block = (i, opened["lang"]), []
        elif fence is not None and line.startswith("```"):
            yield from _block_examples(name, lines, fence, block, strict)
            fence = None
        elif fence is not None:
            block.append((i + 1, line))


def _block_examples(
    name: str, lines: list[str], fence: tuple[int, str], block: list[tuple[int, str]],
    strict: bool,
) -> Iterator[Example]:  # fmt: skip
    start, lang = fence
    if lang not in ("console", "", "sh", "shell", "bash"):
        return
    spec = _marker(lines, start)
    if any(line.startswith("$ ") for _, line in block):
        lang = "console"  # a block with prompts: its other lines are output
    for number, text, code in _commands(block, lang):
        try:
            segments = _segments(text)
        except ValueError as exc:
            raise ValueError(f"{name}:{number}: {exc}: {text}") from None
        for part, shell_words in segments:
            program = _program(shell_words)
            if program is None:
                continue
            words, env = program
            yield Example(
                f"{name}:{number}", tuple(words), part, spec.get("fabric", DEFAULT_FABRIC),
                int(spec.get("exit", code)), _needs(spec, words), "synopsis" in spec
                or bool(_SYNOPSIS.search(text)), strict, tuple(env),
            )  # fmt: skip


def _needs(spec: dict[str, str], words: list[str]) -> str:
    """What the marker says this line needs: ``needs=KIND`` (every line of the block) or
    ``needs=KIND:cmd,cmd`` (the lines of those commands; ``probe.send`` for two words);
    ``needs=`` may repeat."""
    named = [w for w in _without_root_options(words) if not w.startswith("-")][:2]
    for value in spec.get("needs", "").split():
        kind, _, commands = value.partition(":")
        scope = [c.replace(".", " ") for c in commands.split(",")]
        if not commands or any(" ".join(named[:n]) in scope for n in (1, 2)):
            return kind
    return ""


ROOT_FLAGS = ("--trust-on-first-use", "--debug", "--insecure-permissions")


def _without_root_options(words: tuple[str, ...] | list[str]) -> list[str]:
    """The words without the root group's flags (a synopsis's ``[--flag]`` too)."""
    return [w for w in words if w.strip("[]") not in ROOT_FLAGS]


def _walk(command: click.Command, path: list[str], ctx: click.Context) -> Iterator[
    tuple[str, click.Command]
]:  # fmt: skip
    yield " ".join(path), command
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None
            yield from _walk(sub, [*path, name], click.Context(sub, parent=ctx, info_name=name))


def help_examples() -> Iterator[Example]:
    for path, command in _walk(main, ["roce-agent"], click.Context(main, info_name="roce-agent")):
        text = (command.help or "").split("Examples:", 1)
        for line in text[1].splitlines() if len(text) > 1 else []:
            for part, shell_words in _segments(line.strip()):
                program = _program(shell_words)
                if program is not None:
                    yield Example(f"{path} --help", tuple(program[0]), part)


EXAMPLES = [*help_examples(), *(e for page in PAGES for e in page_examples(page))]


def _id(example: Example) -> str:
    return f"{example.where}: {example.text}"


# ------------------------------------------------------------------------------ checking


def _parse(example: Example, words: list[str]) -> None:
    """The command and every option exist with valid values (click parses them; nothing runs)."""
    command: click.Command = main
    ctx = click.Context(main, info_name="roce-agent")
    rest = _without_root_options(words)
    if rest[:1] in (["--version"], ["--help"], ["-h"]):
        return
    while isinstance(command, click.Group) and rest and not rest[0].startswith("-"):
        sub = command.get_command(ctx, rest[0])
        assert sub is not None, f"{example.where}: no command {rest[0]!r} in {example.text!r}"
        ctx = click.Context(sub, parent=ctx, info_name=rest[0])
        command, rest = sub, rest[1:]
    try:
        with command.make_context(ctx.info_name, rest, parent=ctx.parent):
            pass
    except click.ClickException as exc:
        pytest.fail(f"{example.where}: {example.text!r} does not parse: {exc.format_message()}")


def _check_synopsis(example: Example) -> None:
    """Every option a synopsis names exists on its command, and each ``a|b`` choice too."""
    path = example.command
    command: click.Command = main
    ctx = click.Context(main, info_name="roce-agent")
    for word in path:
        assert isinstance(command, click.Group)
        sub = command.get_command(ctx, word)
        assert sub is not None
        ctx, command = click.Context(sub, parent=ctx, info_name=word), sub
    assert path, f"{example.where}: no command in {example.text!r}"
    options = {o: p for p in [*command.params, *main.params] for o in p.opts}
    for match in re.finditer(r"(?<![\w-])(--?[a-zA-Z][\w-]*)(?:[ =]([\w|]+\|[\w|]+))?",
                             example.text):  # fmt: skip
        name, choices = match.group(1), match.group(2)
        if name in ("-o",) and name not in options:
            continue
        assert name in options, f"{example.where}: {' '.join(path)} has no option {name}"
        param_type = options[name].type
        if choices and isinstance(param_type, click.Choice):
            unknown = set(choices.split("|")) - set(param_type.choices)
            assert not unknown, f"{example.where}: {name} has no choice {sorted(unknown)}"


def _scratch(tmp: Path, example: Example) -> dict[str, Path]:
    """A scratch folder to run in: the repository's folders an example may name, the shipped
    fabrics by their bare names, ``fabric.yml`` as the block's fabric."""
    for name in REPO_DIRS:
        (tmp / name).symlink_to(ROOT / name)
    for name, path in SHIPPED.items():
        (tmp / name).symlink_to(path)
    fabric = SHIPPED.get(example.fabric) or ROOT / example.fabric
    (tmp / "fabric.yml").symlink_to(fabric)
    for name, path in FILES.items():
        (tmp / name).symlink_to(path)
    return {"fabric": fabric}


def _words(example: Example) -> list[str]:
    return ["fabric.yml" if w == "FABRIC" else w for w in example.words]


class _Offline:
    """Refuses every connection and lookup that would leave this machine, and records it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.tried: list[str] = []
        connect = socket.socket.connect
        lookup = socket.getaddrinfo

        def guarded_connect(sock: socket.socket, address: Any) -> Any:
            if sock.family == socket.AF_UNIX or _loopback(address):
                return connect(sock, address)
            self.tried.append(f"connect {address}")
            raise OSError(f"docs example: no network in a unit test ({address})")

        def guarded_lookup(host: Any, *args: Any, **kwargs: Any) -> Any:
            if host is None or _loopback((host,)) or _literal(host):
                return lookup(host, *args, **kwargs)
            self.tried.append(f"lookup {host}")
            raise socket.gaierror(f"docs example: no name lookup in a unit test ({host})")

        monkeypatch.setattr(socket.socket, "connect", guarded_connect)
        monkeypatch.setattr(socket.socket, "connect_ex", guarded_connect)
        monkeypatch.setattr(socket, "getaddrinfo", guarded_lookup)


def _loopback(address: Any) -> bool:
    host = str(address[0]) if isinstance(address, tuple) and address else str(address)
    return host in ("localhost", "::1") or host.startswith("127.")


def _literal(host: Any) -> bool:
    try:
        socket.inet_pton(socket.AF_INET6 if ":" in str(host) else socket.AF_INET, str(host))
    except (OSError, ValueError):
        return False
    return True


def _why_skipped(example: Example) -> str | None:
    need = example.needs or example.required()
    if need == "minutes" and SLOW:
        return None
    return WHY.get(need, f"needs {need}") if need else None


# A search of minutes (ROCE_DOCS_SLOW=1) gets more than the suite's 300 s per test: a default
# tune of pod-400g took 150-300 s on the 2-core machine at load 9, compiled.
PARAMS = [
    pytest.param(e, marks=pytest.mark.timeout(1800)) if e.required() == "minutes" else e
    for e in EXAMPLES
]


@pytest.mark.parametrize("example", PARAMS, ids=_id)
def test_example(example: Example, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Offline examples run and exit as documented; the others parse and say why not run."""
    required = example.required()
    if example.strict and required and required != "minutes":
        # a lab stands in for a device: any need said is the page telling its reader
        assert example.needs, (
            f"{example.where}: `roce-agent {' '.join(example.command)}` {WHY[required]}: "
            f"mark its block <!-- examples: needs={required} --> (docs/contributing-docs.md)"
        )
    if example.synopsis:
        _check_synopsis(example)
        return
    if dict(example.env).get(COMPLETE, "").endswith("_source"):
        _check_completion_script(example)
        return
    words = _words(example)
    _parse(example, words)
    why = _why_skipped(example)
    if why is not None:
        pytest.skip(why)
    _run(example, words, tmp_path, monkeypatch)


COMPLETE = "_ROCE_AGENT_COMPLETE"  # click's completion variable for the program roce-agent


def _check_completion_script(example: Example) -> None:
    """``_ROCE_AGENT_COMPLETE=fish_source roce-agent`` prints the shell's completion script
    (click answers before any command is parsed)."""
    shell = dict(example.env)[COMPLETE].removesuffix("_source")
    result = CliRunner().invoke(main, [], prog_name="roce-agent", env=dict(example.env))
    assert result.exit_code == 0, f"{example.where}: {result.output[-2000:]}"
    assert "roce-agent" in result.output and COMPLETE in result.output, (
        f"{example.where}: no {shell} completion script: {result.output[:500]!r}"
    )


def _run(example: Example, words: list[str], tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _scratch(tmp, example)
    monkeypatch.chdir(tmp)
    monkeypatch.setenv("ROCE_AGENT_STATE_DIR", str(tmp / "state"))
    for name, value in example.env:
        monkeypatch.setenv(name, value)
    offline = _Offline(monkeypatch)
    result = CliRunner().invoke(main, words)
    said = f"{example.where}: {example.text!r}"
    assert not offline.tried, f"{said} tried the network: {offline.tried}"
    crash = result.exception if not isinstance(result.exception, SystemExit) else None
    assert result.exit_code == example.exit, (
        f"{said} exited {result.exit_code}, documented {example.exit}\n"
        f"{result.output[-3000:]}{''.join(traceback.format_exception(crash)) if crash else ''}"
    )


# ------------------------------------------------------------------------------ the reading


def test_the_reading_finds_every_kind_of_example() -> None:
    found = {(e.where.split(":")[0], e.words[:1]) for e in EXAMPLES}
    assert ("README.md", ("check",)) in found and ("docs/install.md", ("check",)) in found
    assert any(e.where == "roce-agent twin --help" for e in EXAMPLES)
    bad = next(e for e in EXAMPLES if e.where.startswith("README.md") and "bad/" in e.text)
    assert bad.exit == 2  # `$ echo $?` then 2
    assert any(e.synopsis for e in EXAMPLES)
    assert len(EXAMPLES) > 150


@pytest.mark.parametrize(
    ("text", "synopsis"),
    [
        ("roce-agent plan fabric.yml --role host", False),
        ("roce-agent diff FABRIC [--device PATTERN ...]", True),
        ("roce-agent tune FABRIC --objective collective|queue", True),
        ("roce-agent discover TARGET... [--platform P]", True),
        ("roce-agent locate FABRIC --min-loss 1%", False),
    ],
)
def test_a_synopsis_is_told_from_an_example(text: str, synopsis: bool) -> None:
    assert bool(_SYNOPSIS.search(text)) == synopsis


def test_a_marker_scopes_to_commands() -> None:
    assert _needs({"needs": "device:diff,apply"}, ["diff", "fabric.yml"]) == "device"
    assert _needs({"needs": "device:diff,apply"}, ["check", "fabric.yml"]) == ""
    assert _needs({"needs": "lab"}, ["lab", "up"]) == "lab"
    assert _needs({"needs": "device:probe.incast"}, ["probe", "incast", "f"]) == "device"
    assert _needs({"needs": "device:probe.incast root:probe.send"}, ["probe", "send"]) == "root"
    assert _needs({"needs": "device:probe.incast"}, ["probe", "analyze", "c.pcap"]) == ""


def test_the_guard_refuses_the_network(monkeypatch: pytest.MonkeyPatch) -> None:
    offline = _Offline(monkeypatch)
    with pytest.raises(OSError), socket.create_connection(("192.0.2.1", 22), timeout=1):
        pass
    with pytest.raises(socket.gaierror):
        socket.getaddrinfo("leaf1.mgmt.example", 22)
    assert offline.tried == ["connect ('192.0.2.1', 22)", "lookup leaf1.mgmt.example"]


def test_common_resources_examples_run() -> None:
    """install.md's ``python -m common.resources`` lines: every kind they name exists."""
    text = (ROOT / "docs" / "install.md").read_text()
    kinds = set(re.findall(r"-m common\.resources ([a-z-]+)", text)) | {""}
    for kind in sorted(kinds):
        done = subprocess.run(
            [sys.executable, "-m", "common.resources", *([kind] if kind else [])],
            cwd=ROOT, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, (kind, done.stderr)
        assert done.stdout.strip()


@pytest.mark.parametrize(("command", "page"), [("exporter", "reference/metrics/"),
                                               ("twin", "collectives/")])  # fmt: skip
def test_help_points_at_the_docs_site_not_the_repository(command: str, page: str) -> None:
    """An installed tool has no repository: a --help names the docs site (its default
    address, exporters.alerts.DEFAULT_DOCS_URL, as the alerts' runbook links do)."""
    from exporters.alerts import DEFAULT_DOCS_URL

    text = CliRunner().invoke(main, [command, "--help"]).stdout
    assert DEFAULT_DOCS_URL + page in text.replace("\n", "").replace(" ", "")
    assert not re.search(r"(?<![\w/])(?:docs|exporters)/[\w/-]+\.md", text), text
    assert (ROOT / "docs" / f"{page.rstrip('/')}.md").is_file()  # a page the site has


# ------------------------------------------------------------------------------ -o, exactly


def _formats() -> dict[str, tuple[str, ...]]:
    """Every leaf command's ``-o`` formats (none: no ``-o``)."""
    found = {}
    for path, command in _walk(main, [], click.Context(main, info_name="roce-agent")):
        if isinstance(command, click.Group):
            continue
        option = next((p for p in command.params if "--output" in p.opts), None)
        choices = option.type.choices if option and isinstance(option.type, click.Choice) else ()
        found[path] = tuple(str(c) for c in choices)
    return found


def test_the_output_formats_are_as_the_conventions_page_says() -> None:
    """docs/cli-conventions.md's table of -o formats is the commands' own (README's promise
    of "-o table|json|markdown|junit" said more than they did)."""
    page = (ROOT / "docs" / "cli-conventions.md").read_text()
    rows = dict(re.findall(r"^\| `(\w+)` \| [^|]+ \| ([^|]+) \|$", page, re.M))
    formats = _formats()
    printing = {c for c, f in formats.items() if f}
    assert {c for c, f in formats.items() if not f} == set(
        re.findall(r"`([\w ]+)`", page.split("have no `-o`: ", 1)[1].split(".\n", 1)[0])
    )
    for name in ("markdown", "junit", "text", "yaml", "env"):
        said = set(re.findall(r"`([\w -]+)`", rows[name].split("(")[0]))
        assert said == {c for c in printing if name in formats[c]}, name
    assert rows["json"].strip() == "every command that prints a result"
    assert all("json" in formats[c] for c in printing)
    outside = set(re.findall(r"`([\w -]+)`", rows["table"].split(";")[0]))
    assert outside == {c for c in printing if "table" not in formats[c]}
    assert {c for c in printing if formats[c][0] != "table"} == {"check", "discover", "nccl",
                                                                 "render"}  # fmt: skip


def test_the_wheel_names_in_the_docs_hold_for_either_build() -> None:
    """install.md named a py3-none-any wheel where the build makes a cp311-linux_x86_64 one:
    every wheel a page names is a pattern that matches what a compiled and a pure build make
    here (setuptools' bdist_wheel tags; tests/unit/test_wheel.py builds the compiled one)."""
    import fnmatch
    import sysconfig

    from agent import __version__

    python = f"cp{sys.version_info.major}{sys.version_info.minor}"
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    built = [
        f"roce_fabric_agent-{__version__}-{python}-{python}-{platform}.whl",
        f"roce_fabric_agent-{__version__}-py3-none-any.whl",
    ]
    named = [
        (page.name, name)
        for page in PAGES
        for name in re.findall(r"roce_fabric_agent-[^\s`'\")\[]*\.whl", page.read_text())
    ]
    assert any(page == "install.md" for page, _ in named)
    for page, name in named:
        pattern = name.split("/")[-1]
        if "VERSION" in pattern:  # a name the page spells out for one of the two builds
            assert any(fnmatch.fnmatch(w, pattern.replace("VERSION", __version__))
                       for w in built), (page, name)  # fmt: skip
            continue
        assert all(fnmatch.fnmatch(w, pattern) for w in built), (page, name)
