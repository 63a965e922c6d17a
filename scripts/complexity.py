"""The complexity gate `make test` runs: cyclomatic complexity as radon counts it, and a reason
on every ``noqa``.

ruff's C901 (mccabe) does not count boolean operators, so ``if a and b or c`` scores one
decision where radon (and McCabe's definition: each condition is a branch) scores three. This
gate reads every function and method of the product with radon:

* above :data:`LIMIT` a function needs an exemption on its ``def`` line, with the reason:
  ``# noqa: C901 -- why`` (the same marker ruff reads);
* above :data:`HARD_LIMIT` there is no exemption;
* at most :data:`MAX_EXEMPTIONS` functions may be exempted;
* every ``noqa`` in the tree (tests included) names its codes and says why after `` -- ``.

Exit 0 when all hold; otherwise one ``FILE:LINE: message`` per finding and exit 1.

    python scripts/complexity.py [--list]     # --list: every function above LIMIT
"""

from __future__ import annotations

import argparse
import io
import re
import subprocess
import sys
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from radon.complexity import cc_visit
from radon.visitors import Class, Function

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("agent", "lab", "lossless", "common", "exporters", "bench", "scripts", "datasets")
LIMIT = 15
HARD_LIMIT = 20
MAX_EXEMPTIONS = 10
EXEMPT = re.compile(r"#\s*noqa:\s*[A-Z0-9, ]*C901[A-Z0-9, ]*\s+--\s+\S")
# A line's marker, or a file's (`ruff: noqa`): the codes, then the reason after two dashes.
NOQA = re.compile(r"#\s*(?:ruff:\s*)?noqa\b(?P<rest>.*)$")
NOQA_WITH_REASON = re.compile(r"^:\s*[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*\s+--\s+\S")


@dataclass(frozen=True)
class Finding:
    path: Path
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}: {self.message}"


def python_files(folders: Iterable[str]) -> list[Path]:
    """The tracked and untracked-but-not-ignored ``.py`` files under ``folders``."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *folders],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return sorted(ROOT / name for name in listed if name.endswith(".py") and (ROOT / name).exists())


def functions(blocks: Iterable[Function | Class]) -> Iterator[Function]:
    """Every function, method and closure radon found, once each, judged by its own count
    (``cc_visit`` lists a class's methods both inside the class and beside it)."""
    seen: set[tuple[int, str]] = set()
    pending = list(blocks)
    while pending:
        block = pending.pop()
        if isinstance(block, Class):
            pending += [*block.methods, *block.inner_classes]
        elif (block.lineno, block.name) not in seen:
            seen.add((block.lineno, block.name))
            pending += block.closures
            yield block


def complexity_findings(path: Path, exempted: list[Finding]) -> Iterator[Finding]:
    source = path.read_text()
    lines = source.splitlines()
    for function in functions(cc_visit(source)):
        if function.complexity <= LIMIT:
            continue
        name = f"{function.classname}.{function.name}" if function.classname else function.name
        here = Finding(path, function.lineno, f"{name}: complexity {function.complexity}")
        if function.complexity > HARD_LIMIT:
            yield Finding(path, here.line, f"{here.message}, above {HARD_LIMIT}: split it")
        elif EXEMPT.search(lines[function.lineno - 1]):
            exempted.append(here)
        else:
            yield Finding(
                path,
                here.line,
                f"{here.message}, above {LIMIT}: split it into short named steps, or exempt "
                "it on its def line: `# noqa: C901 -- why`",
            )


def noqa_findings(path: Path) -> Iterator[Finding]:
    """Comments only (tokenize): a ``noqa`` inside a string is text, not a marker."""
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
    for token in tokens:
        match = NOQA.search(token.string) if token.type == tokenize.COMMENT else None
        if match and not NOQA_WITH_REASON.match(match.group("rest")):
            yield Finding(
                path, token.start[0], "noqa without its codes and reason: `# noqa: CODE -- why`"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="list every function above LIMIT")
    args = parser.parse_args(argv)
    exempted: list[Finding] = []
    findings = [f for p in python_files(PACKAGES) for f in complexity_findings(p, exempted)]
    findings.sort(key=lambda finding: (str(finding.path), finding.line))
    findings += [f for p in python_files((".",)) for f in noqa_findings(p)]
    if len(exempted) > MAX_EXEMPTIONS:
        findings.append(
            Finding(ROOT / "scripts" / "complexity.py", 1,
                    f"{len(exempted)} functions exempted above {LIMIT}; at most {MAX_EXEMPTIONS}")
        )  # fmt: skip
    if args.list:
        for finding in exempted:
            print(f"exempt: {finding}")
    for finding in findings:
        print(finding)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
