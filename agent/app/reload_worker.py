"""The daemon's reload, parsed and validated in a child process with a deadline.

A reload reads files anyone with write access to /etc/roce-agent may have changed: a parse
that never ends (a pattern that backtracks, a loader bug on hostile input) must not take the
daemon with it. In a thread it did: CPython's ``re`` holds the interpreter lock for a whole
match, so one runaway match froze the HTTP server, the watchdog pings and signal handling
(issue #42: 200 000 digits in a port name, scrapes timed out for 90 s, SIGTERM did nothing).
A process has its own interpreter: the daemon keeps serving, and at the deadline the child
is killed (SIGKILL), whatever it is doing. Its address space is capped too, so a file that
expands without bound ends in a refused reload, not in the daemon's memory.

The child runs :func:`agent.app.daemon_config.load_config` (everything ``serve`` loads: agent.yaml,
the fabric, the web config, the scheduled playbooks) and writes one pickled answer to its
stdout: ``("loaded", Loaded)`` or ``("refused", fields)`` (the log fields of the refusal,
:func:`agent.app.daemon_config.error_fields`). The daemon then builds the new exporter from it in a
thread and swaps it in; the running configuration stays until then.
"""

from __future__ import annotations

import ctypes
import json
import os
import pickle
import resource
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The child's address space: a reload that needs more is refused (the loader's own limits
# are far below it: a 65 536-port fabric loads in well under 200 MB).
MEMORY_LIMIT = 3 << 29  # 1.5 GiB
# Most of an answer is the fabric; a pickle larger than this is not one we wrote.
ANSWER_LIMIT = 256 << 20
_BOOT = (
    "import json, sys; sys.path[:0] = json.loads(sys.argv[1]); "
    "from agent.app.reload_worker import child_main; child_main(sys.argv[2:])"
)
PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class Refused:
    """Why a reload was refused: the log fields (reason, file, line, column, problems)."""

    fields: dict[str, Any]


@dataclass
class ReloadWorker:
    """One reload's child process, watched from a thread that reads its answer (the daemon's
    main loop only looks at :meth:`answer`, never waits)."""

    config_path: Path
    shard: str | None  # `serve --shard`, as given (the child parses it again)
    deadline_s: float
    started: float = field(default_factory=time.monotonic)
    _answer: list[Any] = field(default_factory=list)
    _killed: str | None = None

    def __post_init__(self) -> None:
        argv = [sys.executable, "-c", _BOOT, json.dumps(sys.path), str(self.config_path)]
        argv += [self.shard] if self.shard else []
        self.process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self._reader = threading.Thread(target=self._read, name="roce-reload-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            out, err = self.process.communicate()
        except (OSError, ValueError):  # the pipes were closed under us (the daemon stops)
            return
        self._answer.append(self._decode(out, err))

    def _decode(self, out: bytes, err: bytes) -> Any:
        code = self.process.returncode
        if self._killed is not None:
            return Refused(_fields(f"{self.config_path}: {self._killed}"))
        if code == 0 and 0 < len(out) <= ANSWER_LIMIT:
            try:
                kind, value = pickle.loads(out)  # our own child's answer
            except Exception as exc:  # a child that wrote something else: say what
                return Refused(_fields(f"{self.config_path}: reload worker: {exc!r}"[:300]))
            return value if kind == "loaded" else Refused(value)
        last = err.decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
        why = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
        return Refused(
            _fields(f"{self.config_path}: the reload worker died ({why}): {last[0][:200]}")
        )

    def answer(self) -> Any:
        """The loaded configuration, a :class:`Refused`, or None while the child works.
        Past the deadline the child is killed and the reload refused at once (nothing here
        waits for the child)."""
        if self._answer:
            return self._answer[0]
        if time.monotonic() - self.started >= self.deadline_s:
            why = f"loading took longer than {self.deadline_s:g} s (reload worker killed)"
            self.kill(why)
            self._answer.insert(0, Refused(_fields(f"{self.config_path}: {why}")))
            return self._answer[0]
        return None

    def kill(self, why: str = "stopped") -> None:
        """End the child now (SIGKILL: a runaway parse does not answer anything gentler)."""
        self._killed = why
        if self.process.poll() is None:
            self.process.kill()

    @property
    def alive(self) -> bool:
        return self.process.poll() is None


def _fields(reason: str) -> dict[str, Any]:
    """The log fields of a refusal the worker itself decided (the file is agent.yaml)."""
    from agent.app.daemon_config import error_fields
    from agent.errors import AgentError

    return error_fields(AgentError(reason))


# --------------------------------------------------------------------------- the child


def _die_with_parent() -> None:
    """If the daemon dies (SIGKILL included), so does its reload worker."""
    parent = os.getppid()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the parent's kill at its deadline remains
        return
    if os.getppid() != parent:  # it died before the prctl
        os._exit(1)


def child_main(argv: list[str]) -> None:
    """``python -c _BOOT PATH CONFIG [SHARD]``: load, answer on stdout, exit."""
    _die_with_parent()
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    from agent.app import daemon_config
    from agent.intent.shard import parse_shard

    answer: tuple[str, Any]
    try:
        shard = parse_shard(argv[1]) if len(argv) > 1 else None
        answer = ("loaded", daemon_config.load_config(Path(argv[0])).with_shard(shard))
    except BaseException as exc:  # MemoryError, RecursionError, a loader bug: all refusals
        answer = ("refused", daemon_config.error_fields(exc))
    sys.stdout.buffer.write(pickle.dumps(answer))
    sys.stdout.flush()
    os._exit(0)
