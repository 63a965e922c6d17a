"""One VM host: its files, its qemu command line, its start inside the guest, its readiness.

The guest boots this machine's Debian kernel (``linux-image-amd64``, which ships
``rdma_rxe``) under qemu without KVM, with the host's root file system shared read-only
(virtme-ng: ``virtme-run --dry-run --show-command --save-initramfs`` gives the command and
the initramfs; the lab then starts qemu itself, so the PID it records is qemu's). Inside,
virtme-ng-init runs :func:`guest_script`: the data NIC takes the lab host's name, MAC and
address, Soft-RoCE binds to it (``rdma link add rxe0 type rxe netdev eth1``), and sshd
listens on the management NIC, which qemu forwards from a loopback port. Everything the
guest writes goes to the VM's directory (shared read-write), nothing to the host.

``virtme-run`` gets ``--force-9p``: without it, it waits for a virtiofsd that never starts.
Modules udev would load for devices the lab does not use (the emulated CD-ROM, SATA, KVM for
the emulated CPU, the watchdog) are blacklisted: under TCG, loading them is a large part of
the boot.
"""

from __future__ import annotations

import contextlib
import glob
import ipaddress
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

RDMA_DEVICE = "rxe0"
DATA_IFNAME = "eth1"
MGMT_IFNAME = "mgmt0"
# qemu's user-mode network for management: a private subnet inside qemu (restrict=on: the
# guest reaches nothing; only the forwarded SSH port comes in), inside the benchmarking
# range the lab keeps to.
MGMT_NET = ipaddress.IPv4Network("198.19.255.0/24")
MGMT_GUEST = ipaddress.IPv4Address("198.19.255.15")
MGMT_GATEWAY = ipaddress.IPv4Address("198.19.255.2")
DEFAULT_MEMORY_MB = 512
# Blacklisted in the guest: drivers for emulated devices the lab never uses. udev's
# coldplug loads them one by one, which is slow under TCG.
SKIPPED_MODULES = (
    "kvm", "kvm_amd", "kvm_intel", "sr_mod", "cdrom", "ahci", "libahci", "libata", "sg",
    "scsi_mod", "iTCO_wdt", "iTCO_vendor_support", "i6300esb", "joydev", "psmouse",
    "serio_raw", "pcspkr", "evdev", "drm", "bochs", "button",
)  # fmt: skip
VIRTME_TIMEOUT_S = 120.0
# A bound for a VM that hangs, not its boot time: TCG boots slow down with every busy core.
BOOT_TIMEOUT_S = 300.0
# Debian packages a VM host needs on this machine (installed by scripts/ensure-system-deps.sh).
GUEST_TOOLS = {
    "qemu-system-x86_64": "qemu-system-x86",
    "busybox": "busybox-static",
    "rdma": "iproute2",
    "ib_write_bw": "perftest",
    "ibv_devinfo": "ibverbs-utils",
    "sshd": "openssh-server",
    "ssh-keygen": "openssh-client",
    "ethtool": "ethtool",
}
TOOL_DIRS = ("/usr/sbin", "/usr/bin", "/sbin", "/bin")


class VmError(Exception):
    """A VM host that cannot be prepared or did not come up; the message says why."""


@dataclass(frozen=True)
class VmHost:
    """What one VM host is: its lab identity and where its files live."""

    name: str
    directory: Path  # shared read-write with the guest, at the same path
    mac: str
    address: ipaddress.IPv4Interface
    gateway: ipaddress.IPv4Address
    gateway_mac: str
    mtu: int
    nic_socket: Path
    ssh_port: int
    index: int  # distinct per VM of a lab: the management NIC's MAC
    memory_mb: int = DEFAULT_MEMORY_MB

    @property
    def host_key(self) -> Path:
        return self.directory / "ssh_host_ed25519_key"

    @property
    def client_key(self) -> Path:
        """The key the agent logs in with (the fabric file's ``credentials.ssh_key``)."""
        return self.directory / "id_ed25519"

    @property
    def ready_file(self) -> Path:
        return self.directory / "ready"

    @property
    def console_log(self) -> Path:
        return self.directory / "console.log"

    @property
    def guest_log(self) -> Path:
        return self.directory / "guest.log"

    @property
    def mgmt_mac(self) -> str:
        return f"52:54:00:c6:13:{self.index & 0xFF:02x}"


def _tool(name: str) -> str | None:
    return shutil.which(name) or next(
        (str(Path(d) / name) for d in TOOL_DIRS if (Path(d) / name).is_file()), None
    )


def virtme_run() -> str | None:
    """virtme-ng's ``virtme-run``: next to this interpreter (the venv) or on PATH."""
    beside = Path(sys.executable).parent / "virtme-run"
    return str(beside) if beside.is_file() else shutil.which("virtme-run")


def find_kernel() -> tuple[Path, str]:
    """The newest ``/boot/vmlinuz-*`` whose modules include Soft-RoCE, and its release."""
    found = []
    for image in glob.glob("/boot/vmlinuz-*"):
        release = image.removeprefix("/boot/vmlinuz-")
        modules = glob.glob(f"/lib/modules/{release}/kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko*")
        if modules:
            found.append((Path(image), release))
    if not found:
        raise VmError(
            "no kernel with the rdma_rxe module in /boot and /lib/modules: a VM host boots "
            "Debian's kernel (apt-get install linux-image-amd64)"
        )
    return max(found, key=lambda item: [int(n) for n in re.findall(r"\d+", item[1])])


def missing_requirements() -> list[str]:
    """What this machine lacks to run a VM host, each with the package that provides it."""
    missing = [
        f"{tool} (Debian package {package})"
        for tool, package in GUEST_TOOLS.items()
        if _tool(tool) is None
    ]
    if virtme_run() is None:
        missing.append("virtme-run (PyPI package virtme-ng)")
    try:
        find_kernel()
    except VmError as exc:
        missing.append(str(exc))
    return missing


def guest_script(vm: VmHost) -> str:
    """The shell script virtme-ng-init runs in the guest as root (``--script-sh``)."""
    d = shlex.quote(str(vm.directory))
    return f"""#!/bin/sh
# {vm.name}: generated by roce-agent lab (lab/vmhost/vm.py). Runs inside the VM as root.
D={d}
exec >>"$D/guest.log" 2>&1
say() {{ echo "$(cut -d' ' -f1 /proc/uptime) $*"; }}
netdev_with_mac() {{
    for i in /sys/class/net/*; do
        [ "$(cat "$i/address")" = "$1" ] && basename "$i" && return 0
    done
    return 1
}}
say "script started"
set -e
sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
data=$(netdev_with_mac {vm.mac})
mgmt=$(netdev_with_mac {vm.mgmt_mac})
ip link set dev lo up
# The lab host's identity: the data NIC is {DATA_IFNAME}, as in the fabric file.
ip link set dev "$data" name {DATA_IFNAME}
ip link set dev {DATA_IFNAME} mtu {vm.mtu} up
ip addr add {vm.address} dev {DATA_IFNAME}
ip neigh replace {vm.gateway} lladdr {vm.gateway_mac} dev {DATA_IFNAME} nud permanent
ip route add default via {vm.gateway} dev {DATA_IFNAME}
# A plain FIFO instead of fq_codel: under the NIC's back-pressure codel would drop RoCE
# packets after 5 ms in the queue (rxe retransmits them); a RoCE NIC holds them instead.
tc qdisc replace dev {DATA_IFNAME} root pfifo limit 1000
ip link set dev "$mgmt" name {MGMT_IFNAME}
ip link set dev {MGMT_IFNAME} up
ip addr add {MGMT_GUEST}/{MGMT_NET.prefixlen} dev {MGMT_IFNAME}
modprobe rdma_rxe
rdma link add {RDMA_DEVICE} type rxe netdev {DATA_IFNAME}
say "rdma: $(rdma link show | tr '\\n' ' ')"
# Root logs in with the lab's key only. The host's shadow locks root's password ("!"),
# which sshd without PAM treats as a locked account: the guest gets a shadow of its own in
# which no account has a password ("*": no password login, not locked), no hash copied.
awk -F: -v OFS=: '{{ $2 = "*"; print }}' /etc/shadow >"$D/shadow"
chmod 0640 "$D/shadow"
mount --bind "$D/shadow" /etc/shadow
# Root's home is this machine's, read-only (its interpreters may live there: keep it). Its
# shell start-up files are this machine's user's, not a lab host's: hidden.
for f in .bashrc .profile .bash_profile .bash_login; do
    if [ -f "/root/$f" ]; then mount --bind /dev/null "/root/$f"; fi
done
mkdir -p /run/sshd
/usr/sbin/sshd -f "$D/sshd_config" -E "$D/sshd.log"
say "ready"
echo ready >"$D/ready"
exec sleep infinity
"""


def sshd_config(vm: VmHost) -> str:
    return "\n".join(
        [
            f"# {vm.name}: sshd inside the VM host (management NIC only, key login as root)",
            f"ListenAddress {MGMT_GUEST}",
            "Port 22",
            f"HostKey {vm.host_key}",
            "PidFile /run/sshd-lab.pid",
            f"AuthorizedKeysFile {vm.directory / 'authorized_keys'}",
            "PermitRootLogin prohibit-password",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            # The keys live on a 9p share whose owner and modes are the host's.
            "StrictModes no",
            "PrintMotd no",
            "PrintLastLog no",
            "UseDNS no",
            "",
        ]
    )


def prepare(vm: VmHost) -> None:
    """Write the VM's directory: keys, sshd config, guest script."""
    vm.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    for key in (vm.host_key, vm.client_key):
        if not key.exists():
            _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"roce-lab {vm.name}",
                  "-f", str(key)])  # fmt: skip
    (vm.directory / "authorized_keys").write_text(vm.client_key.with_suffix(".pub").read_text())
    (vm.directory / "sshd_config").write_text(sshd_config(vm))
    script = vm.directory / "start.sh"
    script.write_text(guest_script(vm))
    script.chmod(0o755)
    vm.ready_file.unlink(missing_ok=True)


def public_key_line(path: Path) -> str:
    """``ssh-ed25519 BASE64`` of a ``.pub`` file (the fabric file's ``host_key``)."""
    kind, data, *_ = path.read_text().split()
    return f"{kind} {data}"


def _run(argv: list[str], timeout: float = 60.0) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise VmError(f"{argv[0]}: {exc}") from None
    if done.returncode != 0:
        raise VmError(f"{' '.join(argv[:2])} failed: {(done.stderr or done.stdout).strip()[-400:]}")
    return done.stdout


def qemu_command(vm: VmHost) -> list[str]:
    """qemu's argv for ``vm``: virtme-run's command for this kernel and script, plus the lab's
    two NICs; the initramfs is saved in the VM's directory."""
    tool = virtme_run()
    if tool is None:
        raise VmError("virtme-run not found (pip package virtme-ng)")
    kernel, _release = find_kernel()
    initramfs = vm.directory / "initramfs"
    initramfs.unlink(missing_ok=True)
    output = _run(
        [
            tool, "--kimg", str(kernel), "--mods", "auto", "--disable-kvm",
            "--memory", f"{vm.memory_mb}M", "--cpus", "1", "--name", vm.name,
            "--rwdir", str(vm.directory),
            "--overlay-rwdir", "/tmp", "--overlay-rwdir", "/var", "--overlay-rwdir", "/etc",
            "--script-sh", f"sh {shlex.quote(str(vm.directory / 'start.sh'))}",
            "--save-initramfs", str(initramfs), "--dry-run", "--show-command",
            # 9p for every share: virtme-run otherwise tries virtiofsd for the read-write
            # directory, waits for a socket that never comes, and falls back to 9p.
            "--force-9p",
        ],
        timeout=VIRTME_TIMEOUT_S,
    )  # fmt: skip
    lines = [line for line in output.splitlines() if "qemu-system" in line]
    if not lines:
        raise VmError(f"virtme-run printed no qemu command: {output.strip()[-400:]}")
    argv = shlex.split(lines[-1])
    return _adapt(argv, vm)


def _adapt(argv: list[str], vm: VmHost) -> list[str]:
    """virtme's command, made the lab's: a plain CPU model (``max`` makes udev load KVM),
    fewer modules, console and script output to files, no terminal, the two NICs."""
    out: list[str] = []
    it = iter(argv)
    for arg in it:
        if arg == "-cpu":
            out += ["-cpu", "qemu64"]
            next(it)
            continue
        if arg == "-append":
            line = next(it)
            # mitigations=off: the guest runs only the lab's own commands, and the CPU
            # vulnerabilities' mitigations are emulated instruction by instruction under TCG
            # (what they cost: docs/measurements/2026-12-02-test-suite.md).
            line = line.replace(
                " panic=-1",
                f" panic=-1 mitigations=off modprobe.blacklist={','.join(SKIPPED_MODULES)}",
            )
            out += ["-append", line]
            continue
        if arg == "-chardev":
            spec = next(it)
            if spec.startswith("stdio,"):
                spec = "null,id=stdin"
            elif spec.startswith("file,id=console,"):
                spec = f"file,id=console,path={vm.console_log}"
            elif spec.startswith("file,id=ret,"):
                spec = f"file,id=ret,path={vm.directory / 'exit-code'}"
            out += ["-chardev", spec]
            continue
        out.append(arg)
    mgmt = (
        f"user,id=mgmt,restrict=on,net={MGMT_NET},host={MGMT_GATEWAY},"
        f"hostfwd=tcp:127.0.0.1:{vm.ssh_port}-{MGMT_GUEST}:22"
    )
    data = f"stream,id=data,server=off,addr.type=unix,addr.path={vm.nic_socket}"
    out += [
        "-netdev", data, "-device", f"virtio-net-pci,netdev=data,mac={vm.mac}",
        "-netdev", mgmt, "-device", f"virtio-net-pci,netdev=mgmt,mac={vm.mgmt_mac}",
    ]  # fmt: skip
    return out


def ssh_banner(port: int, timeout: float = 2.0) -> bool:
    """True when an SSH server answers on 127.0.0.1:``port`` (qemu accepts the TCP
    connection itself before the guest listens, so the banner is what counts)."""
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout) as s:
        s.settimeout(timeout)
        return s.recv(64).startswith(b"SSH-")
    return False


def wait_ready(
    vm: VmHost, process: subprocess.Popen[bytes], timeout: float = BOOT_TIMEOUT_S
) -> float:
    """Seconds until the guest said ready and sshd answers; VmError with the guest's log if
    qemu exits or the time runs out."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if process.poll() is not None:
            raise VmError(f"VM {vm.name}: qemu exited with code {process.returncode}{_logs(vm)}")
        if vm.ready_file.exists() and ssh_banner(vm.ssh_port):
            return time.monotonic() - start
        time.sleep(0.25)
    raise VmError(f"VM {vm.name} did not come up within {timeout:g} s{_logs(vm)}")


def _logs(vm: VmHost) -> str:
    parts = []
    for path in (vm.guest_log, vm.directory / "qemu.log", vm.console_log):
        with contextlib.suppress(OSError):
            tail = "\n".join(path.read_text(errors="replace").splitlines()[-8:])
            if tail.strip():
                parts.append(f"\n--- {path.name}:\n{tail}")
    return "".join(parts)
