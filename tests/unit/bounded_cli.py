"""Run ``roce-agent`` commands each in its own process under the issue's bounds (2 GiB of
address space, 30 s), without paying the interpreter's start and imports per case.

One zygote process imports the CLI once; for every case it forks a child that sets
``RLIMIT_AS``, runs the command as ``python -m agent`` would, and exits with its code. The
zygote reaps the child with ``wait4`` (so the rusage is the child's alone) and kills it at the
time limit. A child is a fresh copy of a process that has imported exactly what
``python -m agent`` imports, so the bounds mean what they mean for a real run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MEMORY_LIMIT = 2 * 1024**3
TIME_LIMIT_S = 30.0
REPO = Path(__file__).resolve().parents[2]

_ZYGOTE = r"""
import json, os, resource, sys, time
from agent.app.cli import main

for line in sys.stdin:
    request = json.loads(line)
    out = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    err = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.dup2(out, 1)
        os.dup2(err, 2)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        limit = request["memory_limit"]
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        os.environ.update(request["env"])
        code = 0
        try:
            main(request["argv"], prog_name="roce-agent", standalone_mode=True)
        except SystemExit as exit:
            code = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 2)
        except BaseException:
            import traceback
            traceback.print_exc()
            code = 99
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    os.close(out)
    os.close(err)
    code, rss, cpu = None, 0, None
    while time.monotonic() - started < request["time_limit"]:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            code, rss = os.waitstatus_to_exitcode(status), usage.ru_maxrss
            cpu = usage.ru_utime + usage.ru_stime
            break
        time.sleep(0.01)
    else:
        os.kill(pid, 9)
        os.wait4(pid, 0)
    reply = {"code": code, "seconds": time.monotonic() - started, "max_rss_kb": rss,
             "cpu_seconds": cpu}
    print(json.dumps(reply), flush=True)
"""


@dataclass
class Outcome:
    code: int | None  # None: still running at the time limit (killed)
    stdout: str
    stderr: str
    seconds: float
    max_rss_kb: int
    # the child's own CPU time (user + system), None when it was killed: the work a case
    # costs the agent, whatever else the machine is busy with
    cpu_seconds: float | None = None


class BoundedCli:
    """One zygote; :meth:`run` is one bounded ``roce-agent ARGV`` in a forked child."""

    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        self.process = subprocess.Popen(
            [sys.executable, "-c", _ZYGOTE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        self.count = 0

    def run(self, *argv: str, env: dict[str, str] | None = None) -> Outcome:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.count += 1
        out, err = self.scratch / f"out-{self.count}", self.scratch / f"err-{self.count}"
        request: dict[str, Any] = {
            "argv": list(argv),
            "stdout": str(out),
            "stderr": str(err),
            "env": env or {},
            "memory_limit": MEMORY_LIMIT,
            "time_limit": TIME_LIMIT_S,
        }
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        reply = json.loads(self.process.stdout.readline())
        outcome = Outcome(
            reply["code"],
            out.read_text(encoding="utf-8", errors="replace"),
            err.read_text(encoding="utf-8", errors="replace"),
            reply["seconds"],
            reply["max_rss_kb"],
            reply["cpu_seconds"],
        )
        out.unlink()
        err.unlink()
        return outcome

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


def bounded_runner(tmp_path_factory: Any) -> Iterator[BoundedCli]:
    """One :class:`BoundedCli` for a fixture of any scope, closed at its end:
    ``pytest.fixture(scope="module", name="cli")(bounded_runner)``."""
    runner = BoundedCli(tmp_path_factory.mktemp("bounded-cli"))
    try:
        yield runner
    finally:
        runner.close()
