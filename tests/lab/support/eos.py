"""The lab switches over SSH, reached as the agent reaches them (netmiko ``arista_eos``) with the
credentials the lab took at ``up``: independent of the agent's own connection code."""

from __future__ import annotations

from typing import Any

from netmiko import ConnectHandler

from tests.lab.support.labs import Lab


def connect(lab: Lab, switch: str) -> Any:
    """A netmiko session to ``switch`` (``with connect(...) as session`` disconnects it)."""
    node = lab.status["nodes"][switch]
    credentials = lab.status["credentials"]
    return ConnectHandler(
        device_type="arista_eos",
        host=node["mgmt_host"],
        port=node["mgmt_port"],
        username=credentials["username"],
        password=credentials["password"],
        fast_cli=True,
    )


def configure(lab: Lab, switch: str, lines: list[str], refused: str = "%") -> str:
    """Send configuration ``lines``; what the switch printed, which must not hold ``refused``
    (EOS starts its error lines with ``%``)."""
    with connect(lab, switch) as session:
        output = str(session.send_config_set(lines))
    assert refused not in output, output
    return output


def shows(lab: Lab, switch: str, *commands: str) -> list[str]:
    """Several show commands on one login (each login costs an SSH handshake)."""
    with connect(lab, switch) as session:
        return [str(session.send_command(command)) for command in commands]


def show(lab: Lab, switch: str, command: str = "show running-config") -> str:
    [output] = shows(lab, switch, command)
    return output
