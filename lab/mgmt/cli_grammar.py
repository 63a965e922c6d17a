"""Command patterns and the matcher behind every industry-CLI mode (EOS, NX-OS).

A pattern is written the way CLI references print syntax::

    "random-detect ecn minimum-threshold <min:int:1-256000000> <min_unit:choice:segments,bytes>
     maximum-threshold ... [max-mark-probability <prob:int:1-100>] [weight <w:int:0-15>]"

* ``word``                 a keyword; like EOS, any unique prefix is accepted (``sh run``);
* ``<name:type[:arg]>``    a value bound to ``args[name]`` (types in :data:`VALUE_TYPES`);
* ``[ ... ]``              an optional group.

A line that matches no command raises :class:`NoMatch`: its text is EOS' wording, which
scripts (and netmiko ``error_pattern``) match on -- ``% Invalid input (at token N: 'WORD')``,
``% Incomplete command``, ``% Ambiguous command`` -- and it carries what went wrong and
where (``kind``, ``index``), so another NOS words it its own way (NX-OS' caret line).
:func:`apply_in_modes` applies one configuration line through a stack of modes, falling back
to the enclosing modes as both CLIs do.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Generic, TypeVar

H = TypeVar("H")
Converter = Callable[[str], Any]

INCOMPLETE_COMMAND = "% Incomplete command"
AMBIGUOUS_COMMAND = "% Ambiguous command"


class CliError(Exception):
    """A line the CLI refuses; ``str(exc)`` is exactly what the terminal prints."""


class NoMatch(CliError):
    """No command matches the line: ``kind`` is ``invalid``, ``incomplete`` or ``ambiguous``,
    ``index`` the token blamed (``len(tokens)`` when the line ended too early)."""

    def __init__(self, text: str, kind: str, index: int) -> None:
        super().__init__(text)
        self.kind = kind
        self.index = index


def refused(reason: Exception) -> CliError:
    """A configuration the switch cannot run (:class:`lab.mgmt.switch.ConfigRefused`), as EOS
    prints an error."""
    return CliError(f"% {reason}")


def invalid_input(index: int, token: str) -> NoMatch:
    """EOS' message for a token that fits nowhere."""
    return NoMatch(f"% Invalid input (at token {index}: '{token}')", "invalid", index)


def _int_range(arg: str) -> Converter:
    low, high = (int(x) for x in arg.split("-"))

    def convert(token: str) -> int:
        if not token.isdigit():
            raise ValueError(token)
        value = int(token)
        if not low <= value <= high:
            raise ValueError(token)
        return value

    return convert


def _decimal_range(arg: str) -> Converter:
    low_text, high_text = arg.split("~")
    low, high = Decimal(low_text), Decimal(high_text)
    max_places = max(-int(Decimal(low_text).as_tuple().exponent), 0)

    def convert(token: str) -> Decimal:
        if not re.fullmatch(r"\d+(\.\d+)?", token):
            raise ValueError(token)
        try:
            value = Decimal(token)
        except InvalidOperation:
            raise ValueError(token) from None
        places = max(-int(value.as_tuple().exponent), 0)
        if not low <= value <= high or places > max_places:
            raise ValueError(token)
        return value

    return convert


def _word(arg: str) -> Converter:
    pattern = re.compile(arg or r"[A-Za-z0-9_.:/\-]{1,64}")

    def convert(token: str) -> str:
        if not pattern.fullmatch(token):
            raise ValueError(token)
        return token

    return convert


VALUE_TYPES: dict[str, Callable[[str], Converter]] = {
    "int": _int_range,  # <n:int:0-7>
    "decimal": _decimal_range,  # <s:decimal:0.01~60> (decimals allowed = those of the low end)
    "word": _word,  # <name:word> or <name:word:REGEX>
}
"""Value types usable in patterns; modules add their own with :func:`register_value_type`."""


def register_value_type(name: str, factory: Callable[[str], Converter]) -> None:
    """Make ``<x:name:arg>`` available in patterns."""
    VALUE_TYPES[name] = factory


@dataclass(frozen=True)
class _Keyword:
    word: str


@dataclass(frozen=True)
class _Choice:
    name: str
    options: tuple[str, ...]


@dataclass(frozen=True)
class _Value:
    name: str
    convert: Converter
    many: bool = False


@dataclass(frozen=True)
class _Rest:
    name: str


@dataclass(frozen=True)
class _Optional:
    elements: tuple[_Element, ...]


_Element = _Keyword | _Choice | _Value | _Rest | _Optional


def _spec_words(spec: str) -> list[str]:
    """Split a pattern into words, ``[``/``]`` and ``<...>`` (kept whole: it may hold a regex)."""
    words: list[str] = []
    current = ""
    depth = 0
    for char in spec:
        if char == "<":
            depth += 1
        elif char == ">":
            depth -= 1
        if depth == 0 and char in "[] ":
            if current:
                words.append(current)
            current = ""
            if char != " ":
                words.append(char)
            continue
        current += char
    if current:
        words.append(current)
    return words


def _compile(spec: str) -> tuple[_Element, ...]:
    words = _spec_words(spec)
    stack: list[list[_Element]] = [[]]
    for word in words:
        if word == "[":
            stack.append([])
        elif word == "]":
            group = tuple(stack.pop())
            stack[-1].append(_Optional(group))
        elif word.startswith("<") and word.endswith(">"):
            stack[-1].append(_compile_value(word[1:-1]))
        else:
            stack[-1].append(_Keyword(word.lower()))
    if len(stack) != 1:
        raise ValueError(f"unbalanced [] in pattern {spec!r}")
    return tuple(stack[0])


def _compile_value(inner: str) -> _Element:
    name, _, rest = inner.partition(":")
    kind, _, arg = rest.partition(":")
    if kind == "rest":
        return _Rest(name)
    if kind == "choice":
        return _Choice(name, tuple(arg.split(",")))
    many = kind.endswith("s") and kind[:-1] in VALUE_TYPES
    base = kind[:-1] if many else kind
    if base not in VALUE_TYPES:
        raise ValueError(f"unknown value type {kind!r} in <{inner}>")
    return _Value(name, VALUE_TYPES[base](arg), many)


@dataclass(frozen=True)
class Command(Generic[H]):
    """One pattern and what to do when a line matches it."""

    pattern: str
    handler: H
    elements: tuple[_Element, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "elements", _compile(self.pattern))


@dataclass(frozen=True)
class Match(Generic[H]):
    """A line matched to a command, with its bound values."""

    command: Command[H]
    args: dict[str, Any]


@dataclass
class _Failure:
    """Where matching got furthest before failing (that is the token EOS blames)."""

    index: int = -1
    incomplete: bool = False
    # keywords that a token abbreviated, by position (two or more = ambiguous there)
    abbreviated: dict[int, set[str]] = field(default_factory=dict)
    spelled_out: set[int] = field(default_factory=set)

    def record(self, index: int, incomplete: bool) -> None:
        if index > self.index:
            self.index, self.incomplete = index, incomplete
        elif index == self.index:
            self.incomplete = self.incomplete and incomplete


def _keyword_fits(token: str, word: str) -> int:
    """2 = exact, 1 = unique-prefix candidate, 0 = no."""
    if token == word:
        return 2
    return 1 if word.startswith(token) else 0


@dataclass
class _Line:
    """The tokens being matched, and where matching got furthest on them."""

    tokens: Sequence[str]
    failure: _Failure = field(default_factory=_Failure)


# One way an element matches at a position: where matching goes on, the values bound so far,
# and how many tokens were spelled out in full (1 or 0; exact spellings win ties).
_Step = tuple[int, dict[str, Any], int]


def _walk(
    line: _Line, elements: tuple[_Element, ...], pos: int, args: dict[str, Any], exact: int
) -> Iterator[_Step]:
    """Every way ``elements`` match the line's tokens from ``pos`` (depth first, greedy
    first)."""
    if not elements:
        yield pos, args, exact
        return
    head, rest = elements[0], elements[1:]
    if isinstance(head, _Optional):
        yield from _walk(line, head.elements + rest, pos, args, exact)
        yield from _walk(line, rest, pos, args, exact)
        return
    if pos >= len(line.tokens):
        line.failure.record(pos, incomplete=True)
        return
    for after, bound, spelled in _steps(line, head, pos, args):
        yield from _walk(line, rest, after, bound, exact + spelled)


def _steps(
    line: _Line, head: _Keyword | _Choice | _Value | _Rest, pos: int, args: dict[str, Any]
) -> Iterator[_Step]:
    """The ways one element (not an optional group) matches the token at ``pos``."""
    if isinstance(head, _Keyword):
        return _keyword_steps(line, head, pos, args)
    if isinstance(head, _Choice):
        return _choice_steps(line, head, pos, args)
    if isinstance(head, _Rest):
        return iter([(len(line.tokens), {**args, head.name: " ".join(line.tokens[pos:])}, 0)])
    return _value_steps(line, head, pos, args)


def _keyword_steps(line: _Line, head: _Keyword, pos: int, args: dict[str, Any]) -> Iterator[_Step]:
    failure = line.failure
    fit = _keyword_fits(line.tokens[pos].lower(), head.word)
    if not fit:
        failure.record(pos, incomplete=False)
        return
    if fit == 2:
        failure.spelled_out.add(pos)
    else:
        failure.abbreviated.setdefault(pos, set()).add(head.word)
    yield pos + 1, args, int(fit == 2)


def _choice_steps(line: _Line, head: _Choice, pos: int, args: dict[str, Any]) -> Iterator[_Step]:
    lowered = line.tokens[pos].lower()
    exact_hits = [o for o in head.options if o == lowered]
    hits = exact_hits or [o for o in head.options if o.startswith(lowered)]
    if len(hits) != 1:
        line.failure.record(pos, incomplete=False)
        return
    yield pos + 1, {**args, head.name: hits[0]}, int(bool(exact_hits))


def _value_steps(line: _Line, head: _Value, pos: int, args: dict[str, Any]) -> Iterator[_Step]:
    values: list[Any] = []
    for token in line.tokens[pos:]:
        try:
            values.append(head.convert(token))
        except ValueError:
            break
        if not head.many:
            break
    if not values:
        line.failure.record(pos, incomplete=False)
        return
    for count in range(len(values), 0, -1):  # greedy first, then back off
        value: Any = values[:count] if head.many else values[0]
        yield pos + count, {**args, head.name: value}, 0


def tokenize(line: str) -> list[str]:
    """Split a command line into tokens (EOS has no quoting for the commands we take)."""
    return line.split()


def match_command(commands: Sequence[Command[H]], tokens: Sequence[str]) -> Match[H]:
    """The one command ``tokens`` matches, or :class:`CliError` in EOS' words."""
    line = _Line(tokens)
    best: list[tuple[int, Command[H], dict[str, Any]]] = []
    for command in commands:
        for end, args, exact in _walk(line, command.elements, 0, {}, 0):
            if end == len(tokens):
                best.append((exact, command, args))
                break
            line.failure.record(end, incomplete=False)
    if not best:
        raise _no_match(line.failure, tokens)
    top = max(score for score, _, _ in best)
    winners = [(command, args) for score, command, args in best if score == top]
    if len({id(command) for command, _ in winners}) > 1:
        raise NoMatch(AMBIGUOUS_COMMAND, "ambiguous", len(tokens) - 1)
    command, args = winners[0]
    return Match(command, args)


def _no_match(failure: _Failure, tokens: Sequence[str]) -> NoMatch:
    """EOS' word for a line no command matches: ambiguous, incomplete or invalid (where)."""
    for pos, words in failure.abbreviated.items():
        if len(words) > 1 and pos not in failure.spelled_out and pos <= failure.index:
            return NoMatch(AMBIGUOUS_COMMAND, "ambiguous", pos)
    if failure.incomplete or failure.index < 0 or failure.index >= len(tokens):
        return NoMatch(INCOMPLETE_COMMAND, "incomplete", len(tokens))
    return invalid_input(failure.index, tokens[failure.index])


def _further(new: CliError, old: CliError) -> bool:
    """Whether ``new`` blames a later token than ``old`` (both no-matches)."""
    return isinstance(new, NoMatch) and isinstance(old, NoMatch) and new.index > old.index


Mode = TypeVar("Mode")
Target = TypeVar("Target")
ModeHandler = Callable[[Target, Mode, dict[str, Any]], Mode | None]


def apply_in_modes(
    target: Target,
    stack: Sequence[Mode],
    tokens: Sequence[str],
    commands_for: Callable[[Mode], Sequence[Command[ModeHandler[Target, Mode]]]],
) -> list[Mode]:
    """Apply one configuration line to ``target`` through the mode stack; the new stack.

    The innermost mode is tried first, then its parents (a sub-mode line the mode does not know
    goes to the enclosing mode, as in EOS and NX-OS: ``interface X`` inside a policy-map leaves
    it). A handler that returns a mode enters it. On :class:`CliError` nothing was changed; the
    error is the mode's that got furthest into the line (the innermost one on a tie), so
    ``interface`` alone in a sub-mode is incomplete, not invalid.
    """
    first_error: CliError | None = None
    for depth in range(len(stack) - 1, -1, -1):
        mode = stack[depth]
        try:
            match = match_command(commands_for(mode), tokens)
        except CliError as exc:
            if first_error is None or _further(exc, first_error):
                first_error = exc
            continue
        pushed = match.command.handler(target, mode, match.args)
        return [*stack[: depth + 1], *([pushed] if pushed is not None else [])]
    assert first_error is not None
    raise first_error


def is_comment(line: str) -> bool:
    """Blank lines and ``!`` comments (a running-config's separators and header) do nothing."""
    stripped = line.strip()
    return not stripped or stripped.startswith("!")


def load_lines(
    target: Target,
    text: str,
    root: Mode,
    apply: Callable[[Target, list[Mode], str], list[Mode]],
) -> None:
    """A whole configuration file (running-config syntax) applied to ``target`` line by line,
    the modes followed from ``root`` (``exit`` leaves one, ``end`` stops). :class:`CliError`
    names the line number of the first bad line; indentation decides nothing (the modes do),
    as when a switch reads a file."""
    stack: list[Mode] = [root]
    for number, line in enumerate(text.splitlines(), start=1):
        if is_comment(line):
            continue
        word = line.strip().lower()
        if word == "end":
            break
        if word == "exit":
            stack = stack[:-1] or [root]
            continue
        try:
            stack = apply(target, stack, line)
        except CliError as exc:
            raise CliError(f"line {number}: {line.strip()!r}: {exc}") from None
