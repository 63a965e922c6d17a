"""``python -m lab.mgmt``: the management plane of one lab switch.

    python -m lab.mgmt --name leaf1 --listen 127.0.0.1:2201 --control /run/lab/leaf1.sock \\
        --state-dir /var/lib/lab/leaf1 [--username admin] [--password-file FILE] \\
        [--authorized-keys FILE] [--ports eth1,eth2] [--login-mode enable|exec]
        [--dataplane-wait SECONDS] [--log-file F] [--nos eos|sonic|nvue|nxos] \\
        [--gnmi on|off] [--gnmi-listen HOST:PORT] [--gnmi-cert FILE] [--gnmi-key FILE]

Runs in the root network namespace and listens on loopback only (127.0.0.0/8). Exit codes:
0 after SIGTERM/SIGINT, 2 for a bad command line, 1 if the data plane or the port is unusable,
3 if a port is taken.

Besides SSH it serves gNMI with the NOS's paths (:mod:`lab.mgmt.gnmi`; NX-OS: none), over TLS
with ``--gnmi-cert``/``--gnmi-key``, on ``--gnmi-listen`` (default: the SSH address's host and
the NOS's own gNMI port: SONiC 8080, Cumulus 9339, EOS 6030), to the SSH login's user and
password; ``--gnmi off`` serves none. The process is ready (``<state-dir>/listening`` written,
"<pid> <ssh port> [<gnmi port>]") once both listeners are bound.

Lab-only fault knobs for drills (:mod:`lab.mgmt.launcher` has helpers), by signal — never
over SSH, so nothing the agent sends can trigger them:

- SIGUSR1: reload ``<state-dir>/faults.json`` (slow replies, cut the connection on a
  command; see :class:`lab.mgmt.ssh_server.Faults`; its ``gnmi`` object:
  :class:`lab.mgmt.gnmi.faults.GnmiFaults`);
- SIGUSR2: rotate the SSH host key (new key on disk; new connections see it);
- SIGHUP: restart the SSH management plane: every connection dropped, nothing listening
  for ``restart_down_s`` seconds (from faults.json, default 1), then listening again.
  Configuration, sessions and commit timers live on (as EOS keeps them in Sysdb when its
  SSH/CLI processes restart).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import errno
import ipaddress
import json
import logging
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any

import asyncssh
import grpc
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from lab.logsetup import setup_logging
from lab.mgmt import gnmi, names
from lab.mgmt.dataplane_handle import Dataplane, DataplaneError, VswitchDataplane
from lab.mgmt.eos.commands import HOSTNAME_RE
from lab.mgmt.gnmi.faults import GnmiFaults
from lab.mgmt.gnmi.server import GnmiService, Listener, Login, start_server
from lab.mgmt.gnmi.snapshot import Sampler
from lab.mgmt.launcher import EXIT_PORT_TAKEN, LISTENING_FILE
from lab.mgmt.lldp import PortLink, load_links
from lab.mgmt.persistence import HOST_KEY, load_or_create_host_key, read_secret_file
from lab.mgmt.personality import NOS_DEFAULT, NOS_NAMES, Personality, create_personality
from lab.mgmt.ssh_server import AuthSettings, Faults, SshSettings, start_ssh_server
from lab.mgmt.switch import LoopClock, PortInfo, SwitchManager

log = logging.getLogger("lab.mgmt")
DEFAULT_DATAPLANE_WAIT_S = 15.0


class UsageError(ValueError):
    """A command-line value that cannot be used."""


def parse_listen(value: str, option: str = "--listen") -> tuple[str, int]:
    """``127.0.0.1:2201`` -> (host, port); only loopback addresses are allowed."""
    host, sep, port_text = value.rpartition(":")
    if not sep or not port_text.isdigit():
        raise UsageError(f"{option} must be HOST:PORT, got {value!r}")
    port = int(port_text)
    if not 0 < port < 65536:
        raise UsageError(f"{option} port out of range: {port}")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise UsageError(f"{option} host must be an IPv4 address, got {host!r}") from None
    if address.version != 4 or address not in ipaddress.ip_network("127.0.0.0/8"):
        raise UsageError(f"{option} {host}: management listens on loopback (127.0.0.0/8) only")
    return host, port


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m lab.mgmt", description="The SSH management plane of a lab switch."
    )
    parser.add_argument("--name", required=True, help="switch name (default hostname)")
    parser.add_argument("--listen", required=True, help="HOST:PORT on 127.0.0.0/8")
    parser.add_argument("--control", required=True, help="vswitch control socket")
    parser.add_argument("--state-dir", required=True, type=Path, help="host key, startup-config")
    parser.add_argument("--username", default="admin")
    parser.add_argument("--password-file", type=Path, help="file holding the login password")
    parser.add_argument("--authorized-keys", type=Path, help="OpenSSH authorized_keys file")
    parser.add_argument("--ports", help="data-plane ports, e.g. eth1,eth2 (default: all)")
    parser.add_argument(
        "--login-mode",
        choices=["enable", "exec"],
        default="enable",
        help="land in privileged EXEC (#, default) or user EXEC (>, needs 'enable')",
    )
    parser.add_argument(
        "--dataplane-wait",
        type=float,
        default=DEFAULT_DATAPLANE_WAIT_S,
        help="seconds to wait for the control socket to answer at start",
    )
    parser.add_argument(
        "--nos",
        default=NOS_DEFAULT,
        choices=NOS_NAMES,
        help="management-plane personality (topology label roce.lab/nos)",
    )
    parser.add_argument(
        "--gnmi", choices=["on", "off"], default="on", help="serve gNMI (NX-OS: never)"
    )
    parser.add_argument("--gnmi-listen", help="HOST:PORT on 127.0.0.0/8 (default: the NOS's port)")
    parser.add_argument("--gnmi-cert", type=Path, help="gNMI server certificate (PEM)")
    parser.add_argument("--gnmi-key", type=Path, help="its private key (PEM)")
    parser.add_argument("--log-file", help="log here instead of stderr")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING"])
    return parser.parse_args(argv)


def _setup_logging(log_file: str | None, level: str) -> None:
    # asyncssh logs every connection at INFO: keep it to warnings.
    setup_logging(log_file, level, {"lab.mgmt": "", "asyncssh": "WARNING"})


async def _wait_for_dataplane(dataplane: VswitchDataplane, wait_s: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    while not await dataplane.ping():
        if loop.time() > deadline:
            raise DataplaneError(f"no answer on the control socket after {wait_s:g}s")
        await asyncio.sleep(0.1)


def _ports(
    wanted: str | None, dataplane_config: dict[str, Any], links: dict[str, PortLink] | None = None
) -> tuple[list[PortInfo], str]:
    """The CLI's ports (all data-plane ports, or ``--ports``) and a system MAC address;
    ``links`` (from ``links.json``) gives each port its MTU and LLDP neighbour."""
    raw_ports: list[dict[str, Any]] = list(dataplane_config.get("ports", []))
    known = {str(p["ifname"]): p for p in raw_ports}
    selected = wanted.split(",") if wanted else sorted(known, key=lambda n: int(n[3:] or 0))
    unknown = [p for p in selected if p not in known]
    if unknown:
        raise UsageError(f"--ports {','.join(unknown)}: not ports of this switch ({sorted(known)})")
    links = links or {}
    ports = [
        PortInfo(names.eos_name(p), int(known[p].get("speed_bps", 0)), links.get(p))
        for p in selected
    ]
    mac = (
        str(known[selected[0]].get("mac", "00:00:00:00:00:00")) if selected else "00:00:00:00:00:00"
    )
    return ports, mac


async def serve(args: argparse.Namespace) -> int:
    """Run until SIGTERM/SIGINT."""
    host, port = parse_listen(args.listen)
    telemetry = _Telemetry(_gnmi_listener(args, host))
    auth = _auth(args)
    args.state_dir.mkdir(parents=True, exist_ok=True)
    host_key = load_or_create_host_key(args.state_dir)

    dataplane = VswitchDataplane(args.control)
    try:
        await _wait_for_dataplane(dataplane, args.dataplane_wait)
        links = load_links(args.state_dir)
        ports, system_mac = _ports(args.ports, await dataplane.get_config(), links)
        manager = SwitchManager(args.name, ports, dataplane, LoopClock())
        personality = create_personality(args.nos, manager, args.state_dir)
        await personality.start()
    except DataplaneError as exc:
        log.error("%s: data plane unusable: %s", args.name, exc)
        dataplane.close()
        return 1
    settings = SshSettings(
        host, port, host_key, auth, args.login_mode == "enable", system_mac=system_mac
    )
    plane = _SshPlane(args, settings, personality, telemetry.faults)
    try:
        await telemetry.start(args, auth, dataplane, [names.dataplane_name(p.name) for p in ports])
        await plane.listen()
    except OSError as exc:
        log.error("%s: cannot listen: %s", args.name, exc)
        await telemetry.stop()
        dataplane.close()
        return EXIT_PORT_TAKEN if exc.errno == errno.EADDRINUSE else 1
    ready = f"{os.getpid()} {port}" + (f" {telemetry.port}" if telemetry.port else "")
    (args.state_dir / LISTENING_FILE).write_text(ready + "\n")
    log.info("%s: SSH CLI (%s) listening on %s:%d", args.name, args.nos, host, port)
    plane.handle_signals(asyncio.get_running_loop())
    await plane.serve_until_stopped()
    log.info("%s: stopping", args.name)
    plane.close()
    await telemetry.stop()
    await personality.close()
    dataplane.close()
    return 0


def _gnmi_listener(args: argparse.Namespace, ssh_host: str) -> Listener | None:
    """Where gNMI listens (None: not served); UsageError for a bad option."""
    default = gnmi.default_port(args.nos)
    if args.gnmi == "off" or default is None:
        return None
    if args.gnmi_cert is None or args.gnmi_key is None:
        raise UsageError("gNMI is TLS only: give --gnmi-cert and --gnmi-key, or --gnmi off")
    _check_pem(args.gnmi_cert, args.gnmi_key)
    if args.gnmi_listen:
        host, port = parse_listen(args.gnmi_listen, "--gnmi-listen")
    else:
        host, port = ssh_host, default
    return Listener(host, port, args.gnmi_cert, args.gnmi_key)


def _check_pem(cert: Path, key: Path) -> None:
    """UsageError unless ``cert`` is a PEM certificate and ``key`` a PEM private key."""
    try:
        x509.load_pem_x509_certificate(cert.read_bytes())
    except (OSError, ValueError) as exc:
        raise UsageError(f"--gnmi-cert {cert}: not a readable PEM certificate ({exc})") from None
    try:
        serialization.load_pem_private_key(key.read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        raise UsageError(f"--gnmi-key {key}: not a readable PEM private key ({exc})") from None


class _Telemetry:
    """The switch's gNMI server, when it serves one."""

    def __init__(self, listener: Listener | None) -> None:
        self.listener = listener
        self.faults = GnmiFaults()
        self.server: grpc.aio.Server | None = None
        self.port: int | None = None

    async def start(
        self, args: argparse.Namespace, auth: AuthSettings, dataplane: Dataplane, ports: list[str]
    ) -> None:
        """Bind and serve (OSError naming the address when that fails)."""
        tree = gnmi.tree_for(args.nos, ports)
        if self.listener is None or tree is None:
            log.info("%s: no gNMI server (%s, --gnmi %s)", args.name, args.nos, args.gnmi)
            return
        sampler = Sampler(dataplane, ports)
        service = GnmiService(tree, sampler, Login(auth.username, auth.password), self.faults)
        where = f"{self.listener.host}:{self.listener.port}"
        try:
            self.server, self.port = await start_server(self.listener, service)
        except OSError as exc:
            raise OSError(exc.errno, f"gNMI on {where}: {exc.strerror or exc}") from None
        log.info("%s: gNMI (%s) listening on %s", args.name, args.nos, where)

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop(grace=1.0)
            self.server = None


def _auth(args: argparse.Namespace) -> AuthSettings:
    """Who may log in; UsageError for a bad hostname or no way to log in at all."""
    if not re.fullmatch(HOSTNAME_RE, args.name):
        raise UsageError(f"--name {args.name!r} is not a valid hostname")
    password = read_secret_file(args.password_file) if args.password_file else None
    keys = str(args.authorized_keys) if args.authorized_keys else None
    if password is None and keys is None:
        raise UsageError("give --password-file and/or --authorized-keys (no anonymous logins)")
    return AuthSettings(args.username, password, keys)


class _SshPlane:
    """The switch's SSH listener with its host key and fault knobs: stopped, restarted or
    re-keyed on signal (the lab's fault drills)."""

    def __init__(
        self,
        args: argparse.Namespace,
        settings: SshSettings,
        personality: Personality,
        gnmi_faults: GnmiFaults,
    ) -> None:
        self.args = args
        self.settings = settings
        self.personality = personality
        self.faults = Faults()
        self.gnmi_faults = gnmi_faults
        self.faults_file = args.state_dir / FAULTS_FILE
        self.reload_faults()
        self.stop = asyncio.Event()
        self.restart = asyncio.Event()
        self.server: asyncssh.SSHAcceptor | None = None

    async def listen(self) -> None:
        self.server = await start_ssh_server(self.settings, self.personality, self.faults)

    def close(self) -> None:
        if self.server is not None:
            self.server.close()

    def handle_signals(self, loop: asyncio.AbstractEventLoop) -> None:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self.stop.set)
        loop.add_signal_handler(signal.SIGUSR1, self.reload_faults)
        loop.add_signal_handler(signal.SIGHUP, self.restart.set)
        self.faults.request_restart = self.restart.set
        loop.add_signal_handler(signal.SIGUSR2, self._rotate)

    def reload_faults(self) -> None:
        _reload_faults(self.faults, self.faults_file)
        _reload_faults(self.gnmi_faults, self.faults_file)

    def _rotate(self) -> None:
        host_key = _rotate_host_key(self.args.state_dir)
        self.settings = dataclasses.replace(self.settings, host_key=host_key)
        if self.server is not None:
            self.server.update(server_host_keys=[host_key])
        log.warning("%s: fault: host key rotated", self.args.name)

    async def serve_until_stopped(self) -> None:
        while not self.stop.is_set():
            stopped = asyncio.ensure_future(self.stop.wait())
            restarting = asyncio.ensure_future(self.restart.wait())
            await asyncio.wait({stopped, restarting}, return_when=asyncio.FIRST_COMPLETED)
            for waiter in (stopped, restarting):
                waiter.cancel()
            if self.restart.is_set() and not self.stop.is_set():
                self.restart.clear()
                await self._restart()

    async def _restart(self) -> None:
        """Drop every connection, listen on nothing for a while, then listen again."""
        self.close()
        dropped = self.faults.drop_all()
        down_s = _restart_down_s(self.faults_file)
        log.warning("%s: fault: SSH restart, %d dropped, down %gs", self.args.name, dropped, down_s)
        await asyncio.sleep(down_s)
        await self.listen()


FAULTS_FILE = "faults.json"


def _reload_faults(faults: Faults | GnmiFaults, path: Path) -> None:
    # A broken file must not take the switch down: keep the old knobs and say why.
    try:
        faults.load(path)
    except (OSError, ValueError, TypeError, re.error) as exc:
        log.error("faults: %s not loaded: %s", path, exc)


def _restart_down_s(path: Path) -> float:
    with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
        return max(0.0, float(json.loads(path.read_text()).get("restart_down_s", 1.0)))
    return 1.0


def _rotate_host_key(state_dir: Path) -> asyncssh.SSHKey:
    """A new ed25519 host key, replacing the old file atomically."""
    key = asyncssh.generate_private_key("ssh-ed25519")
    tmp = state_dir / f".{HOST_KEY}.{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(key.export_private_key())
    os.replace(tmp, state_dir / HOST_KEY)
    return key


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = _parse_args(argv)
    _setup_logging(args.log_file, args.log_level)
    try:
        return asyncio.run(serve(args))
    except UsageError as exc:
        log.error("%s", exc)
        print(f"python -m lab.mgmt: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
