"""The compiled hot path and its Python source (lossless/compiled.py, setup.py).

- Which one runs: compiled where the build made extensions, the source under
  ROCE_AGENT_PURE_PYTHON=1, and the source when the files were edited after the build.
- They agree: seeded random twin runs (incast, all-to-all, victim, storm; collectives with
  losses and both recoveries) give the same report, field for field, from both -- one process
  per mode, the same cases, only wall-clock fields left out.
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import random
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from lossless import compiled
from lossless.compiled import (
    COMPILED_MODULES,
    DIGEST_FILE,
    GROUP,
    PURE_ENV,
    SourceFirst,
    source_digest,
    stale,
)

ROOT = Path(__file__).resolve().parents[2]
BUILT = (ROOT / "lossless" / DIGEST_FILE).is_file()
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


def _python(code: str, pure: bool, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != PURE_ENV}
    if pure:
        env[PURE_ENV] = "1"
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


WHICH = """
    import importlib, json
    from lossless.compiled import COMPILED_MODULES, is_compiled
    print(json.dumps({n: is_compiled(importlib.import_module(n)) for n in COMPILED_MODULES}))
"""


@pytest.mark.parametrize("pure", [True, False], ids=["source", "compiled"])
def test_every_listed_module_comes_from_one_side(pure: bool) -> None:
    """All of them compiled, or all from source: never a mix (they call each other in C)."""
    if not pure and not BUILT:
        pytest.skip("no compiled build in this checkout (make venv builds it)")
    done = _python(WHICH, pure)
    assert done.returncode == 0, done.stderr
    which = json.loads(done.stdout)
    assert set(which) == set(COMPILED_MODULES)
    assert set(which.values()) == {not pure}, which
    assert "built from other sources" not in done.stderr


def test_the_build_compiled_what_is_here() -> None:
    """`make` builds the extensions from these sources (CI must not test a stale build)."""
    if os.environ.get("CI") != "true" and not BUILT:
        pytest.skip("no compiled build in this checkout (make venv builds it)")
    assert BUILT, "make builds the compiled modules (lossless/compiled.sha256 is missing)"
    assert not stale(), "lossless/compiled.sha256 differs from the sources: rebuild (make venv)"


def _fake_tree(tmp: Path, built: bool) -> Path:
    """A tree with the listed sources and, if ``built``, a group library and the record."""
    for name in COMPILED_MODULES:
        source = tmp.joinpath(*name.split(".")).with_suffix(".py")
        source.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT.joinpath(*name.split(".")).with_suffix(".py"), source)
    if built:
        (tmp / f"{GROUP}__mypyc{SUFFIX}").write_bytes(b"")
        (tmp / "lossless" / DIGEST_FILE).write_text(source_digest(tmp) + "\n")
    return tmp


def test_an_edit_after_the_build_is_stale(tmp_path: Path) -> None:
    tree = _fake_tree(tmp_path, built=True)
    assert not stale(tree)
    engine = tree / "agent" / "twin" / "engine.py"
    engine.write_text(engine.read_text() + "\n# an edit\n")
    assert stale(tree)


def test_a_touch_without_an_edit_is_not_stale(tmp_path: Path) -> None:
    """The record is the sources' digest, not their times: a checkout or a touch keeps it."""
    tree = _fake_tree(tmp_path, built=True)
    queues = tree / "lossless" / "queues.py"
    os.utime(queues, (queues.stat().st_atime + 3600, queues.stat().st_mtime + 3600))
    assert not stale(tree)


@pytest.mark.parametrize("library", [True, False], ids=["record-only", "nothing-built"])
def test_without_a_build_there_is_nothing_stale(tmp_path: Path, library: bool) -> None:
    tree = _fake_tree(tmp_path, built=False)
    if library:
        (tree / "lossless" / DIGEST_FILE).write_text("0" * 64 + "\n")
    assert not stale(tree)


def test_the_source_finder_resolves_only_listed_modules(tmp_path: Path) -> None:
    tree = _fake_tree(tmp_path, built=False)
    finder = SourceFirst(frozenset(COMPILED_MODULES))
    spec = finder.find_spec("lossless.queues", [str(tree / "lossless")])
    assert spec is not None and spec.origin == str(tree / "lossless" / "queues.py")
    assert finder.find_spec("lossless.config", [str(tree / "lossless")]) is None
    assert finder.find_spec("lossless.queues", None) is None


def test_the_mode_is_decided_once_per_process() -> None:
    expected = compiled.pure_python_requested() or stale()
    assert expected == compiled.RUN_SOURCE


# ---------------------------------------------------------------------- the same results

RUNS = """
    import dataclasses, json, sys, tempfile
    from pathlib import Path
    from agent.twin.collectives import CollectiveSpec, run_collective
    from agent.twin.engine import Engine
    from agent.twin.flows import FlowSpec
    from agent.twin.network import load_network, star_fabric_yaml
    from agent.twin.results import run_twin

    cases = json.loads(sys.argv[1])
    tmp = Path(tempfile.mkdtemp())
    out = []

    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if not str(k).startswith("wall")}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    for case in cases:
        if case["kind"] == "collective":
            net = load_network(Path(case["fabric"]))
            spec = CollectiveSpec(case["workload"], case["ranks"], case["size"],
                                  qps_per_connection=case["qps"])
            report = run_collective(net, spec, seed=case["seed"], recovery=case["recovery"])
            out.append(strip(dataclasses.asdict(report)))
            continue
        if case.get("fabric"):
            net = load_network(Path(case["fabric"]))
        else:
            path = tmp / f"star-{len(out)}.yml"
            marking = "ecn: {marking: " + case["marking"] + "}"
            path.write_text(star_fabric_yaml(case["hosts"], case["speed"],
                                             profile=case["profile"], mtu=case["mtu"],
                                             cable_m=case["cable_m"], extra_overrides=marking))
            net = load_network(path)
        report = run_twin(net, case["scenario"], senders=case["senders"],
                          duration_s=case["duration_s"], seed=case["seed"],
                          ignore_pause=case["ignore_pause"], recovery=case["recovery"])
        out.append(strip(report.to_json()))
    from lossless.compiled import is_compiled
    import agent.twin.engine
    print(json.dumps({"compiled": is_compiled(agent.twin.engine), "reports": out}))
"""


def _cases(seed: int) -> list[dict[str, Any]]:
    """Seeded draws over what the hot path decides: speeds, cables, MTUs, profiles (PFC only,
    ECN with DCQCN), sender counts, scenarios (a storm runs the watchdog; a deaf sender drops
    on headroom), recoveries, and collectives on the two-tier pod."""
    rng = random.Random(seed)
    pod = str(ROOT / "playbooks" / "fabrics" / "pod-400g.yml")
    cases: list[dict[str, Any]] = []
    for scenario in ("incast", "all-to-all", "victim", "storm"):
        senders = rng.randint(2, 6)
        cases.append(
            {
                "kind": "scenario",
                # The victim needs a second tier: a sender on another leaf.
                "fabric": pod if scenario == "victim" or rng.random() < 0.25 else None,
                "scenario": scenario,
                "hosts": senders + 2,
                "senders": senders,
                "speed": rng.choice(["25G", "100G", "400G"]),
                "profile": rng.choice(["pfc-only", "dcqcn-paper", "nvidia-default"]),
                "mtu": rng.choice([1500, 4096, 9214]),
                "cable_m": rng.choice([1.0, 3.0, 30.0, 200.0]),
                "duration_s": rng.choice([0.5e-3, 1e-3, 2e-3]),
                "seed": rng.randint(1, 1000),
                "ignore_pause": scenario == "incast" and rng.random() < 0.5,
                "recovery": rng.choice(["go-back-n", "selective-repeat"]),
                "marking": rng.choice(["enqueue", "dequeue"]),
            }
        )
    for workload in ("allreduce", "alltoall"):
        cases.append(
            {
                "kind": "collective",
                "fabric": pod,
                "workload": workload,
                "ranks": rng.choice([4, 8]),
                "size": rng.choice([1 << 20, 3_000_000]),
                "qps": rng.choice([1, 2]),
                "seed": rng.randint(1, 1000),
                "recovery": rng.choice(["go-back-n", "selective-repeat"]),
            }
        )
    return cases


@pytest.mark.parametrize("seed", [7, 2026])
def test_compiled_and_source_give_the_same_reports(seed: int) -> None:
    if not BUILT:
        pytest.skip("no compiled build in this checkout (make venv builds it)")
    cases = _cases(seed)
    argv = json.dumps(cases)
    reports = {}
    for pure in (False, True):
        done = _python(RUNS, pure, argv)
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        assert result["compiled"] is not pure, done.stderr
        reports[pure] = result["reports"]
    for case, fast, slow in zip(cases, reports[False], reports[True], strict=True):
        assert fast == slow, case


# ---------------------------------------------------------------------- the lab switch

SWITCH_RUN = """
    import json, random, socket, struct, sys
    from lab.mgmt.testing import fake_switch_config
    from lab.vswitch import packet as pkt
    from lab.vswitch.config import parse_config
    from lab.vswitch.commands import counters_snapshot, handle_request
    from lab.vswitch.dataplane import Switch
    from lossless.compiled import is_compiled
    import lab.vswitch.dataplane

    rng = random.Random(int(sys.argv[1]))
    PORTS = ["eth1", "eth2", "eth3"]
    MACS = {p: bytes([2, 0, 0, 0, 1, i]) for i, p in enumerate(PORTS, start=1)}
    config = fake_switch_config("sw", PORTS, speed_bps=100_000_000)
    config["neighbors"] = [
        {"ip": f"198.18.{i}.2", "mac": ":".join(f"{b:02x}" for b in MACS[p]), "port": p}
        for i, p in enumerate(PORTS[:2], start=1)
    ]  # eth3's host is learned from its ARP replies
    config["routes"] = [
        {"prefix": "10.0.0.0/8", "nexthops": [{"ip": "198.18.2.2"}, {"ip": "198.18.3.2"}]}
    ]
    # ECN with min == max: marking is a threshold, no random draw.
    queue3 = {"ecn": {"min_bytes": 2000, "max_bytes": 2000, "max_probability": 100},
              "bandwidth_percent": 40}
    config["qos"] = {
        "dscp_to_tc": {"26": 3, "48": 6},
        "watchdog": {"enabled": True, "detection_ms": 20, "restoration_ms": 40, "polling_ms": 10},
        "ports": {p: {"pfc_enabled": True, "pfc_priorities": [3], "udp_dst_port_tc": {5000: 1},
                      # the last port marks at dequeue (lossless.wred), the others at enqueue
                      "queues": {"3": {**queue3, "ecn": {**queue3["ecn"],
                                                         "at_dequeue": p == PORTS[-1]}},
                                 "6": {"strict": True},
                                 "0": {"bandwidth_percent": 30}}} for p in PORTS},
    }
    config["buffer"] = {"xoff_bytes": 3000, "xon_bytes": 1500, "headroom_bytes": 3000,
                        "queue_limit_bytes": 5000}

    class Clock:
        t = 500.0
        def now(self):
            return self.t

    peers, mine = {}, []
    def open_socket(ifname):
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        a.setblocking(False)
        b.setblocking(False)
        peers[ifname] = b
        mine.extend((a, b))
        return a

    def checksum(data):
        total = sum(struct.unpack(f"!{len(data) // 2}H", data))
        while total >> 16:
            total = (total & 0xFFFF) + (total >> 16)
        return ~total & 0xFFFF

    def ipv4(port, src, dst, proto, tos, ttl, payload, dst_mac=None, frag=0x4000):
        header = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, tos, 20 + len(payload), 7,
                                       frag, ttl, proto, 0, socket.inet_aton(src),
                                       socket.inet_aton(dst)))
        struct.pack_into("!H", header, 10, checksum(bytes(header)))
        mac = dst_mac if dst_mac is not None else switch_macs[port]
        return mac + MACS[port] + b"\\x08\\x00" + bytes(header) + payload

    clock = Clock()
    switch = Switch(parse_config(config), open_socket=open_socket, clock=clock,
                    link_probe=lambda port: True)
    switch_macs = {p.name: p.mac for p in switch.ports}
    hosts = {p: f"198.18.{i}.2" for i, p in enumerate(PORTS, start=1)}
    targets = ["198.18.1.2", "198.18.2.2"] * 4 + ["10.1.2.3", "10.9.8.7"] * 2 + [
        "198.18.3.2", "198.18.3.9", "192.0.2.1", "198.18.2.1"]

    def frame(port):
        kind = rng.random()
        if kind < 0.04:  # who-has the switch's address on this port
            ip = switch.ports[PORTS.index(port)].ip_bytes
            return pkt.build_arp(1, MACS[port], socket.inet_aton(hosts[port]), pkt.ZERO_MAC, ip)
        if kind < 0.07 and port == "eth3":  # eth3's host answers (learned, maybe moved)
            mac = bytes([2, 0, 0, 0, 3, rng.choice([3, 4])])
            return pkt.build_arp(2, mac, socket.inet_aton(hosts[port]),
                                 switch_macs[port], switch.ports[2].ip_bytes)
        if kind < 0.10:  # pause (or resume) priority 3 or 0 out of this port
            quanta = rng.choice([0, 200, 0xFFFF])
            return pkt.build_pfc_single(MACS[port], rng.choice([0, 3]), quanta)
        if kind < 0.13:  # ping the switch
            icmp = bytearray(b"\\x08\\x00\\x00\\x00\\x00\\x01\\x00\\x01" + bytes(24))
            struct.pack_into("!H", icmp, 2, checksum(bytes(icmp)))
            return ipv4(port, hosts[port], rng.choice(["198.18.1.1", "198.18.3.1"]), 1, 0,
                        64, bytes(icmp))
        size = rng.choice([18, 200, 900, 1400])
        udp = struct.pack("!HHHH", rng.randrange(49152, 65536),
                          rng.choice([4791, 4791, 5000]), 8 + size, 0) + bytes(size)
        tos = (rng.choice([0, 26, 26, 48, 10]) << 2) | rng.choice([0, 1, 2, 3])
        ttl = rng.choice([64, 64, 64, 2, 1])
        dst_mac = pkt.BROADCAST_MAC if rng.random() < 0.02 else None
        frag = rng.choice([0x4000] * 9 + [0x2000])
        return ipv4(port, hosts[port], rng.choice(targets), 17, tos, ttl, udp, dst_mac, frag)

    out = []
    for step in range(int(sys.argv[2])):
        if step == 150:
            switch.set_faults([
                {"kind": "drop", "port": "eth2", "direction": "tx", "percent": 20, "seed": 3},
                {"kind": "icrc_error", "port": "eth3", "percent": 30, "seed": 4},
                {"kind": "classify", "port": "eth1", "dscp": 26, "tc": 0},
                {"kind": "delay", "port": "eth1", "ms": 2},
            ])
        if step == 300:
            switch.set_faults([])
            handle_request(switch, {"cmd": "set_qos", "qos": {"dscp_to_tc": {"26": 3}}})
        port = rng.choice(PORTS)
        for _ in range(rng.randint(1, 8)):
            peers[port].send(frame(port))
        switch._receive(next(p for p in switch.ports if p.name == port))
        clock.t += rng.choice([0.0, 0.0, 0.00002, 0.00005, 0.0002, 0.003])
        now = clock.t
        if now >= switch._timers_due:
            switch._run_timers(now)
        for p in switch.ports:
            if p.control_tx or p.backlog:
                switch._transmit(p, now)
        out.append(["timeout", switch._poll_timeout(now)])
        for name in PORTS:
            while True:
                try:
                    out.append([name, peers[name].recv(65536).hex()])
                except BlockingIOError:
                    break
    counters = counters_snapshot(switch)
    counters.pop("uptime_s")
    print(json.dumps({"compiled": is_compiled(lab.vswitch.dataplane), "frames": out,
                      "counters": counters}))
"""


@pytest.mark.parametrize("seed", [5, 31])
def test_compiled_and_source_switch_forward_the_same_frames(seed: int) -> None:
    """The lab switch driven in-process (routes with ECMP, learned neighbors, TTL expiry, pings,
    PFC in both directions, ECN marks, tail and headroom drops, the watchdog, faults): every
    frame it sends and every counter are the same whether it runs compiled or from source."""
    if not BUILT:
        pytest.skip("no compiled build in this checkout (make venv builds it)")
    results = {}
    for pure in (False, True):
        done = _python(SWITCH_RUN, pure, str(seed), "450")
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        assert result["compiled"] is not pure, done.stderr
        results[pure] = result
    fast, slow = results[False], results[True]
    assert fast["counters"] == slow["counters"]
    assert fast["frames"] == slow["frames"]
    sent = [f for f in fast["frames"] if f[0] != "timeout"]
    assert len(sent) > 300  # the run forwarded, answered and paused, not just dropped
