"""VM hosts of the lab (lab.vmhost): the NIC's rules on virtual time, qemu's stream framing,
the qemu command and guest script the lab builds, the topology label (no root, no VM)."""

from __future__ import annotations

import itertools
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from lab.addressing import build_plan
from lab.container import host_exec_commands
from lab.topology.loader import load_topology
from lab.topology.model import TopologyError
from lab.vmhost import nic as vmnic
from lab.vmhost.vm import MGMT_GUEST, SKIPPED_MODULES, VmHost, guest_script, sshd_config
from lab.vmhost.vm import _adapt as adapt_qemu_command
from lab.vswitch.packet import build_pfc, build_pfc_single, wire_time

REPO = Path(__file__).resolve().parents[2]
RDMA_LAB = REPO / "containerlab" / "roce-rdma.clab.yml"
SPEED = 10_000_000.0
HOST_MAC = bytes.fromhex("0200c6120009")
GW_MAC = bytes.fromhex("0200c6120008")


def ipv4_frame(dscp: int, size: int = 1000, vlan: bool = False) -> bytes:
    """An IPv4/UDP frame of ``size`` bytes with ``dscp`` (payload zeros: the NIC reads only
    the ToS byte)."""
    tag = bytes.fromhex("8100") + (3 << 13).to_bytes(2, "big") if vlan else b""
    header = GW_MAC + HOST_MAC + tag + bytes.fromhex("0800")
    ip = bytes([0x45, dscp << 2 | 0b10]) + bytes(18)
    return header + ip + bytes(size - len(header) - len(ip))


# --------------------------------------------------------------------------- classification


@pytest.mark.parametrize(
    ("frame", "priority"),
    [
        (ipv4_frame(26), 3),  # RoCE (nvidia-default DSCP 26) -> 3, mlx5's default map
        (ipv4_frame(48), 6),  # CNPs (DSCP 48) -> 6
        (ipv4_frame(0), 0),
        (ipv4_frame(63), 7),
        (ipv4_frame(26, vlan=True), 3),  # DSCP still decides behind an 802.1Q tag
        (GW_MAC + HOST_MAC + bytes.fromhex("0806") + bytes(46), 0),  # ARP
    ],
)
def test_trust_dscp_priority_of_a_frame(frame: bytes, priority: int) -> None:
    assert vmnic.frame_priority(frame, vmnic.mlx5_default_dscp_map()) == priority


def test_dscp_map_option_overrides_the_default() -> None:
    mapping = vmnic._dscp_map("26:5,48:7")
    assert mapping[26] == 5 and mapping[48] == 7 and mapping[24] == 3
    with pytest.raises(Exception, match="DSCP:PRIORITY"):
        vmnic._dscp_map("64:1")


# --------------------------------------------------------------------------- line rate


def drain(port: vmnic.NicPort, start: float, until: float) -> list[tuple[float, bytes]]:
    """Run the NIC's transmit side on virtual time: (time sent, frame) pairs."""
    sent = []
    now = start
    while now <= until:
        frame = port.next_frame(now)
        if frame is not None:
            sent.append((now, frame))
            continue
        wake = port.wake_at(now)
        if wake is None:
            break
        now = max(wake, now + 1e-9)
    return sent


def test_frames_leave_at_the_ports_line_rate() -> None:
    port = vmnic.NicPort(SPEED)
    for _ in range(5):
        port.from_vm(ipv4_frame(26, 1000))
    times = [t for t, _ in drain(port, 0.0, 1.0)]
    gap = wire_time(1000, SPEED)  # (1000 + 20) * 8 / 10e6 = 816 us
    assert times[0] == 0.0
    for earlier, later in itertools.pairwise(times):
        assert later - earlier == pytest.approx(gap, abs=vmnic.TX_LOOKAHEAD_S)
    assert port.counters.tx_packets == 5 and port.counters.tx_prio_packets[3] == 5


def test_the_transmit_buffer_pushes_back_when_full() -> None:
    port = vmnic.NicPort(SPEED, tx_buffer_bytes=3000)
    assert port.tx_room() == 3000
    port.from_vm(ipv4_frame(26, 1000))
    port.from_vm(ipv4_frame(26, 1000))
    assert port.tx_room() == 1000
    port.from_vm(ipv4_frame(26, 1000))
    assert port.tx_room() == 0  # the process stops reading the VM's socket
    port.next_frame(0.0)
    assert port.tx_room() == 1000


# --------------------------------------------------------------------------- PFC


def test_a_pause_holds_its_priority_for_the_quanta_and_lets_others_pass() -> None:
    port = vmnic.NicPort(SPEED)
    quanta = 1000  # 1000 * 512 bits at 10 Mb/s = 51.2 ms
    port.from_wire(build_pfc_single(GW_MAC, 3, quanta), now=0.0)
    port.from_vm(ipv4_frame(26))  # RoCE, priority 3: held
    port.from_vm(ipv4_frame(48))  # CNP, priority 6: not paused
    sent = drain(port, 0.0, 1.0)
    assert [vmnic.frame_priority(f, port.dscp_map) for _, f in sent] == [6, 3]
    assert sent[0][0] == 0.0
    assert sent[1][0] == pytest.approx(quanta * 512 / SPEED)
    assert port.counters.rx_pause_frames[3] == 1
    stats = port.ethtool(now=1.0)
    assert stats["rx_prio3_pause"] == 1
    assert stats["rx_prio3_pause_duration"] == round(quanta * 512 / SPEED * 1e6)
    assert stats["rx_prio6_pause"] == 0


@pytest.mark.parametrize(
    ("frames", "released_at"),
    [
        # XOFF then XON 10 ms later: released by the XON, not the timer
        ([(0.0, 3, 0xFFFF), (0.010, 3, 0)], 0.010),
        # a later XOFF replaces the running timer (a new deadline, not an extension)
        ([(0.0, 3, 1000), (0.020, 3, 100)], 0.020 + 100 * 512 / SPEED),
        # a pause for priority 4 does not hold priority 3
        ([(0.0, 4, 0xFFFF)], 0.0),
    ],
)
def test_pfc_rules_of_the_nic(frames: list[tuple[float, int, int]], released_at: float) -> None:
    port = vmnic.NicPort(SPEED)
    for at, priority, quanta in frames:
        port.from_wire(build_pfc_single(GW_MAC, priority, quanta), now=at)
    port.from_vm(ipv4_frame(26))
    start = max(at for at, _, _ in frames)
    sent = drain(port, start, 5.0)
    assert len(sent) == 1
    assert sent[0][0] == pytest.approx(released_at, abs=1e-6)


def test_pfc_frames_end_at_the_nic_and_bits_not_enabled_are_ignored() -> None:
    port = vmnic.NicPort(SPEED)
    quanta = [0xFFFF] * 8
    port.from_wire(build_pfc(GW_MAC, quanta, class_enable=1 << 3), now=0.0)
    assert not port.to_vm  # never handed to the VM
    assert port.counters.rx_pause_frames == [0, 0, 0, 1, 0, 0, 0, 0]
    assert port.pause[3].is_paused(0.001) and not port.pause[5].is_paused(0.001)


def test_frames_for_the_vm_are_bounded_and_discards_counted() -> None:
    port = vmnic.NicPort(SPEED, to_vm_buffer_bytes=2500)
    for _ in range(3):
        port.from_wire(ipv4_frame(26, 1000), now=0.0)
    assert len(port.to_vm) == 2
    assert port.counters.rx_discards == 1
    assert port.ethtool(0.0)["rx_discards_phy"] == 1


# --------------------------------------------------------------------------- qemu's stream


def test_stream_framing_round_trip_across_arbitrary_reads() -> None:
    frames = [ipv4_frame(26, size) for size in (60, 1000, 9014)]
    stream = b"".join(vmnic.encode(f) for f in frames)
    decoder = vmnic.StreamDecoder()
    got: list[bytes] = []
    for i in range(0, len(stream), 777):  # reads that split headers and frames
        got += decoder.feed(stream[i : i + 777])
    assert got == frames
    assert not decoder.buffer


@pytest.mark.parametrize("length", [0, vmnic.MAX_FRAME_BYTES + 1, 0xFFFFFFFF])
def test_stream_refuses_impossible_lengths(length: int) -> None:
    with pytest.raises(ValueError, match="stream frame length"):
        vmnic.StreamDecoder().feed(vmnic.STREAM_HEADER.pack(length) + b"x" * 8)


# --------------------------------------------------------------------------- the VM


def vm_host(tmp_path: Path) -> VmHost:
    import ipaddress

    return VmHost(
        name="h1",
        directory=tmp_path / "h1-vm",
        mac="02:00:c6:12:00:09",
        address=ipaddress.IPv4Interface("198.18.0.9/31"),
        gateway=ipaddress.IPv4Address("198.18.0.8"),
        gateway_mac="02:00:c6:12:00:08",
        mtu=9000,
        nic_socket=tmp_path / "h1-vm" / "nic.sock",
        ssh_port=40022,
        index=1,
    )


# The command virtme-run 1.42 printed on this machine (--dry-run --show-command), shortened to
# the options the lab changes or keeps.
VIRTME_COMMAND = (
    "/usr/bin/qemu-system-x86_64 -name h1 -m 512M "
    "-fsdev local,id=virtfs5,path=/,security_model=none,readonly=on,multidevs=remap "
    "-device virtio-9p-pci,fsdev=virtfs5,mount_tag=/dev/root -machine q35 -cpu max "
    "-parallel none -net none -smp 1 -vga none -display none -serial chardev:console "
    "-chardev file,id=console,path=/dev/null -chardev stdio,id=stdin,signal=on,mux=off "
    "-device virtio-serial-pci -device virtserialport,name=virtme.stdin,chardev=stdin "
    "-chardev file,id=ret,path=/tmp/virtme_retlwjim_i6 -no-reboot "
    "-kernel /boot/vmlinuz-6.1.0-56-amd64 -append 'virtme_hostname=h1 console=ttyS0 quiet "
    "loglevel=0 panic=-1 virtme.exec=`c2g=` init=/x/virtme-ng-init' -initrd /s/h1-vm/initramfs"
)


def test_the_qemu_command_is_virtmes_made_the_labs(tmp_path: Path) -> None:
    vm = vm_host(tmp_path)
    argv = adapt_qemu_command(shlex.split(VIRTME_COMMAND), vm)
    pairs = dict(itertools.pairwise(argv))
    assert pairs["-cpu"] == "qemu64"  # "max" makes udev load KVM in the guest
    assert f"modprobe.blacklist={','.join(SKIPPED_MODULES)}" in pairs["-append"]
    assert " mitigations=off " in pairs["-append"]  # the lab guest: no emulated mitigations
    assert "panic=-1" in pairs["-append"] and "virtme.exec=`c2g=`" in pairs["-append"]
    chardevs = [b for a, b in itertools.pairwise(argv) if a == "-chardev"]
    assert "null,id=stdin" in chardevs  # no terminal
    assert f"file,id=console,path={vm.console_log}" in chardevs
    assert f"file,id=ret,path={vm.directory / 'exit-code'}" in chardevs
    netdevs = [b for a, b in itertools.pairwise(argv) if a == "-netdev"]
    assert netdevs == [
        f"stream,id=data,server=off,addr.type=unix,addr.path={vm.nic_socket}",
        "user,id=mgmt,restrict=on,net=198.19.255.0/24,host=198.19.255.2,"
        f"hostfwd=tcp:127.0.0.1:40022-{MGMT_GUEST}:22",
    ]
    devices = [b for a, b in itertools.pairwise(argv) if a == "-device"]
    assert "virtio-net-pci,netdev=data,mac=02:00:c6:12:00:09" in devices
    assert f"virtio-net-pci,netdev=mgmt,mac={vm.mgmt_mac}" in devices


def test_the_guest_script_is_valid_shell_and_sets_the_host_up(tmp_path: Path) -> None:
    vm = vm_host(tmp_path)
    script = guest_script(vm)
    checked = subprocess.run(["sh", "-n"], input=script, text=True, capture_output=True)
    assert checked.returncode == 0, checked.stderr
    for line in (
        "data=$(netdev_with_mac 02:00:c6:12:00:09)",
        "ip link set dev eth1 mtu 9000 up",
        "ip addr add 198.18.0.9/31 dev eth1",
        "ip neigh replace 198.18.0.8 lladdr 02:00:c6:12:00:08 dev eth1 nud permanent",
        "tc qdisc replace dev eth1 root pfifo limit 1000",
        "rdma link add rxe0 type rxe netdev eth1",
        'echo ready >"$D/ready"',
    ):
        assert line in script.splitlines(), line
    config = sshd_config(vm)
    assert f"ListenAddress {MGMT_GUEST}" in config
    assert "PasswordAuthentication no" in config and "PermitRootLogin prohibit-password" in config


# --------------------------------------------------------------------------- topology


def test_the_rdma_lab_has_three_vm_hosts_each_on_one_leaf_port() -> None:
    topology = load_topology(RDMA_LAB)
    assert {n: node.rdma for n, node in topology.nodes.items() if node.rdma} == {
        "h1": "rxe", "h2": "rxe", "h3": "rxe",
    }  # fmt: skip
    assert topology.nodes["h4"].rdma is None and not topology.nodes["leaf1"].is_vm
    plan = build_plan(topology)
    raw = yaml.safe_load(RDMA_LAB.read_text())
    for host in plan.hosts():  # the containerlab exec lines still match the address plan
        assert raw["topology"]["nodes"][host.name]["exec"] == host_exec_commands(plan, host.name)


_SW = "kind: linux, image: roce-vswitch:latest"
_HOST = "kind: linux, image: alpine:3"


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        ("name: x\ntopology:\n  nodes:\n    s1: {" + _SW + ", labels: {roce.lab/rdma: rxe}}\n"
         "    h1: {" + _HOST + "}\n  links:\n    - endpoints: [s1:eth1, h1:eth1]\n",
         "topology.nodes.s1.labels.roce.lab/rdma", "only applies to hosts"),
        ("name: x\ntopology:\n  nodes:\n    s1: {" + _SW + "}\n"
         "    h1: {" + _HOST + ", labels: {roce.lab/rdma: mlx5}}\n  links:\n"
         "    - endpoints: [s1:eth1, h1:eth1]\n",
         "topology.nodes.h1.labels.roce.lab/rdma", "'mlx5' is not an RDMA stack the lab can run"),
        ("name: x\ntopology:\n  nodes:\n    s1: {" + _SW + "}\n"
         "    h1: {" + _HOST + ", labels: {roce.lab/rdma: rxe}}\n  links:\n"
         "    - endpoints: [s1:eth1, h1:eth1]\n    - endpoints: [s1:eth2, h1:eth2]\n",
         "topology.nodes.h1", "needs exactly one link, to a lab switch; it has 2"),
    ],
)  # fmt: skip
def test_bad_rdma_labels_are_named(tmp_path: Path, text: str, field: str, message: str) -> None:
    path = tmp_path / "t.clab.yml"
    path.write_text(text)
    with pytest.raises(TopologyError) as caught:
        load_topology(path)
    assert any(p.field == field and message in p.message for p in caught.value.problems), [
        (p.field, p.message) for p in caught.value.problems
    ]


def test_the_fabric_file_reaches_vm_hosts_over_ssh_with_their_rdma_device(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What `lab up` writes for a VM host passes the agent's loader: SSH on the forwarded
    port as root with the lab's key, the pinned host key, the port's RDMA device."""
    from agent.intent.loader import load_fabric
    from lab.addressing import fabric_document
    from lab.runtime import _vm_host_device

    monkeypatch.setenv("ROCE_AGENT_PROFILES", str(REPO / "playbooks" / "profiles"))
    plan = build_plan(load_topology(RDMA_LAB))
    managed = [p.name for p in plan.nodes.values() if p.node.is_switch or p.node.is_vm]
    document = fabric_document(plan, {name: 20001 + n for n, name in enumerate(managed)})
    key_line = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICnlQec6Dh+sSUB7R/lZyIPQhpxPzHoAO6xWKoIYm3yi"
    for device in document["devices"]:
        if plan.nodes[device["name"]].node.is_vm:
            vm_dir = tmp_path / f"{device['name']}-vm"
            vm_dir.mkdir()
            (vm_dir / "ssh_host_ed25519_key.pub").write_text(key_line + " roce-lab\n")
            port = 40021 + int(device["name"][1:])
            info = {"vm_dir": str(vm_dir), "mgmt_host": "127.0.0.1", "mgmt_port": port}
            _vm_host_device(device, info)
    path = tmp_path / "fabric.yml"
    path.write_text(yaml.safe_dump(document))
    intent = load_fabric(path).intent
    h1 = intent.device("h1")
    assert h1 is not None and h1.netns is None
    assert (h1.host, h1.port, h1.username) == ("127.0.0.1", 40022, "root")
    assert h1.host_key == [key_line]
    assert h1.ports[0].rdma_device == "rxe0" and h1.ports[0].rdma_name_and_port == ("rxe0", 1)
    h4 = intent.device("h4")
    assert h4 is not None and h4.netns == "clab-roce-rdma-h4" and h4.ports[0].rdma_device is None
