"""The lab switch's SONiC shell: prompts as netmiko ``linux`` expects them, heredocs, sudo,
bash's answers, and the CONFIG_DB reads the agent does (``sonic-cfggen``)."""

from __future__ import annotations

import json

import pytest

from agent.device.lldp import lldpctl_neighbors, sonic_ports
from lab.mgmt.lldp import LldpPeer, PortLink
from lab.mgmt.sonic.lldp import lldpctl_json
from tests.unit.sonic_lab_helpers import LabSonic, run

# (input line, what the shell prints)
LINES = [
    ("frobnicate --now", "-bash: frobnicate: command not found"),
    ("echo hello world", "hello world"),
    ("hostname", "leaf1"),
    ("whoami", "admin"),
    ("sudo whoami", "root"),
    ("sudo -n whoami", "root"),
    ("sudo -u nobody whoami", "sudo: unknown user nobody"),
    ("cat /tmp/none", "cat: /tmp/none: No such file or directory"),
    ("rm /tmp/none", "rm: cannot remove '/tmp/none': No such file or directory"),
    ("rm -f /tmp/none", ""),
    ("", ""),
    ("config list-checkpoints", "Root privileges are required for this operation"),
    ("sudo config list-checkpoints", "[]"),
    ("sudo config frob", "Error: No such command 'frob'."),
    ("sudo systemctl stop none.timer", "Failed to stop none.timer: Unit none.timer not loaded."),
    ("systemctl stop x.timer", "Failed to stop x.timer: Interactive authentication required."),
    ("systemctl list-timers --plain --no-legend", ""),
]


@pytest.mark.parametrize(("line", "expected"), LINES, ids=[line or "empty" for line, _ in LINES])
def test_shell_answers(line: str, expected: str) -> None:
    async def scenario() -> str:
        lab = await LabSonic().start()
        output: str = await lab.run(line)
        return output

    assert run(scenario()).splitlines()[-1:] == expected.splitlines()[-1:]


def test_prompts_heredoc_and_exit() -> None:
    async def scenario() -> None:
        lab = await LabSonic().start()
        shell = lab.shell
        assert shell.prompt() == "admin@leaf1:~$ "
        assert await shell.execute("cat > /tmp/p.json <<'ROCE_EOF'") == ""
        assert shell.prompt() == "> "  # bash's PS2
        assert await shell.execute('[{"op": "add",') == ""
        assert await shell.execute("  $HOME stays literal}]") == ""
        assert await shell.execute("ROCE_EOF") == ""
        assert shell.prompt() == "admin@leaf1:~$ "
        assert await shell.execute("cat /tmp/p.json") == '[{"op": "add",\n  $HOME stays literal}]'
        other = lab.switch.new_terminal("admin", False, "02:00:00:00:00:01")
        assert await other.execute("cat /tmp/p.json") != ""  # one /tmp per switch
        assert await shell.execute("rm -f /tmp/p.json") == ""
        assert await other.execute("cat /tmp/p.json") == (
            "cat: /tmp/p.json: No such file or directory"
        )
        assert await shell.execute("exit") == "logout"
        assert shell.closed

    run(scenario())


def test_cfggen_prints_the_config_db_as_sonic_cfggen_does() -> None:
    async def scenario() -> None:
        lab = await LabSonic().start()
        text = await lab.run("sudo sonic-cfggen -d --print-data")
        data = json.loads(text)
        assert data == lab.switch.db
        assert text.startswith('{\n    "BUFFER_PG": {')  # indent 4, tables in natural order
        assert list(data["PORT"]) == ["Ethernet0", "Ethernet4"]
        assert data["PORT_QOS_MAP"]["Ethernet0"]["pfc_enable"] == "3,4"
        assert data["DSCP_TO_TC_MAP"]["AZURE"]["26"] == "1"  # stock AZURE: DSCP 26 is lossy
        ports = sonic_ports(json.loads(await lab.run("sonic-cfggen -d --var-json PORT")))
        assert {n: (p.speed_bps, p.mtu) for n, p in ports.items()} == {
            "Ethernet0": (10_000_000, 9100),
            "Ethernet4": (10_000_000, 9100),
        }

    run(scenario())


def test_lldpctl_json_reads_as_the_agent_parses_it() -> None:
    switch_peer = LldpPeer(
        "spine1", "Ethernet1", "02:00:00:00:01:01", "02:00:00:00:01:00", "switch"
    )
    host_peer = LldpPeer("h1", "eth1", "02:00:00:00:02:01", "02:00:00:00:02:01", "host")
    text = lldpctl_json(
        [
            ("Ethernet0", PortLink(9000, switch_peer)),
            ("Ethernet4", PortLink(9000, host_peer)),
            ("Ethernet8", None),
        ]
    )
    neighbours = lldpctl_neighbors(json.loads(text))
    assert [(n.local_port, n.system_name, n.port, n.forwards) for n in neighbours] == [
        ("Ethernet0", "spine1", "Ethernet1", True),
        ("Ethernet4", "h1", "eth1", False),
    ]
    single = lldpctl_neighbors(json.loads(lldpctl_json([("Ethernet0", PortLink(9000, host_peer))])))
    assert [n.local_port for n in single] == ["Ethernet0"]
