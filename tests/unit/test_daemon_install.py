"""docs/daemon.md's install steps, executed as written.

The block under ``<!-- install-steps`` runs with ``bash -euo pipefail`` in a private mount
and network namespace (``unshare``) whose ``/etc``, ``/var``, ``/usr/local`` and ``/run``
are overlays on the host's: ``useradd``, ``install -o``, the credential and the unit land
in the overlays and vanish with the namespace. PID 1 here is not systemd, so ``systemctl``
is a stand-in (SYSTEMCTL below) that does what systemd does for this unit's directives —
``User=``/``Group=``, ``LoadCredential=`` (a private 0500 directory, files 0400, owned by the
user), ``StateDirectory=``, ``Environment=``, ``Type=notify`` (waits for ``READY=1``) — and
then runs ``ExecStart=`` as written. ``systemd-analyze verify`` in the block is the real one.
What is checked afterwards: owners and modes, that the agent's user can read its
configuration and not the stored password, that the started daemon completes a reconcile
cycle (its state dir writable), serves metrics, reports STATUS= and stops on SIGTERM.
Not emulated: the sandboxing directives (ProtectSystem=, capabilities, ...), which
``systemd-analyze verify`` checks for syntax only.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "daemon.md"
MARKER = "<!-- install-steps"
PASSWORD = "s3cret-for-the-sandbox"

# systemd's part for `roce-agent.service`, enough to start it as systemd would.
SYSTEMCTL = r"""
import configparser, grp, os, pwd, shlex, shutil, signal, socket, subprocess, sys, time
from pathlib import Path

UNITS = Path("/etc/systemd/system")
RUN = Path("/run/systemctl-standin")


def unit(name):
    name = name if name.endswith(".service") else name + ".service"
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.optionxform = str
    parser.read(UNITS / name)
    return name, parser


def start(name):
    name, parser = unit(name)
    service = parser["Service"]
    user, group = service["User"], service["Group"]
    uid, gid = pwd.getpwnam(user).pw_uid, grp.getgrnam(group).gr_gid
    state = Path("/var/lib") / service["StateDirectory"]
    state.mkdir(parents=True, exist_ok=True)
    os.chown(state, uid, gid)
    state.chmod(int(service.get("StateDirectoryMode", "0755"), 8))
    credentials = Path("/run/credentials") / name
    credentials.mkdir(parents=True)
    for spec in service.get("LoadCredential", "").split():
        ident, source = spec.split(":", 1)
        shutil.copyfile(source, credentials / ident)
        os.chown(credentials / ident, uid, gid)
        (credentials / ident).chmod(0o400)
    os.chown(credentials, uid, gid)
    credentials.chmod(0o500)
    RUN.mkdir(mode=0o755, exist_ok=True)
    notify_path = RUN / "notify"
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(notify_path))
    notify_path.chmod(0o666)
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "NOTIFY_SOCKET": str(notify_path),
           "CREDENTIALS_DIRECTORY": str(credentials), "LANG": "C.UTF-8"}
    # The checkout under test (the console script's editable install may point elsewhere).
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    for assignment in shlex.split(service.get("Environment", "")):
        key, value = assignment.split("=", 1)
        env[key] = value
    log = open(RUN / "journal", "w")
    process = subprocess.Popen(shlex.split(service["ExecStart"]), user=uid, group=gid,
                               extra_groups=[], env=env, cwd="/", stdin=subprocess.DEVNULL,
                               stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    (RUN / "pid").write_text(str(process.pid))
    notify.settimeout(1)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if process.poll() is not None:
            sys.exit(f"{name}: exited {process.returncode} before READY=1")
        try:
            if b"READY=1" in notify.recv(4096).split(b"\n"):
                break
        except TimeoutError:
            pass
    else:
        process.kill()
        sys.exit(f"{name}: no READY=1 within 90 s")
    # systemd keeps reading the notify socket (STATUS=, WATCHDOG=): so does a child of ours,
    # until the service is gone.
    if os.fork() == 0:
        os.setsid()
        with open(RUN / "notifications", "ab") as kept:
            while True:
                try:
                    kept.write(notify.recv(4096) + b"\n")
                    kept.flush()
                except TimeoutError:
                    try:
                        os.kill(process.pid, 0)
                    except ProcessLookupError:
                        os._exit(0)


def stop(name):
    pid = int((RUN / "pid").read_text())
    os.kill(pid, signal.SIGTERM)
    started = time.monotonic()
    while time.monotonic() - started < 15:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        sys.exit(f"{name}: still running 15 s after SIGTERM")


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    flags = {a for a in argv if a.startswith("--")}
    verb, names = args[0], args[1:]
    if verb == "daemon-reload":
        return
    if verb == "enable":
        for name in names:
            name, parser = unit(name)
            wants = UNITS / (parser["Install"]["WantedBy"] + ".wants")
            wants.mkdir(exist_ok=True)
            (wants / name).symlink_to(UNITS / name)
            if "--now" in flags:
                start(name)
        return
    if verb == "start":
        for name in names:
            start(name)
        return
    if verb == "stop":
        for name in names:
            stop(name)
        return
    if verb in ("status", "is-active"):
        pid = int((RUN / "pid").read_text())
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            print("inactive")
            sys.exit(3)
        print(f"active (running), main PID {pid}")
        return
    sys.exit(f"systemctl stand-in: {verb} not supported")


main(sys.argv[1:])
"""

# Runs inside the namespace: the overlays, then the block, then what the test checks.
SANDBOX = r"""
set -euo pipefail
overlay() {
    local layer="$LAYERS/${1//\//_}"
    mkdir -p "$layer/upper" "$layer/work"
    mount -t overlay overlay -o "lowerdir=$1,upperdir=$layer/upper,workdir=$layer/work" "$1"
}
for dir in /etc /var /usr/local /run; do overlay "$dir"; done
# The agent's user must reach the test's interpreter, which may sit under root's 0700 home
# (pyenv): each closed directory on its way is opened in an overlay, never on the host.
# The same for the checkout the agent runs from (a fresh clone may sit in a 0700 temp dir).
for start in "$(dirname "$(readlink -f "$PYTHON")")" "$(dirname "$AGENT")" "$PYTHONPATH"; do
    dir=$start
    while [ "$dir" != / ]; do
        if [ $(( 0$(stat -c %a "$dir") & 1 )) -eq 0 ]; then overlay "$dir"; chmod o+x "$dir"; fi
        dir=$(dirname "$dir")
    done
done
# A fresh machine: this one's own runs as root may have left a state dir and a config here.
rm -rf /var/lib/roce-agent /etc/roce-agent /etc/systemd/system/roce-agent.service
if getent passwd roce-agent > /dev/null; then userdel roce-agent; fi
if getent group roce-agent > /dev/null; then groupdel roce-agent; fi
ip link set lo up
mkdir -p /usr/local/bin
ln -sf "$AGENT" /usr/local/bin/roce-agent
stop_agent() { [ -f /run/systemctl-standin/pid ] && systemctl stop roce-agent || true; }
trap stop_agent EXIT
cd "$WORK"
bash -euo pipefail "$BLOCK" < "$WORK/password" > "$OUT/block.out" 2>&1
for path in /etc/roce-agent /etc/roce-agent/agent.yaml /etc/roce-agent/fabric.yaml \
            /etc/roce-agent/known_hosts /etc/roce-agent/credentials \
            /etc/roce-agent/credentials/fabric-password /var/lib/roce-agent \
            /etc/systemd/system/roce-agent.service; do
    stat -c '%n %U:%G %a' "$path"
done > "$OUT/stat.txt"
runuser -u roce-agent -- cat /etc/roce-agent/agent.yaml > /dev/null && echo config-readable \
    >> "$OUT/access.txt"
runuser -u roce-agent -- cat /etc/roce-agent/credentials/fabric-password > /dev/null 2>&1 \
    || echo password-unreadable >> "$OUT/access.txt"
"$PYTHON" - > "$OUT/metrics.txt" <<'EOF'
import pathlib, time, urllib.request
# One whole reconcile cycle (it writes its summary into the state dir), then a scrape.
deadline = time.monotonic() + 120
done = pathlib.Path("/var/lib/roce-agent/last-reconcile.json")
while not done.exists() and time.monotonic() < deadline:
    time.sleep(0.5)
with urllib.request.urlopen("http://127.0.0.1:9810/metrics", timeout=5) as response:
    print(response.read().decode())
EOF
systemctl stop roce-agent
rm /run/systemctl-standin/pid
cp /run/systemctl-standin/journal "$OUT/journal.txt"
cp /run/systemctl-standin/notifications "$OUT/notifications.txt"
"""


def install_block() -> str:
    text = DOCS.read_text()
    assert MARKER in text, f"{DOCS}: no {MARKER} marker"
    match = re.search(r"```sh\n(.*?)```", text[text.index(MARKER) :], re.S)
    assert match, f"{DOCS}: no ```sh block after {MARKER}"
    return match.group(1)


def test_the_block_is_whole() -> None:
    """Every step the issue names is in the block (user, directories, configuration,
    credential, host keys, fabric, check, unit, start)."""
    block = install_block()
    for step in (
        "useradd --system",
        "install -d -m 0750 -o root -g roce-agent /etc/roce-agent",
        "install -d -m 0700 -o root -g root /etc/roce-agent/credentials",
        "/var/lib/roce-agent",
        "deploy/agent.yaml /etc/roce-agent/agent.yaml",
        "/etc/roce-agent/fabric.yaml",
        "/etc/roce-agent/known_hosts",
        "/etc/roce-agent/credentials/fabric-password",
        "roce-agent serve --check-config",
        "systemd-analyze verify",
        "systemctl enable --now roce-agent",
    ):
        assert step in block, step


def _sandbox_or_skip() -> None:
    missing = [
        t for t in ("unshare", "useradd", "runuser", "ip", "systemd-analyze") if not shutil.which(t)
    ]
    reason = ""
    if os.geteuid() != 0:
        reason = "needs root (a private mount namespace, useradd, chown)"
    elif missing:
        reason = f"{', '.join(missing)} not installed"
    else:
        probe = subprocess.run(
            ["unshare", "--mount", "--net", "true"], capture_output=True, text=True
        )
        if probe.returncode:
            reason = f"cannot unshare a mount and network namespace: {probe.stderr.strip()}"
    if reason:
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)


def _operator_files(work: Path) -> None:
    """What the operator brings: the checkout's deploy/, a fabric file written as the docs
    say, the switches' host keys, the password on stdin."""
    shutil.copytree(ROOT / "deploy", work / "deploy")
    fabric = (ROOT / "playbooks" / "fabrics" / "pod-400g.yml").read_text()
    old = "  credentials: {password_env: ROCE_FABRIC_PASSWORD}\n"
    assert old in fabric
    fabric = fabric.replace(
        old,
        "  credentials:\n    password_file: ${CREDENTIALS_DIRECTORY}/fabric-password\n"
        "  known_hosts: /etc/roce-agent/known_hosts\n",
    )
    (work / "my-fabric.yml").write_text(fabric)
    key = work / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    public = (work / "key.pub").read_text().split()
    (work / "switches.known_hosts").write_text(f"spine1 {public[0]} {public[1]}\n")
    (work / "password").write_text(PASSWORD + "\n")


def test_install_steps_run_as_written(tmp_path: Path) -> None:
    _sandbox_or_skip()
    if not shutil.which("ssh-keygen"):
        pytest.skip("ssh-keygen not installed")
    work, out, shims = tmp_path / "work", tmp_path / "out", tmp_path / "shims"
    for folder in (work, out, shims):
        folder.mkdir()
    tmp_path.chmod(
        0o755
    )  # the agent's user walks to nothing here, but the overlays' upper dirs live here
    _operator_files(work)
    host_user = _host_user()
    block = tmp_path / "install.sh"
    block.write_text(install_block())
    systemctl = shims / "systemctl"
    systemctl.write_text(f"#!{sys.executable}\n{SYSTEMCTL}")
    systemctl.chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{shims}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "PYTHONPATH": str(ROOT),
        "LAYERS": str(tmp_path / "layers"),
        "AGENT": str(Path(sys.executable).with_name("roce-agent")),
        "PYTHON": sys.executable,
        "WORK": str(work),
        "OUT": str(out),
        "BLOCK": str(block),
    }
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "--net", "bash", "-c", SANDBOX],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    transcript = "\n".join(f"--- {p.name}\n{p.read_text()[-4000:]}" for p in sorted(out.iterdir()))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:] + transcript

    assert PASSWORD not in (out / "block.out").read_text()
    assert "ok: fabric pod-400g" in (out / "block.out").read_text()
    modes = dict(line.split(" ", 1) for line in (out / "stat.txt").read_text().splitlines())
    assert modes == {
        "/etc/roce-agent": "root:roce-agent 750",
        "/etc/roce-agent/agent.yaml": "root:roce-agent 640",
        "/etc/roce-agent/fabric.yaml": "root:roce-agent 640",
        "/etc/roce-agent/known_hosts": "root:root 644",
        "/etc/roce-agent/credentials": "root:root 700",
        "/etc/roce-agent/credentials/fabric-password": "root:root 600",
        "/var/lib/roce-agent": "roce-agent:roce-agent 750",
        "/etc/systemd/system/roce-agent.service": "root:root 644",
    }
    assert (out / "access.txt").read_text().split() == ["config-readable", "password-unreadable"]
    metrics = (out / "metrics.txt").read_text()
    assert re.search(r"^roce_agent_config_reload_success(\{[^}]*\})? 1(\.0)?$", metrics, re.M)
    assert "roce_agent_mode{" in metrics and 'mode="observe"' in metrics
    journal = (out / "journal.txt").read_text()
    assert '"message": "started"' in journal and '"message": "stopped"' in journal
    assert "playbook" not in journal  # nothing scheduled: no test traffic
    assert '"cycle failed"' not in journal, journal[-3000:]  # state dir writable, and so on
    assert '"message": "device unreadable"' in journal  # it tried: no network in here
    assert "sd_notify failed" not in journal
    assert "STATUS=observe: " in (out / "notifications.txt").read_text()
    # The host itself is untouched: the user and the files lived in the namespace's overlays.
    assert _host_user() == host_user
    assert not Path("/etc/roce-agent/credentials/fabric-password").exists()


def _host_user() -> str:
    return subprocess.run(["getent", "passwd", "roce-agent"], capture_output=True, text=True).stdout
