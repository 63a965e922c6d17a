"""A documented subset of SONiC's YANG models, enough to refuse what GCU would refuse.

The Generic Config Updater validates the patched CONFIG_DB against the sonic-yang-models
(sonic-net/sonic-buildimage ``src/sonic-yang-models/yang-models/``: sonic-port.yang,
sonic-port-qos-map.yang, sonic-dscp-tc-map.yang, sonic-dot1p-tc-map.yang,
sonic-tc-priority-group-map.yang, sonic-tc-queue-map.yang, sonic-pfc-priority-queue-map.yang,
sonic-wred-profile.yang, sonic-scheduler.yang, sonic-queue.yang, sonic-buffer-pool.yang,
sonic-buffer-profile.yang, sonic-buffer-pg.yang, sonic-buffer-queue.yang, sonic-pfcwd.yang,
sonic-cable-length.yang, sonic-device_metadata.yang, sonic-trimming.yang). Here each modelled
table lists its fields and a check per field (integers, enumerations, the PFC priority list)
and its references (leafrefs: a QUEUE's scheduler must exist in SCHEDULER, a port key in PORT).
Numeric ranges are checked only where stated here (percentages, map indices); the models' other
ranges are not. What fails reads as sonic_yang words it (``All Keys are not parsed in <TABLE>``
for an unknown field, libyang's ``Invalid value`` / ``Leafref ... points to a non-existing
leaf``). Tables not listed have no model here, as tables without YANG have none on a switch:
GCU refuses patches that touch them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lab.mgmt.sonic.configdb import ConfigDb

Check = Callable[[str], bool]


def _uint(value: str) -> bool:
    return value.isdigit()


def _int_range(low: int, high: int) -> Check:
    return lambda v: bool(re.fullmatch(r"-?\d+", v)) and low <= int(v) <= high


def _one_of(*choices: str) -> Check:
    return lambda v: v in choices


def _any(value: str) -> bool:
    return True


_PRIORITY_LIST = re.compile(r"[0-7](,[0-7])*")
_BOOL = _one_of("true", "false")
_ECN = _one_of(
    "ecn_none",
    "ecn_green",
    "ecn_yellow",
    "ecn_red",
    "ecn_green_yellow",
    "ecn_green_red",
    "ecn_yellow_red",
    "ecn_all",
)


@dataclass(frozen=True)
class TableModel:
    """Fields of one table and what its keys and values refer to."""

    fields: dict[str, Check] = field(default_factory=dict)
    # field -> table its value names (a leafref)
    refs: dict[str, str] = field(default_factory=dict)
    # "port" (key is a PORT name), "port|range" (PORT name | queue or PG range), "any",
    # "global" (only the keys of ``key_extra``: a YANG container such as SWITCH_TRIMMING|GLOBAL)
    key: str = "any"
    key_extra: tuple[str, ...] = ()  # keys allowed besides ports (``global``, ``GLOBAL``)
    # map tables: every field is a number within ``map_keys`` with a value within ``map_values``
    map_keys: int = 0
    map_values: int = 0


_MAP_REFS = {
    "dscp_to_tc_map": "DSCP_TO_TC_MAP",
    "dot1p_to_tc_map": "DOT1P_TO_TC_MAP",
    "tc_to_pg_map": "TC_TO_PRIORITY_GROUP_MAP",
    "tc_to_queue_map": "TC_TO_QUEUE_MAP",
    "pfc_to_queue_map": "MAP_PFC_PRIORITY_TO_QUEUE",
}


def _wred_fields() -> dict[str, Check]:
    fields: dict[str, Check] = {"ecn": _ECN}
    for colour in ("green", "yellow", "red"):
        fields[f"wred_{colour}_enable"] = _BOOL
        fields[f"{colour}_min_threshold"] = _uint
        fields[f"{colour}_max_threshold"] = _uint
        fields[f"{colour}_drop_probability"] = _int_range(0, 100)
    return fields


MODELS: dict[str, TableModel] = {
    "DEVICE_METADATA": TableModel(
        fields={
            name: _any
            for name in (
                "hostname",
                "hwsku",
                "mac",
                "platform",
                "type",
                "buffer_model",
                "default_bgp_status",
                "bgp_asn",
                "deployment_id",
                "docker_routing_config_mode",
            )
        },
        key="any",
    ),
    "PORT": TableModel(
        fields={
            "admin_status": _one_of("up", "down"),
            "alias": _any,
            "description": _any,
            "fec": _one_of("none", "rs", "fc", "auto"),
            "index": _uint,
            "lanes": lambda v: bool(re.fullmatch(r"\d+(,\d+)*", v)),
            "mtu": _int_range(68, 9216),
            "speed": _int_range(1, 1_600_000),
            "autoneg": _one_of("on", "off"),
            "pfc_asym": _one_of("on", "off"),
        }
    ),
    "PORT_QOS_MAP": TableModel(
        fields={
            **{name: _any for name in _MAP_REFS},
            "pfc_enable": lambda v: bool(_PRIORITY_LIST.fullmatch(v)),
            "pfcwd_sw_enable": lambda v: bool(_PRIORITY_LIST.fullmatch(v)),
            "pfc_to_pg_map": _any,
            "tc_to_dscp_map": _any,
        },
        refs=_MAP_REFS,
        key="port",
        key_extra=("global",),
    ),
    "DSCP_TO_TC_MAP": TableModel(map_keys=63, map_values=15),
    "DOT1P_TO_TC_MAP": TableModel(map_keys=7, map_values=15),
    "TC_TO_PRIORITY_GROUP_MAP": TableModel(map_keys=15, map_values=7),
    "TC_TO_QUEUE_MAP": TableModel(map_keys=15, map_values=15),
    "MAP_PFC_PRIORITY_TO_QUEUE": TableModel(map_keys=7, map_values=15),
    "WRED_PROFILE": TableModel(fields=_wred_fields()),
    "SCHEDULER": TableModel(
        fields={
            "type": _one_of("DWRR", "WRR", "STRICT"),
            "weight": _int_range(1, 255),
            "priority": _int_range(0, 9),
            "meter_type": _one_of("packets", "bytes"),
            "cir": _uint,
            "cbs": _uint,
            "pir": _uint,
            "pbs": _uint,
        }
    ),
    "QUEUE": TableModel(
        fields={"scheduler": _any, "wred_profile": _any},
        refs={"scheduler": "SCHEDULER", "wred_profile": "WRED_PROFILE"},
        key="port|range",
    ),
    "BUFFER_POOL": TableModel(
        fields={
            "type": _one_of("ingress", "egress"),
            "mode": _one_of("static", "dynamic"),
            "size": _uint,
            "xoff": _uint,
        }
    ),
    "BUFFER_PROFILE": TableModel(
        fields={
            "pool": _any,
            "size": _uint,
            "xon": _uint,
            "xoff": _uint,
            "xon_offset": _uint,
            "dynamic_th": _int_range(-8, 8),
            "static_th": _uint,
            "headroom_type": _one_of("dynamic"),
            "packet_discard_action": _one_of("drop", "trim"),
        },
        refs={"pool": "BUFFER_POOL"},
    ),
    "BUFFER_PG": TableModel(
        fields={"profile": _any}, refs={"profile": "BUFFER_PROFILE"}, key="port|range"
    ),
    "BUFFER_QUEUE": TableModel(
        fields={"profile": _any}, refs={"profile": "BUFFER_PROFILE"}, key="port|range"
    ),
    "PFC_WD": TableModel(
        fields={
            "action": _one_of("drop", "forward", "alert"),
            "detection_time": _uint,
            "restoration_time": _uint,
            "pfc_stat_history": _one_of("enable", "disable"),
            "POLL_INTERVAL": _uint,
            "BIG_RED_SWITCH": _one_of("enable", "disable"),
        },
        key="port",
        key_extra=("GLOBAL",),
    ),
    "CABLE_LENGTH": TableModel(key="any"),
    # sonic-trimming.yang (sonic-net/sonic-buildimage a3488c1): container GLOBAL only; size
    # uint32, dscp_value 0..63 or "from-tc", tc_value uint8, queue_index uint8 or "dynamic".
    "SWITCH_TRIMMING": TableModel(
        fields={
            "size": _uint,
            "dscp_value": lambda v: v == "from-tc" or _int_range(0, 63)(v),
            "tc_value": _int_range(0, 255),
            "queue_index": lambda v: v == "dynamic" or _int_range(0, 255)(v),
        },
        key="global",
        key_extra=("GLOBAL",),
    ),
}


class YangError(ValueError):
    """The patched config is not valid (message as sonic_yang / libyang would say)."""


def has_model(table: str) -> bool:
    """Whether the table has a (modelled) YANG model."""
    return table in MODELS


def validate(db: ConfigDb) -> None:
    """Raise :class:`YangError` for the first invalid table, entry or field."""
    ports = set(db.get("PORT", {}))
    for table in sorted(db):
        model = MODELS.get(table)
        if model is None:
            continue  # cropped: no YANG model (GCU refuses changes to it separately)
        for key, entry in db[table].items():
            if not isinstance(entry, dict):
                raise YangError(f'Invalid value "{entry}" in "{table}" element.')
            _validate_key(table, model, key, ports)
            _validate_entry(db, table, model, entry)


def _validate_key(table: str, model: TableModel, key: str, ports: set[str]) -> None:
    if model.key == "any" or key in model.key_extra:
        return
    if model.key == "global":  # a container, not a list: no other key exists
        raise YangError(f'Invalid value "{key}" in "{table}" element.')
    port, _, rest = key.partition("|")
    if model.key == "port|range" and not re.fullmatch(r"\d+(-\d+)?", rest):
        raise YangError(f'Invalid value "{key}" in "{table}" element.')
    if port not in ports:
        raise YangError(_leafref("PORT", port))


def _validate_entry(db: ConfigDb, table: str, model: TableModel, entry: dict[str, Any]) -> None:
    if model.map_keys:
        _validate_map(table, model, entry)
    elif table != "CABLE_LENGTH":
        _validate_fields(db, table, model, entry)


def _validate_map(table: str, model: TableModel, entry: dict[str, Any]) -> None:
    """A map table (``DSCP_TO_TC_MAP``...): numeric keys and values within the model's range."""
    for name, value in entry.items():
        if not (name.isdigit() and int(name) <= model.map_keys):
            raise YangError(f'Invalid value "{name}" in "{table}" element.')
        if not (str(value).isdigit() and int(value) <= model.map_values):
            raise YangError(f'Invalid value "{value}" in "{name}" element.')


def _validate_fields(db: ConfigDb, table: str, model: TableModel, entry: dict[str, Any]) -> None:
    """Known fields only, each value valid, each reference pointing at an existing entry."""
    unknown = [name for name in entry if name not in model.fields]
    if unknown:
        raise YangError(
            f"All Keys are not parsed in {table}\ndict_keys({unknown!r})\nexceptionList:[]"
        )
    for name, value in entry.items():
        if not isinstance(value, str) or not model.fields[name](value):
            raise YangError(f'Invalid value "{value}" in "{name}" element.')
        target = model.refs.get(name)
        if target is not None and value not in db.get(target, {}):
            raise YangError(_leafref(target, value))


def _leafref(table: str, value: str) -> str:
    module = table.lower().replace("_", "-")
    return (
        f'Leafref "/sonic-{module}:sonic-{module}/{table}/{table}_LIST/name" of value '
        f'"{value}" points to a non-existing leaf.'
    )
