"""gNMI in the lab's plumbing: the ``python -m lab.mgmt`` process serves it (TLS, the SSH
login, ready only once bound, its faults by signal), and ``lab up``'s records give each switch
an endpoint -- a port of its own, the lab's CA and a certificate for its name -- which
``lab status -o json`` and the fabric file the agent loads expose. No root: the processes
run on a fake control socket, and the lab is recorded, not built.
"""

from __future__ import annotations

import datetime
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from cryptography import x509
from pygnmi.spec.v080 import gnmi_pb2, gnmi_pb2_grpc

from lab import runtime
from lab.addressing import build_plan
from lab.mgmt.__main__ import UsageError, _gnmi_listener, _parse_args
from lab.mgmt.gnmi import paths
from lab.mgmt.launcher import (
    LISTENING_FILE,
    ManagementOptions,
    PortTaken,
    set_faults,
    start_management,
    stop_management,
)
from lab.topology.loader import load_topology
from tests.lab.support.loopback import free_port
from tests.unit.control_socket import FakeControlSocket
from tests.unit.lab_gnmi_support import (
    PASSWORD,
    USER,
    Pki,
    dataplane,
    make_pki,
)

REPO = Path(__file__).resolve().parents[2]
MIXED = REPO / "containerlab" / "roce-leafspine-mixed.clab.yml"
PFC3 = "COUNTERS/Ethernet0/SAI_PORT_STAT_PFC_3_RX_PKTS"


def options(
    state: Path, control: Path, pki: Pki | None, nos: str = "sonic", gnmi_port: int | None = None
) -> ManagementOptions:
    return ManagementOptions(
        "leaf1", "127.0.0.1", free_port(), str(control), state, USER, PASSWORD,
        ["eth1", "eth2"], nos=nos, gnmi_port=gnmi_port,
        gnmi_cert=pki.server.cert if pki else None, gnmi_key=pki.server.key if pki else None,
    )  # fmt: skip


def test_management_options_hand_the_gnmi_options_over(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    without = options(tmp_path, tmp_path / "c.sock", None).argv(tmp_path / "pw")
    assert without[-2:] == ["--gnmi", "off"]
    argv = options(tmp_path, tmp_path / "c.sock", pki, gnmi_port=50000).argv(tmp_path / "pw")
    assert argv[argv.index("--gnmi-cert") + 1] == str(pki.server.cert)
    assert argv[argv.index("--gnmi-key") + 1] == str(pki.server.key)
    assert argv[argv.index("--gnmi-listen") + 1] == "127.0.0.1:50000"
    default = options(tmp_path, tmp_path / "c.sock", pki).argv(tmp_path / "pw")
    assert "--gnmi-listen" not in default and "--gnmi" not in default


@pytest.mark.parametrize(("nos", "port"), [("sonic", 8080), ("nvue", 9339), ("eos", 6030)])
def test_gnmi_listens_on_the_nos_port_unless_told(tmp_path: Path, nos: str, port: int) -> None:
    pki = make_pki(tmp_path)
    tls = ["--gnmi-cert", str(pki.server.cert), "--gnmi-key", str(pki.server.key)]
    base = ["--name", "x", "--listen", "127.0.0.2:22", "--control", "c", "--state-dir", "s",
            "--nos", nos, *tls]  # fmt: skip
    listener = _gnmi_listener(_parse_args(base), "127.0.0.2")
    assert listener is not None and (listener.host, listener.port) == ("127.0.0.2", port)
    told = _gnmi_listener(_parse_args([*base, "--gnmi-listen", "127.0.0.3:7000"]), "127.0.0.2")
    assert told is not None and (told.host, told.port) == ("127.0.0.3", 7000)
    assert _gnmi_listener(_parse_args([*base, "--gnmi", "off"]), "127.0.0.2") is None
    with pytest.raises(UsageError, match="loopback"):
        _gnmi_listener(_parse_args([*base, "--gnmi-listen", "10.0.0.1:7000"]), "127.0.0.2")


def test_nxos_has_no_gnmi_server() -> None:
    args = _parse_args(["--name", "x", "--listen", "127.0.0.1:22", "--control", "c",
                        "--state-dir", "s", "--nos", "nxos"])  # fmt: skip
    assert _gnmi_listener(args, "127.0.0.1") is None  # no certificate needed either


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ([], "--gnmi-cert and --gnmi-key"),
        (["--gnmi-cert", "/nonexistent.pem", "--gnmi-key", "/nonexistent.key"], "--gnmi-cert"),
    ],
)
def test_gnmi_without_a_usable_certificate_is_a_usage_error(
    tmp_path: Path, extra: list[str], words: str
) -> None:
    password = tmp_path / "pw"
    password.write_text("x\n")
    proc = subprocess.run(
        [sys.executable, "-m", "lab.mgmt", "--name", "x", "--listen", "127.0.0.1:2299",
         "--control", "/nonexistent", "--state-dir", str(tmp_path / "s"),
         "--password-file", str(password), *extra],
        capture_output=True, text=True, cwd=REPO, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert words in proc.stderr


def _stub(port: int, pki: Pki) -> gnmi_pb2_grpc.gNMIStub:
    credentials = grpc.ssl_channel_credentials(root_certificates=pki.ca.cert.read_bytes())
    channel = grpc.secure_channel(
        f"127.0.0.1:{port}", credentials, options=[("grpc.ssl_target_name_override", "leaf1")]
    )
    return gnmi_pb2_grpc.gNMIStub(channel)


def _get(stub: gnmi_pb2_grpc.gNMIStub, password: str = PASSWORD) -> Any:
    request = gnmi_pb2.GetRequest(
        prefix=gnmi_pb2.Path(target="COUNTERS_DB"),
        path=[paths.to_proto(paths.parse(PFC3))],
        encoding=gnmi_pb2.Encoding.JSON_IETF,
    )
    return stub.Get(request, metadata=(("username", USER), ("password", password)), timeout=10)


def _code(call: Any) -> grpc.StatusCode:
    try:
        call()
    except grpc.RpcError as exc:
        return exc.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK


def _until(predicate: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_the_process_serves_gnmi_with_the_ssh_login_and_its_faults(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    dp = dataplane(["eth1", "eth2"])
    dp.counters_snapshot["ports"]["eth1"]["pfc"]["rx_xoff"][3] = 12
    control = FakeControlSocket(tmp_path / "c.sock", dp)
    state, gnmi_port = tmp_path / "state", free_port()
    try:
        proc = start_management(options(state, control.path, pki, gnmi_port=gnmi_port))
        try:
            pid, _, listening_gnmi = map(int, (state / LISTENING_FILE).read_text().split())
            assert (pid, listening_gnmi) == (proc.pid, gnmi_port)
            stub = _stub(gnmi_port, pki)
            answer = _get(stub)
            assert answer.notification[0].update[0].val.string_val == "12"
            assert _code(lambda: _get(stub, "wrong")) == grpc.StatusCode.UNAUTHENTICATED
            set_faults(state, proc.pid, gnmi={"refuse": True})
            assert _until(lambda: _code(lambda: _get(stub)) == grpc.StatusCode.UNAVAILABLE)
            set_faults(state, proc.pid)
            assert _until(lambda: _code(lambda: _get(stub)) == grpc.StatusCode.OK)
        finally:
            assert stop_management(proc) == 0
    finally:
        control.close()


def test_a_taken_gnmi_port_is_a_taken_port(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    control = FakeControlSocket(tmp_path / "c.sock", dataplane(["eth1", "eth2"]))
    squatter = socket.create_server(("127.0.0.1", 0))
    try:
        taken = squatter.getsockname()[1]
        with pytest.raises(PortTaken, match="exited with 3"):
            start_management(options(tmp_path / "s", control.path, pki, gnmi_port=taken))
    finally:
        squatter.close()
        control.close()


def test_an_nxos_switch_is_ready_without_gnmi(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    control = FakeControlSocket(tmp_path / "c.sock", dataplane(["eth1", "eth2"]))
    state = tmp_path / "state"
    try:
        proc = start_management(options(state, control.path, pki, nos="nxos"))
        try:
            assert len((state / LISTENING_FILE).read_text().split()) == 2
        finally:
            stop_management(proc)
    finally:
        control.close()


# ----------------------------------------------------------------------------- lab up's records


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[runtime.LabState, Any]:
    """The mixed-NOS lab recorded as ``up`` records it, its certificates and fabric file made
    (nothing started)."""
    topology = load_topology(MIXED)
    plan = build_plan(topology, "gn")
    directory = tmp_path / "gn"
    directory.mkdir()
    state = runtime._new_state(plan, topology, directory)
    state.save()
    runtime._make_gnmi_certs(state)
    runtime._write_fabric_file(state, plan)
    state.data["phase"] = "up"
    state.save()
    return state, plan


def test_every_switch_but_nxos_gets_its_own_gnmi_endpoint(
    recorded: tuple[runtime.LabState, Any],
) -> None:
    state, _ = recorded
    nodes = state.data["nodes"]
    served = {n: i for n, i in nodes.items() if "gnmi_port" in i}
    assert sorted(served) == ["leaf1", "leaf2", "spine1"]  # spine2 speaks NX-OS
    ports = [i["mgmt_port"] for i in nodes.values() if "mgmt_port" in i]
    ports += [i["gnmi_port"] for i in served.values()]
    assert len(ports) == len(set(ports))  # one loopback address: no port twice
    status = runtime.status("gn", state.directory, probe=False)["nodes"]
    for name, info in served.items():
        assert status[name]["gnmi"] == f"127.0.0.1:{info['gnmi_port']}"
        assert status[name]["gnmi_ca"] == str(state.directory / "gnmi-ca.pem")
        assert status[name]["gnmi_server_name"] == name
    assert "gnmi" not in status["spine2"] and "gnmi" not in status["h1"]


def test_the_lab_ca_signs_each_switch_certificate_for_its_name(
    recorded: tuple[runtime.LabState, Any],
) -> None:
    state, _ = recorded
    ca = x509.load_pem_x509_certificate((state.directory / "gnmi-ca.pem").read_bytes())
    assert ca.not_valid_after_utc - ca.not_valid_before_utc < datetime.timedelta(days=8)
    keys = [state.directory / "gnmi-ca.key"]
    for name in ("leaf1", "leaf2", "spine1"):
        info = state.data["nodes"][name]
        cert = x509.load_pem_x509_certificate(Path(info["gnmi_cert"]).read_bytes())
        cert.verify_directly_issued_by(ca)
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert san.get_values_for_type(x509.DNSName) == [name]
        assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
        keys.append(Path(info["gnmi_key"]))
    assert all(os.stat(k).st_mode & 0o777 == 0o600 for k in keys)
    recorded_files = set(state.files()) | {f"{d}/" for d in state.dirs()}
    assert {"gnmi-ca.pem", "gnmi-ca.key", "leaf1-mgmt/"} <= recorded_files  # down removes them


def test_the_fabric_file_gives_the_agent_each_gnmi_endpoint(
    recorded: tuple[runtime.LabState, Any],
) -> None:
    from agent.intent.loader import load_fabric

    state, _ = recorded
    fabric = state.directory / "fabric.yml"
    devices = {d["name"]: d for d in yaml.safe_load(fabric.read_text())["devices"]}
    for name in ("leaf1", "leaf2", "spine1"):
        port = state.data["nodes"][name]["gnmi_port"]
        assert devices[name]["gnmi"] == {
            "port": port,
            "tls": {"ca": str(state.directory / "gnmi-ca.pem"), "server_name": name},
        }
    assert "gnmi" not in devices["spine2"] and "gnmi" not in devices["h1"]
    intent = load_fabric(fabric).intent  # the agent's own loader takes it
    loaded = {d.name: d for d in intent.devices}
    gnmi = loaded["leaf1"].gnmi
    assert gnmi is not None and gnmi.port == state.data["nodes"]["leaf1"]["gnmi_port"]
    assert gnmi.tls.server_name == "leaf1"
