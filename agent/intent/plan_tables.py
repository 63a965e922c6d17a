"""Human-readable renderings of plans: the tables' content once (:func:`plan_sections`), as
rich tables (:func:`render_plan_tables`) or, in the app layer, as Markdown; JSON comes from
the models themselves.

Every cell and title is made printable when a section is built: rich would read ``[red]`` in
a name as markup, and a terminal would obey an escape sequence, so input-derived text is
escaped and plain (and rich gets it as :class:`~rich.text.Text`, never parsed).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.console import Console
from rich.table import Table
from rich.text import Text

from agent.errors import printable
from agent.intent.plan import DevicePlan, Plan, PortPlan
from common.conventions import add_column
from common.conventions import table as folding_table
from common.text import natural_key


@dataclass(frozen=True)
class Section:
    """One table of a plan: its title, its columns (header, justify), its rows and the
    caption under it, every text printable."""

    title: str
    columns: tuple[tuple[str, str], ...]
    rows: list[list[str]] = field(default_factory=list)
    caption: str | None = None

    def add(self, *cells: object) -> None:
        self.rows.append([printable(str(cell)) for cell in cells])


def _section(title: str, *headers: str) -> Section:
    return Section(printable(title), tuple((h, "left") for h in headers))


def _dscp_text(device: DevicePlan) -> str:
    pairs = ", ".join(f"{d}→{p}" for d, p in device.dscp_to_priority.items())
    return f"{pairs}; others→{device.default_priority}"


def _device_table(plan: Plan) -> Section:
    table = _section(
        f"Plan for fabric {plan.fabric} (profile {plan.profile}, mode {plan.mode})",
        "device",
        "platform",
        "role",
        "trust",
        "DSCP→priority",
        "PFC",
        "watchdog",
        "ETS",
    )
    for device in plan.devices:
        watchdog = device.watchdog
        table.add(
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


# Buffer columns are all in bytes, the unit in the header (one unit per column: never
# ``1518428`` in one row and ``1518.2KB`` in the next). (header, justify, said once): a
# column whose value is the same on every port is said once, under the table, in these words.
_PORT_COLUMNS = (
    ("port", "left", None),
    ("speed", "left", "speed {}"),
    ("cable m", "right", "cable {} m"),
    ("cable from", "left", "cable from {}"),
    ("mtu", "right", "mtu {}"),
    ("peer", "left", None),
    ("PFC", "left", "PFC {}"),
    ("xoff B", "right", None),
    ("xon B", "right", None),
    ("size B", "right", None),
    ("pause at B", "right", "pause at {} B"),
    ("ECN queue: min-max @p", "left", "ECN queue {}"),
)


def source_tag(source: str | None) -> str:
    """Where a value came from, short enough for a cell: ``line 12``, ``defaults.ports``,
    ``range Ethernet1/1-8``, ``peer spine1:Ethernet1`` (the whole text, with file, line and
    column, is in ``plan -o json`` under ``sources``)."""
    if not source:
        return "-"
    text = source.split(" via ", 1)[0]
    where = text.rsplit(" (", 1)[0] if text.endswith(")") else text
    if where == text and ":" in text:  # a bare FILE:LINE:COL: written on the port itself
        parts = text.rsplit(":", 2)
        return f"line {parts[1]}" if len(parts) == 3 and parts[1].isdigit() else text
    return where


def _port_cells(port: PortPlan) -> list[str]:
    headroom = next(iter(port.headroom.values()), None)
    buffers = [str(headroom.xoff), str(headroom.xon), str(headroom.size)] if headroom else ["-"] * 3
    ecn = "; ".join(
        f"{e.queue}: {e.min_bytes}-{e.max_bytes} B @{e.max_probability}%" for e in port.ecn
    )
    return [
        port.name,
        port.speed,
        f"{port.cable_m:g}",
        source_tag(port.sources.get("cable_m")),
        str(port.mtu),
        port.peer or "-",
        ",".join(map(str, port.pfc_priorities)) or "off",
        *buffers,
        str(headroom.pause_threshold) if headroom else "-",
        ecn or "off",
    ]


def _port_table(device: DevicePlan) -> Section:
    """One row per port. Cells fold rather than cut; so that a 100-column terminal shows
    every name whole (``Ethernet1/31``, ``spine1:Ethernet1/31``), a setting that is the same
    on every port of the device (speed, MTU, PFC, ECN … in a usual fabric) is said once in
    the caption instead of in a column."""
    # Natural order (swp2 before swp10), not the file's: a leaf's derived uplinks come after
    # its own ports in the plan (pod-mixed: swp31, swp32, swp1, swp2).
    rows = [_port_cells(port) for port in sorted(device.ports, key=lambda p: natural_key(p.name))]
    shown: list[int] = []
    same: list[str] = []
    for index, (_, _, said_once) in enumerate(_PORT_COLUMNS):
        values = {row[index] for row in rows}
        if said_once is not None and len(values) == 1:
            same.append(said_once.format(values.pop()))
        else:
            shown.append(index)
    caption = "on every port: " + ", ".join(same).replace(" m, cable from ", " m from ")
    table = Section(
        printable(f"{device.name} ports"),
        tuple(_PORT_COLUMNS[index][:2] for index in shown),
        caption=printable(caption) if same else None,
    )
    for row in rows:
        table.add(*(row[index] for index in shown))
    return table


def _nic_table(plan: Plan) -> Section | None:
    hosts = [d for d in plan.devices if d.nic is not None]
    if not hosts:
        return None
    nic = hosts[0].nic
    assert nic is not None
    count = f"{len(hosts)} hosts, e.g." if len(hosts) > 1 else "host"
    title = f"Host NIC settings ({count} {hosts[0].name})"
    table = _section(title, "setting", "value")
    table.add("trust", nic.trust)
    table.add("PFC vector (prio 0..7)", nic.pfc_vector)
    table.add("DSCP→priority", ", ".join(f"{d}→{p}" for d, p in nic.dscp_to_priority.items()))
    for name, value in nic.dcqcn.items():
        table.add(name, value)
    return table


def plan_sections(plan: Plan) -> list[Section]:
    """The plan's tables: the devices, each switch's ports, the host NICs."""
    sections = [_device_table(plan)]
    sections += [_port_table(d) for d in plan.devices if d.role != "host" and d.ports]
    nic = _nic_table(plan)
    return sections if nic is None else [*sections, nic]


def rich_table(section: Section) -> Table:
    """A section as a table that folds its cells (common.conventions.table)."""
    table = folding_table(section.title, caption_justify="left")
    for header, justify in section.columns:
        add_column(table, header, justify=justify)
    for row in section.rows:
        table.add_row(*(Text(cell) for cell in row))
    if section.caption is not None:
        table.caption = Text(section.caption)
    return table


def render_plan_tables(plan: Plan, console: Console) -> None:
    for section in plan_sections(plan):
        console.print(rich_table(section))
