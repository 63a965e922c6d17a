"""Time to apply the lossless profile to N lab switch management planes: default parallelism
versus serial, in the same run. Goal (issue #5): >= 20x at N = 128.

The switches are lab management planes (lab.mgmt: the real SSH server and EOS-style CLI,
config sessions with commit timer) over an in-memory data plane that validates like the real
one — the push path's cost is SSH and the CLI, not packets. They run in two server processes
(one per core) on loopback ports.

    python bench/push_fanout.py [--sizes 32,128]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PASSWORD = "bench-secret"
PORTS = 4
SERVERS = 2


async def _serve(first: int, count: int, state: Path, port_file: Path) -> None:
    from lab.mgmt.persistence import StartupConfigStore, load_or_create_host_key
    from lab.mgmt.ssh_server import AuthSettings, start_ssh_server
    from lab.mgmt.switch import LoopClock, PortInfo, SwitchManager
    from lab.mgmt.testing import FakeDataplane, fake_switch_config

    key = load_or_create_host_key(state)
    auth = AuthSettings("admin", PASSWORD, None)
    ports: dict[str, int] = {}
    for index in range(first, first + count):
        name = f"sw{index}"
        directory = state / name
        directory.mkdir(parents=True, exist_ok=True)
        dataplane = FakeDataplane(fake_switch_config(name, [f"eth{i}" for i in range(1, 5)]))
        manager = SwitchManager(
            name,
            [PortInfo(f"Ethernet{i}", 10_000_000) for i in range(1, PORTS + 1)],
            dataplane,
            LoopClock(),
            StartupConfigStore(directory),
        )
        await manager.start()
        server = await start_ssh_server("127.0.0.1", 0, key, auth, manager)
        ports[name] = int(server.sockets[0].getsockname()[1])
    port_file.write_text(json.dumps(ports))
    await asyncio.Event().wait()  # until terminated


def start_servers(size: int, state: Path) -> tuple[list[subprocess.Popen[bytes]], dict[str, int]]:
    processes = []
    files = []
    share = (size + SERVERS - 1) // SERVERS
    for server in range(SERVERS):
        first, count = server * share, min(share, size - server * share)
        if count <= 0:
            continue
        port_file = state / f"ports-{server}.json"
        files.append(port_file)
        processes.append(
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--serve",
                    str(first),
                    str(count),
                    str(state),
                    str(port_file),
                ],
                stdout=subprocess.DEVNULL,
            )
        )
    ports: dict[str, int] = {}
    deadline = time.monotonic() + 120
    try:
        for port_file in files:
            while not port_file.exists():
                # A server that died (or never came up) must not leave its sibling running.
                if any(process.poll() is not None for process in processes):
                    raise RuntimeError("a management plane server exited during start-up")
                if time.monotonic() > deadline:
                    raise RuntimeError("management planes did not start")
                time.sleep(0.1)
            time.sleep(0.1)
            ports.update(json.loads(port_file.read_text()))
    except BaseException:
        stop_servers(processes)
        raise
    return processes, ports


def stop_servers(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        process.terminate()
    for process in processes:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def write_fabric(ports: dict[str, int], path: Path) -> None:
    from lab.mgmt.launcher import host_public_key

    host_key = host_public_key(path.parent)  # the servers' shared key: checking stays on
    lines = [
        "name: fanout",
        "profile: nvidia-default",
        "overrides:",
        "  ecn: {queues: {3: {min_threshold: 6KB, max_threshold: 18KB}}}",
        "  buffers: {pause_threshold: 30000}",
        "defaults: {username: admin, credentials: {password_env: ROCE_BENCH_PASSWORD}}",
        "devices:",
    ]
    for name, port in sorted(ports.items(), key=lambda item: int(item[0][2:])):
        lines += [
            f"  - name: {name}",
            "    platform: arista_eos",
            "    role: leaf",
            "    host: 127.0.0.1",
            f"    port: {port}",
            f"    host_key: {host_key}",
            "    ports:",
            *(f"      - {{name: Ethernet{i}, speed: 10M, cable_m: 1, mtu: 9000}}"
              for i in range(1, PORTS + 1)),
        ]  # fmt: skip
    path.write_text("\n".join(lines) + "\n")


def run(size: int, parallelism: int, tmp: Path) -> tuple[float, dict[str, int]]:
    from agent.loader import load_fabric
    from agent.push import Pusher

    state = tmp / f"run-{size}-{parallelism}"
    state.mkdir()
    processes, ports = start_servers(size, state)
    try:
        fabric = state / "fabric.yml"
        write_fabric(ports, fabric)
        pusher = Pusher.for_intent(load_fabric(fabric).intent)
        devices = pusher.select(())
        started = time.perf_counter()
        results = pusher.apply_all(devices, canary=1, batch_size=size, parallelism=parallelism)
        elapsed = time.perf_counter() - started
    finally:
        stop_servers(processes)
    outcome: dict[str, int] = {}
    for result in results:
        outcome[result.result] = outcome.get(result.result, 0) + 1
    return elapsed, outcome


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="32,128")
    parser.add_argument("--serve", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        first, count, state, port_file = args.serve
        asyncio.run(_serve(int(first), int(count), Path(state), Path(port_file)))
        return 0
    from agent.push import DEFAULT_PARALLELISM

    os.environ["ROCE_BENCH_PASSWORD"] = PASSWORD
    print(
        f"push fan-out, lab management planes in {SERVERS} server processes, {os.cpu_count()} CPUs"
    )
    print(f"{'N':>5} {'serial s':>9} {'parallel s':>11} {'ratio':>7}  results")
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            serial, serial_outcome = run(size, 1, Path(tmp))
            parallel, parallel_outcome = run(size, DEFAULT_PARALLELISM, Path(tmp))
            ratio = serial / parallel
            print(f"{size:>5} {serial:>9.1f} {parallel:>11.1f} {ratio:>6.1f}x  "
                  f"serial {serial_outcome}, parallel {parallel_outcome}")  # fmt: skip
            ok = ok and serial_outcome == parallel_outcome == {"applied": size}
    print(f"(parallelism {DEFAULT_PARALLELISM}; goal >= 20x at N = 128)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
