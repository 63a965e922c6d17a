"""``python -m lab.vswitch --config FILE --control SOCKET [--log-file PATH]``.

Run inside the switch's network namespace (``ip netns exec NS ...``).  Exit codes: 0 after
SIGTERM/SIGINT, 2 for a bad config or command line, 1 if a port or the control socket cannot
be opened.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys

from lab.logsetup import setup_logging, stop_on_signals
from lab.vswitch.commands import serve_control
from lab.vswitch.config import ConfigError, load_config
from lab.vswitch.control import ControlSocketError
from lab.vswitch.dataplane import Switch

log = logging.getLogger("lab.vswitch")


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m lab.vswitch",
        description="User-space lab switch with PFC, ECN/WRED and the PFC watchdog.",
    )
    parser.add_argument("--config", required=True, help="switch config (JSON)")
    parser.add_argument("--control", required=True, help="unix control socket path to create")
    parser.add_argument("--log-file", help="log here instead of stderr")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING"])
    return parser.parse_args(argv)


def _setup_logging(log_file: str | None, level: str) -> None:
    setup_logging(log_file, level, {"lab.vswitch": ""})


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    args = _parse_args(argv)
    _setup_logging(args.log_file, args.log_level)
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        log.error("%s", exc)
        return 2
    try:
        switch = Switch(config)
    except OSError as exc:
        log.error("cannot start %s: %s", config.name, exc)
        return 1
    try:
        serve_control(switch, args.control)
    except (OSError, ControlSocketError) as exc:
        switch.close()
        log.error("cannot start %s: %s", config.name, exc)
        return 1

    stop_on_signals(switch.request_stop, log)
    signal.set_wakeup_fd(switch.wakeup_fd, warn_on_full_buffer=False)
    try:
        switch.run()
    finally:
        signal.set_wakeup_fd(-1)
        switch.close()
        log.info("%s: stopped", config.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
