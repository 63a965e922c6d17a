"""Test only: a loader that misbehaves on request, for the daemon's reload tests.

Put this folder first on PYTHONPATH and set ``ROCE_TEST_LOADER_HOOK=1``: then, in every
process of that environment (the daemon and its reload worker), a configuration file whose
text holds a line ``# loader-hook: MODE`` makes :func:`agent.app.daemon_config.load_config`:

- ``hold-gil``: run a regular expression that backtracks for ever, holding the interpreter
  lock the whole time (what the quadratic port-range pattern of issue #42 did);
- ``sleep``: sleep for an hour (a slow parse that lets other threads run);
- ``grow``: allocate 4 GiB (a file that expands without bound);
- ``exit``: end the process with exit code 3 (a loader that crashes).

Any other file loads as usual, so the daemon starts normally and only the reload misbehaves.
"""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path
from typing import Any

MARKER = re.compile(r"^# loader-hook: (?P<mode>[\w-]+)$", re.MULTILINE)


def _misbehave(mode: str) -> None:
    if mode == "hold-gil":
        re.match(r"(a+)+$", "a" * 64 + "b")
    elif mode == "sleep":
        time.sleep(3600)
    elif mode == "grow":
        bytearray(4 << 30)
    elif mode == "exit":
        sys.stderr.write("loader hook: exit 3\n")
        os._exit(3)


def _install() -> None:
    import agent.app.daemon_config as daemon_config

    real = daemon_config.load_config

    def load_config(path: Path) -> Any:
        found = MARKER.search(Path(path).read_text(errors="replace"))
        if found is not None:
            _misbehave(found["mode"])
        return real(path)

    daemon_config.load_config = load_config  # type: ignore[assignment]


if os.environ.get("ROCE_TEST_LOADER_HOOK") == "1":
    _install()
