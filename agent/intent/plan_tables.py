"""Human-readable renderings (rich tables) of plans; JSON comes from the models themselves.

Every cell and title goes through :func:`_text`: rich would read ``[red]`` in a name as markup,
and a terminal would obey an escape sequence, so input-derived text is escaped and plain.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from agent.errors import printable
from agent.intent.plan import DevicePlan, Plan
from agent.intent.units import format_size


def _text(value: object) -> Text:
    return Text(printable(str(value)))


def _row(table: Table, *cells: object) -> None:
    table.add_row(*(_text(cell) for cell in cells))


def _dscp_text(device: DevicePlan) -> str:
    pairs = ", ".join(f"{d}→{p}" for d, p in device.dscp_to_priority.items())
    return f"{pairs}; others→{device.default_priority}"


def _device_table(plan: Plan) -> Table:
    table = Table(
        title=_text(f"Plan for fabric {plan.fabric} (profile {plan.profile}, mode {plan.mode})")
    )
    for column in (
        "device",
        "platform",
        "role",
        "trust",
        "DSCP→priority",
        "PFC",
        "watchdog",
        "ETS",
    ):
        table.add_column(column)
    for device in plan.devices:
        watchdog = device.watchdog
        _row(
            table,
            device.name,
            device.platform,
            device.role,
            device.trust,
            _dscp_text(device),
            ",".join(map(str, device.pfc_priorities)) or "off",
            "-"
            if device.role == "host"
            else f"{watchdog.action} {watchdog.detection_ms}/{watchdog.restoration_ms} ms"
            if watchdog.enabled
            else "off",
            "-"
            if device.role == "host"
            else "strict "
            + ",".join(map(str, device.ets.strict))
            + "; "
            + " ".join(f"{q}:{w}%" for q, w in device.ets.weights.items()),
        )
    return table


def _port_table(device: DevicePlan) -> Table:
    table = Table(title=_text(f"{device.name} ports"))
    for column in (
        "port",
        "speed",
        "cable",
        "mtu",
        "peer",
        "PFC",
        "xoff",
        "xon",
        "size",
        "pause at",
        "ECN queue: min-max @p",
    ):
        table.add_column(column, justify="right" if column in ("xoff", "xon", "size") else "left")
    for port in device.ports:
        headroom = next(iter(port.headroom.values()), None)
        _row(
            table,
            port.name,
            port.speed,
            f"{port.cable_m:g} m",
            str(port.mtu),
            port.peer or "-",
            ",".join(map(str, port.pfc_priorities)) or "off",
            str(headroom.xoff) if headroom else "-",
            str(headroom.xon) if headroom else "-",
            str(headroom.size) if headroom else "-",
            format_size(headroom.pause_threshold) if headroom else "-",
            "; ".join(
                f"{e.queue}: {format_size(e.min_bytes)}-{format_size(e.max_bytes)}"
                f" @{e.max_probability}%"
                for e in port.ecn
            )
            or "off",
        )
    return table


def _nic_table(plan: Plan) -> Table | None:
    hosts = [d for d in plan.devices if d.nic is not None]
    if not hosts:
        return None
    nic = hosts[0].nic
    assert nic is not None
    table = Table(title=_text(f"Host NIC settings ({len(hosts)} hosts: {hosts[0].name} …)"))
    table.add_column("setting")
    table.add_column("value")
    _row(table, "trust", nic.trust)
    _row(table, "PFC vector (prio 0..7)", nic.pfc_vector)
    _row(table, "DSCP→priority", ", ".join(f"{d}→{p}" for d, p in nic.dscp_to_priority.items()))
    for name, value in nic.dcqcn.items():
        _row(table, name, value)
    return table


def render_plan_tables(plan: Plan, console: Console) -> None:
    console.print(_device_table(plan))
    for device in plan.devices:
        if device.role != "host" and device.ports:
            console.print(_port_table(device))
    nic = _nic_table(plan)
    if nic is not None:
        console.print(nic)
