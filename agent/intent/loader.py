"""Load ``fabric.yaml`` and its profile into a validated :class:`FabricIntent`.

Every problem is reported as ``FILE:LINE:COL: field.path: message``, pointing into the file
the value came from: the fabric file, or the profile file for values the fabric did not
override. All problems are collected before failing, so one run shows them all.

The file may be written compactly (port ranges, ``defaults.ports``, ``port_defaults``, links
declared on one end, YAML anchors under top-level ``x-`` keys): :mod:`agent.intent.expand`
writes it out explicitly before the models validate it, keeping a position for every path.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agent.errors import IntentError, Problem, SourcePosition
from agent.intent.credpaths import expand_credential_paths
from agent.intent.expand import Expanded, PortSources, expand_fabric, record_sources
from agent.intent.model import DeviceDefaults, FabricIntent, Profile
from agent.intent.plan import Plan, build_plan
from agent.intent.profiles import resolve_profile
from agent.intent.rules import rule_problems
from common.errors import excerpt
from common.validation import field_errors
from common.yamlsource import PathKey, SourceMap, dotted_path, load_yaml

FABRIC_KEYS = ("name", "profile", "overrides", "defaults", "devices", "validation", "emulation")
# Top-level keys the loader ignores: room for YAML anchors (``x-eos: &eos {...}``), as
# docker compose's extension fields (https://docs.docker.com/reference/compose-file/extension/).
EXTENSION_PREFIX = "x-"


@dataclass(frozen=True)
class LoadedFabric:
    """A validated fabric plus where it came from (for messages that point into files).

    ``locator(loc)`` gives the position and field name of any path of the intent, ports that
    ranges expanded or peers derived included; ``sources`` where each port's speed, mtu and
    cable_m came from (``build_plan`` puts them in ``PortPlan.sources``); ``plan`` the
    intent's plan, which the rule checks needed (``build_plan(intent)``: made once, issue #31).
    """

    intent: FabricIntent
    fabric_file: Path
    profile_file: Path
    locator: Locator
    # (device, port) -> {speed|mtu|cable_m: where the value came from}
    sources: PortSources | None = None
    plan: Plan | None = None
    # The fabric's ``profile:`` as written, which resolve_profile turned into profile_file.
    profile_reference: str = ""


class Locator:
    """Maps a path in the merged fabric data back to a file position and a field name."""

    def __init__(
        self,
        fabric: SourceMap,
        profile: SourceMap,
        overrides: SourceMap,
        expanded: Expanded | None = None,
    ) -> None:
        self.fabric = fabric
        self.profile = profile
        self.overrides = overrides
        # Field names as written, for ports that ranges or peers produced.
        self.expanded = expanded

    def __call__(self, loc: Sequence[str | int]) -> tuple[SourcePosition | None, str]:
        parts = tuple(loc)
        if parts and parts[0] == "profile":
            rest = parts[1:]
            in_overrides = _deepest(self.overrides, rest)
            in_profile = _deepest(self.profile, rest)
            if in_overrides is not None and (in_profile is None or in_overrides >= in_profile):
                return self.overrides.locate(rest), dotted_path(("overrides", *rest))
            if in_profile is not None and (in_profile > 0 or in_overrides is None):
                return self.profile.locate(rest), dotted_path(rest) or "profile"
            return self.fabric.locate(("profile",)), dotted_path(parts)
        if self.expanded is not None:
            return self.fabric.locate(parts), self.expanded.field_name(parts)
        return self.fabric.locate(parts), dotted_path(parts)

    def problem(
        self, loc: Sequence[str | int], message: str, rule: str | None = None, *, key: bool = False
    ) -> Problem:
        """A problem at ``loc``; ``key`` points at the key itself (unknown fields)."""
        position, field = self(loc)
        if key:
            position = self._key_position(tuple(loc)) or position
        return Problem(position, field, message, rule)

    def _key_position(self, loc: PathKey) -> SourcePosition | None:
        if loc[:1] == ("profile",):
            for source in (self.overrides, self.profile):
                if loc[1:] in source.keys:
                    return source.keys[loc[1:]]
            return None
        return self.fabric.keys.get(loc)


def _deepest(source: SourceMap, path: PathKey) -> int | None:
    """Length of the longest prefix of ``path`` that ``source`` has a position for."""
    for length in range(len(path), -1, -1):
        if source.locate(path[:length]) is not None and _has_exact(source, path[:length]):
            return length
    return None


def _has_exact(source: SourceMap, path: PathKey) -> bool:
    if path in source.values:
        return True
    alt = tuple(
        int(p) if isinstance(p, str) and p.isascii() and p.isdigit() and len(p) < 20 else p
        for p in path
    )
    return alt in source.values


def _deep_merge(base: dict[Any, Any], override: dict[Any, Any]) -> dict[Any, Any]:
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _pydantic_problems(
    exc: ValidationError, locate: Locator, prefix: PathKey = (), data: Any = None
) -> list[Problem]:
    problems = []
    for error in field_errors(exc, data):
        rule, message = None, error.message
        if message[:2] == "IR" and message[2:5].isdigit():
            rule, message = message[:5], message[6:]
        problems.append(locate.problem((*prefix, *error.loc), message, rule, key=error.at_key))
    return problems


def load_profile(path: Path) -> tuple[dict[str, Any], SourceMap]:
    """Load a profile file on its own (its values are validated with the fabric)."""
    data, source = load_yaml(path)
    if not isinstance(data, dict):
        raise IntentError([Problem(source.locate(()), "", "a profile must be a mapping")])
    return data, source


def load_fabric(path: Path) -> LoadedFabric:
    """Load, merge, validate and rule-check a fabric file; raise :class:`IntentError`."""
    data, fabric_map = load_yaml(path)
    empty = SourceMap(path)
    if not isinstance(data, dict):
        raise IntentError([Problem(fabric_map.locate(()), "", "a fabric file must be a mapping")])
    plain = Locator(fabric_map, empty, empty)
    problems = _unknown_fields(data, plain)
    # ${CREDENTIALS_DIRECTORY} (systemd LoadCredential=) before relative paths are joined.
    problems.extend(expand_credential_paths(data, plain.problem, path.resolve().parent))
    profile_file, profile_data, profile_map = _profile(data, path, plain, problems)
    overrides = _overrides(data, plain, problems)
    expanded = expand_fabric(data, fabric_map)
    problems.extend(expanded.problems)
    overrides_map = _section_map(fabric_map, "overrides", path)
    locate = Locator(expanded.source, profile_map, overrides_map, expanded)
    defaults = _defaults(data, locate, problems)
    profile = _deep_merge(profile_data, overrides) if profile_data else None
    merged = _merged(data, _with_defaults(expanded.devices, defaults, path), profile)
    if problems:
        raise IntentError(_collapse(problems))
    try:
        intent = FabricIntent.model_validate(merged)
    except ValidationError as exc:
        raise IntentError(_collapse(_pydantic_problems(exc, locate, (), merged))) from None

    record_sources(intent, expanded.sources)
    plan = build_plan(intent)
    reference = str(data["profile"])
    loaded = LoadedFabric(intent, path, profile_file, locate, expanded.sources, plan, reference)
    problems = rule_problems(loaded.intent, loaded.locator.problem, plan)
    if problems:
        raise IntentError(_collapse(problems))
    return loaded


_MEMBER_NOTE = re.compile(r" \(([^()]*)\)$")


def _collapse(problems: list[Problem]) -> list[Problem]:
    """One problem per place: a mistake in a range of 4 096 ports (or in the ports derived
    from it) is one mistake, not 4 096 (the same position, field as written and rule; the
    first port's message, and how many more). Outside ranges, the same message at the same
    place once."""
    kept: dict[tuple[Any, ...], tuple[Problem, int]] = {}
    for problem in problems:
        written = _MEMBER_NOTE.sub("", problem.field)
        member = written != problem.field
        key = (problem.position, written, problem.rule, None if member else problem.message)
        first, count = kept.get(key, (problem, 0))
        kept[key] = (first, count + 1)
    return [first if count == 1 else _and_more(first, count - 1) for first, count in kept.values()]


def _and_more(problem: Problem, more: int) -> Problem:
    note = _MEMBER_NOTE.search(problem.field)
    written = _MEMBER_NOTE.sub("", problem.field)
    named = f" ({note.group(1)} and {more} more)" if note else f" (and {more} more)"
    return Problem(problem.position, written + named, problem.message, problem.rule)


def _unknown_fields(data: dict[str, Any], plain: Locator) -> list[Problem]:
    return [
        plain.problem(
            (key,),
            f"unknown field {excerpt(str(key))}; expected one of {', '.join(FABRIC_KEYS)} "
            f"or an {EXTENSION_PREFIX}... key (ignored, for YAML anchors)",
            key=True,
        )
        for key in data
        if key not in FABRIC_KEYS
        and not (isinstance(key, str) and key.startswith(EXTENSION_PREFIX))
    ]


def _profile(
    data: dict[str, Any], path: Path, plain: Locator, problems: list[Problem]
) -> tuple[Path, dict[str, Any], SourceMap]:
    """The profile the fabric names: its file, data and source map (the fabric file and
    nothing when it names none that can be read; ``problems`` says why)."""
    reference = data.get("profile")
    if not isinstance(reference, str):
        problems.append(
            plain.problem(("profile",), "name a profile (e.g. nvidia-default) or a profile file")
        )
        return path, {}, SourceMap(path)
    resolved = resolve_profile(reference, path)
    if isinstance(resolved, str):
        problems.append(plain.problem(("profile",), resolved))
        return path, {}, SourceMap(path)
    profile_data, profile_map = load_profile(resolved)
    return resolved, profile_data, profile_map


def _overrides(data: dict[str, Any], plain: Locator, problems: list[Problem]) -> dict[str, Any]:
    overrides = data.get("overrides") or {}
    if not isinstance(overrides, dict):
        problems.append(plain.problem(("overrides",), "overrides must be a mapping"))
        return {}
    return overrides


def _section_map(fabric_map: SourceMap, section: str, path: Path) -> SourceMap:
    """The source map of one top-level section, with keys relative to it."""
    inside = SourceMap(path)
    inside.values = {
        k[1:]: v for k, v in fabric_map.values.items() if k[:1] == (section,) and len(k) > 1
    }
    inside.keys = {
        k[1:]: v for k, v in fabric_map.keys.items() if k[:1] == (section,) and len(k) > 1
    }
    return inside


def _defaults(
    data: dict[str, Any], locate: Locator, problems: list[Problem]
) -> DeviceDefaults | None:
    section = data.get("defaults") or {}
    if isinstance(section, dict):
        # defaults.ports is the expander's (agent/intent/expand.py), already applied.
        section = {k: v for k, v in section.items() if k != "ports"}
    try:
        return DeviceDefaults.model_validate(section)
    except ValidationError as exc:
        problems.extend(_pydantic_problems(exc, locate, ("defaults",), section))
        return None


def _merged(data: dict[str, Any], devices: Any, profile: dict[str, Any] | None) -> dict[str, Any]:
    """The fabric as the model reads it: its devices and its profile (the overrides merged
    in), with its validation and emulation sections."""
    merged = {"name": data.get("name"), "profile": profile, "devices": devices}
    for key in ("validation", "emulation"):
        if key in data:
            merged[key] = data[key]
    return merged


def _with_defaults(devices: Any, defaults: DeviceDefaults | None, fabric_file: Path) -> Any:
    """Every device filled from the defaults (the model reports a devices: that is not a
    list)."""
    if not isinstance(devices, list):
        return devices
    return [_apply_defaults(device, defaults, fabric_file) for device in devices]


def _apply_defaults(device: Any, defaults: DeviceDefaults | None, fabric_file: Path) -> Any:
    if not isinstance(device, dict):
        return device
    filled = dict(device)
    if defaults is not None:
        for key in ("username", "credentials", "port", "known_hosts", "host_key_policy", "gnmi"):
            value = getattr(defaults, key)
            if key not in filled and value is not None:
                dump = key in ("credentials", "gnmi")
                filled[key] = value.model_dump(exclude_none=True) if dump else value
    known_hosts = filled.get("known_hosts")
    if isinstance(known_hosts, str | Path) and not Path(known_hosts).is_absolute():
        filled["known_hosts"] = str(fabric_file.resolve().parent / known_hosts)
    credentials = filled.get("credentials")
    if isinstance(credentials, dict):
        # Credential files are relative to the fabric file, like every other path in it.
        for key in ("password_file", "ssh_key"):
            value = credentials.get(key)
            if isinstance(value, str | Path) and not Path(value).is_absolute():
                credentials = {**credentials, key: str(fabric_file.resolve().parent / value)}
        filled["credentials"] = credentials
    if "gnmi" in filled:
        filled["gnmi"] = _gnmi_ca_resolved(filled["gnmi"], fabric_file)
    return filled


def _gnmi_ca_resolved(gnmi: Any, fabric_file: Path) -> Any:
    """``gnmi.tls.ca`` relative to the fabric file (anything malformed is left to the model)."""
    tls = gnmi.get("tls") if isinstance(gnmi, dict) else None
    ca = tls.get("ca") if isinstance(tls, dict) else None
    if not isinstance(tls, dict) or not isinstance(ca, str | Path) or Path(ca).is_absolute():
        return gnmi
    return {**gnmi, "tls": {**tls, "ca": str(fabric_file.resolve().parent / ca)}}


def load_profile_model(path: Path) -> Profile:
    """Validate a profile file alone (used by tests and ``check`` on profiles)."""
    data, source = load_profile(path)
    locate = Locator(SourceMap(path), source, SourceMap(path))
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        raise IntentError(_pydantic_problems(exc, locate, ("profile",), data)) from None
