"""Start and stop a lab switch's management process (called by the lab runtime)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
PASSWORD_FILE = "login-password"
LOG_FILE = "mgmt.log"
# Written by the management process once its SSH listener (and its gNMI one, when it serves
# gNMI) is bound: "<pid> <port> [<gnmi port>]". An SSH banner on the port alone does not prove
# the switch is ours: another lab's switch may hold the port (it was free when allocated and
# taken before this process bound it).
LISTENING_FILE = "listening"
# The management process's exit status when its port is taken: the caller picks another.
EXIT_PORT_TAKEN = 3


class ManagementStartError(RuntimeError):
    """The management process exited or never accepted SSH connections."""


class PortTaken(ManagementStartError):
    """Another process bound the management port first."""


def _listening(state_dir: Path) -> list[int]:
    """The listening file's numbers: pid, SSH port and the gNMI port if any ([] if none)."""
    try:
        return [int(word) for word in (state_dir / LISTENING_FILE).read_text().split()]
    except (OSError, ValueError):
        return []


def _port_open(host: str, port: int, timeout: float) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _ssh_banner_seen(host: str, port: int, timeout: float) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            return sock.recv(8).startswith(b"SSH-")
    except OSError:
        return False


def _log_tail(state_dir: Path, lines: int = 20) -> str:
    try:
        return "\n".join((state_dir / LOG_FILE).read_text().splitlines()[-lines:])
    except OSError:
        return "(no log)"


def host_public_key(state_dir: str | Path) -> str:
    """The switch's SSH host key as ``TYPE BASE64`` (created now if it does not exist yet),
    so the lab can pin it in the fabric file before the management plane first starts."""
    from lab.mgmt.persistence import load_or_create_host_key

    key = load_or_create_host_key(Path(state_dir))
    line: bytes = key.export_public_key("openssh")
    return " ".join(line.decode("ascii").split()[:2])


@dataclass(frozen=True)
class ManagementOptions:
    """What a switch's management process is started with: its name, where it listens (on
    loopback), the vswitch control socket it drives, its state directory, who may log in,
    and the NOS it speaks.

    ``ports`` are data-plane names (``eth1``...); None or empty means every port of the switch.
    ``dataplane_wait`` bounds how long the process waits for the vswitch control socket.
    gNMI is served (TLS) when ``gnmi_cert`` and ``gnmi_key`` are given, on ``gnmi_port`` of
    the listen host (None: the NOS's own gNMI port); without them it is off.
    """

    name: str
    listen_host: str
    listen_port: int
    control_socket: str
    state_dir: str | Path
    username: str
    password: str
    ports: Sequence[str] | None = None
    authorized_keys: str | Path | None = None
    login_mode: str = "enable"
    dataplane_wait: float = 15.0
    nos: str = "eos"
    gnmi_port: int | None = None
    gnmi_cert: str | Path | None = None
    gnmi_key: str | Path | None = None

    @property
    def serves_gnmi(self) -> bool:
        return self.gnmi_cert is not None and self.gnmi_key is not None

    def argv(self, password_path: Path) -> list[str]:
        """``python -m lab.mgmt`` with this switch's options (the password by file)."""
        state = Path(self.state_dir)
        argv = [
            sys.executable, "-m", "lab.mgmt",
            "--name", self.name,
            "--listen", f"{self.listen_host}:{self.listen_port}",
            "--control", str(self.control_socket),
            "--state-dir", str(state),
            "--username", self.username,
            "--password-file", str(password_path),
            "--login-mode", self.login_mode,
            "--dataplane-wait", str(self.dataplane_wait),
            "--log-file", str(state / LOG_FILE),
            "--nos", self.nos,
        ]  # fmt: skip
        if self.ports:
            argv += ["--ports", ",".join(self.ports)]
        if self.authorized_keys is not None:
            argv += ["--authorized-keys", str(self.authorized_keys)]
        return argv + self._gnmi_argv()

    def _gnmi_argv(self) -> list[str]:
        if not self.serves_gnmi:
            return ["--gnmi", "off"]
        argv = ["--gnmi-cert", str(self.gnmi_cert), "--gnmi-key", str(self.gnmi_key)]
        if self.gnmi_port is not None:
            argv += ["--gnmi-listen", f"{self.listen_host}:{self.gnmi_port}"]
        return argv


def start_management(switch: ManagementOptions, timeout: float = 20.0) -> subprocess.Popen[bytes]:
    """Start ``python -m lab.mgmt`` for one switch; return once its SSH port answers (and its
    gNMI port accepts connections, when it serves gNMI).

    The password is handed over in ``<state_dir>/login-password`` (mode 0600), never on the
    command line; the log goes to ``<state_dir>/mgmt.log``. Raises
    :class:`ManagementStartError` (after stopping the process) if it does not come up.
    """
    state = Path(switch.state_dir)
    state.mkdir(parents=True, exist_ok=True)
    (state / LISTENING_FILE).unlink(missing_ok=True)  # an earlier run's proves nothing now
    password_path = state / PASSWORD_FILE
    fd = os.open(password_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(switch.password + "\n")
    argv = switch.argv(password_path)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    with open(state / LOG_FILE, "ab") as log:
        # Own session: the switch's CLI outlives `lab up` and ignores its terminal's ^C.
        proc = subprocess.Popen(
            argv,
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            error = PortTaken if proc.returncode == EXIT_PORT_TAKEN else ManagementStartError
            raise error(
                f"{switch.name}: lab.mgmt exited with {proc.returncode}:\n{_log_tail(state)}"
            )
        if _ready(switch, state, proc.pid):
            return proc
        time.sleep(0.05)
    stop_management(proc)
    raise ManagementStartError(f"{switch.name}: SSH not up after {timeout:g}s:\n{_log_tail(state)}")


def _ready(switch: ManagementOptions, state: Path, pid: int) -> bool:
    numbers = _listening(state)
    if not numbers or numbers[0] != pid:
        return False
    if not _ssh_banner_seen(switch.listen_host, switch.listen_port, timeout=1.0):
        return False
    if len(numbers) < 3:  # no gNMI server (off, or NX-OS)
        return not switch.serves_gnmi or switch.nos == "nxos"
    return _port_open(switch.listen_host, numbers[2], timeout=1.0)


def stop_management(proc: subprocess.Popen[bytes], timeout: float = 5.0) -> int | None:
    """SIGTERM the process (SIGKILL after ``timeout``); returns its exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)
    return proc.returncode


# Lab-only fault knobs of a running management process (see ``python -m lab.mgmt --help``).
FAULTS_FILE = "faults.json"


def set_faults(state_dir: str | Path, pid: int, **knobs: object) -> None:
    """Write ``faults.json`` (delay_s, slow_on, cut_on, cut_when, cut_count, restart_on,
    restart_down_s; ``gnmi={...}`` for the gNMI server's, see
    :class:`lab.mgmt.gnmi.faults.GnmiFaults`) and make the process reload it; no knobs clears
    them."""
    path = Path(state_dir) / FAULTS_FILE
    tmp = path.with_name(f".{FAULTS_FILE}.{os.getpid()}")
    tmp.write_text(json.dumps(knobs), encoding="utf-8")
    os.replace(tmp, path)
    os.kill(pid, signal.SIGUSR1)


def rotate_host_key(pid: int) -> None:
    """New connections see a new host key (the old file is replaced)."""
    os.kill(pid, signal.SIGUSR2)


def restart_ssh(pid: int) -> None:
    """Drop every SSH connection and stop listening for ``restart_down_s`` seconds."""
    os.kill(pid, signal.SIGHUP)
