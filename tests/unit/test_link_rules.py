"""Safety fields of a link (issue #29): cable_m and mtu have no silent default, both ends of a
link agree on speed, MTU and cable length (IR009, naming both ends and where each is written),
port names follow the platform (IR021), and ``rules_by_id()`` lists every rule ``check``
enforces, model-level ones included."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from agent.app.cli import main
from agent.errors import IntentError
from agent.intent import sizing
from agent.intent.loader import load_fabric
from agent.intent.model import FabricIntent, Port
from agent.intent.plan import build_plan
from agent.intent.rules import MODEL_RULES, RULES, _link_ends_agree, rules_by_id
from agent.intent.units import parse_speed

INTENT = Path(__file__).resolve().parents[2] / "agent" / "intent"


def _fabric(tmp_path: Path, leaf: str, spine: str, platform: str = "arista_eos") -> Path:
    path = tmp_path / "fabric.yml"
    path.write_text(
        f"""\
name: t
profile: nvidia-default
defaults: {{username: admin, credentials: {{password_env: ROCE_TEST_PASSWORD}}}}
devices:
  - name: leaf1
    platform: {platform}
    role: leaf
    host: leaf1.example
    ports:
      - {{{leaf}, peer: "spine1:Ethernet1"}}
  - name: spine1
    platform: arista_eos
    role: spine
    host: spine1.example
    ports:
      - {{{spine}, peer: "leaf1:{leaf.split(",")[0].split(": ")[1]}"}}
""",
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize("field", ["cable_m", "mtu"])
def test_safety_fields_have_no_default(field: str) -> None:
    values = {"name": "Ethernet1", "speed": "400G", "cable_m": 3, "mtu": 9100}
    del values[field]
    with pytest.raises(ValidationError, match=field):
        Port.model_validate(values)
    assert Port.model_fields[field].is_required()


# (leaf port, spine port, field, leaf's value shown, spine's value shown)
MISMATCHES = [
    ("speed: 400G, mtu: 9214, cable_m: 3", "speed: 100G, mtu: 9214, cable_m: 3", "speed",
     "400G", "100G"),
    ("speed: 400G, mtu: 9000, cable_m: 3", "speed: 400G, mtu: 9214, cable_m: 3", "mtu",
     "9000", "9214"),
    ("speed: 400G, mtu: 9214, cable_m: 3", "speed: 400G, mtu: 9214, cable_m: 30", "cable_m",
     "3 m", "30 m"),
    ("speed: 400G, mtu: 9214, cable_m: 2.5", "speed: 400G, mtu: 9214, cable_m: 3", "cable_m",
     "2.5 m", "3 m"),
]  # fmt: skip


@pytest.mark.parametrize(("leaf", "spine", "field", "mine", "theirs"), MISMATCHES)
def test_link_ends_agree_and_the_error_names_both(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    leaf: str,
    spine: str,
    field: str,
    mine: str,
    theirs: str,
) -> None:
    monkeypatch.setenv("ROCE_TEST_PASSWORD", "x")
    path = _fabric(tmp_path, f"name: Ethernet1, {leaf}", f"name: Ethernet1, {spine}")
    with pytest.raises(IntentError) as caught:
        load_fabric(path)
    problems = [p for p in caught.value.problems if p.rule == "IR009"]
    assert len(problems) == 1, caught.value
    text = str(problems[0])
    # at the leaf's value (line 10), naming the spine's end and where it is written (line 16)
    assert text.startswith(f"{path}:10:"), text
    assert problems[0].field == f"devices[0].ports[0].{field}"
    at = re.escape(str(path))
    assert re.search(rf"spine1:Ethernet1 has {theirs} from its port \({at}:16:\d+\)", text)
    assert re.search(rf"leaf1:Ethernet1 has {mine} from its port \({at}:10:\d+\)$", text)


def test_agreeing_ends_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROCE_TEST_PASSWORD", "x")
    port = "name: Ethernet1, speed: 400G, mtu: 9214, cable_m: 30"
    intent = load_fabric(_fabric(tmp_path, port, port)).intent
    leaf = intent.device("leaf1")
    assert leaf is not None and leaf.ports[0].cable_m == 30


def test_a_longer_cable_needs_more_headroom() -> None:
    """Why cable_m must never default: 3 m sizes a 30 m link's xoff too small (the issue's
    105 472 vs 124 928 bytes at 400G)."""
    short = sizing.pfc_headroom(400_000_000_000, 3, 9214)
    long = sizing.pfc_headroom(400_000_000_000, 30, 9214)
    assert short.xoff < long.xoff


@pytest.mark.parametrize(
    ("platform", "name", "ok"),
    [
        ("arista_eos", "swp99", False),
        ("sonic", "Ethernet1/1", False),
        ("cumulus_nvue", "Ethernet1", False),
        ("cisco_nxos", "Ethernet1", False),
        ("arista_eos", "Ethernet7", True),
        ("sonic", "Ethernet8", True),
        ("cumulus_nvue", "swp7", True),
        ("cisco_nxos", "Ethernet1/7", True),
    ],
)
def test_port_names_follow_the_platform(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, platform: str, name: str, ok: bool
) -> None:
    monkeypatch.setenv("ROCE_TEST_PASSWORD", "x")
    same = "speed: 400G, mtu: 9214, cable_m: 3"
    path = _fabric(tmp_path, f"name: {name}, {same}", f"name: Ethernet1, {same}", platform)
    if ok:
        load_fabric(path)
        return
    with pytest.raises(IntentError) as caught:
        load_fabric(path)
    (problem,) = [p for p in caught.value.problems if p.rule == "IR021"]
    assert str(problem).startswith(f"{path}:10:"), problem
    assert problem.field == "devices[0].ports[0].name"
    assert f"Expected: a{'n' if platform[0] == 'a' else ''} {platform} interface name" in str(
        problem
    )
    assert f"Actual: '{name}'" in str(problem)


def test_rules_by_id_lists_every_rule_check_enforces() -> None:
    """Every IRnnn written in agent/intent/*.py is listed, model-level ones included."""
    written = {
        rule_id
        for path in INTENT.glob("*.py")
        for rule_id in re.findall(r"\bIR\d{3}\b", path.read_text(encoding="utf-8"))
    }
    listed = rules_by_id()
    assert written <= set(listed), sorted(written - set(listed))
    assert {"IR007", "IR009", "IR020", "IR021"} <= set(listed)
    assert list(listed) == sorted(listed)
    assert all(summary for summary in listed.values())
    # the model-level rules are exactly those not run on the plan
    assert set(MODEL_RULES).isdisjoint(r.rule_id for r in RULES)
    assert "cable length" in listed["IR009"]


def _two_ends(a: dict[str, object], b: dict[str, object]) -> FabricIntent:
    def switch(name: str, role: str, port: dict[str, object], peer: str) -> dict[str, object]:
        return {"name": name, "platform": "arista_eos", "role": role, "netns": name,
                "ports": [{"name": "Ethernet1", "peer": f"{peer}:Ethernet1", **port}]}  # fmt: skip

    return FabricIntent.model_validate(
        {
            "name": "t",
            "profile": {"name": "p"},
            "devices": [
                switch("leaf1", "leaf", a, "spine1"),
                switch("spine1", "spine", b, "leaf1"),
            ],
        }
    )


ends = st.fixed_dictionaries(
    {
        "speed": st.sampled_from(["25G", "100G", "400G"]),
        "mtu": st.sampled_from([1500, 9000, 9214]),
        "cable_m": st.sampled_from([0.5, 1, 3, 30, 100]),
    }
)


@given(a=ends, b=ends)
def test_ir009_fires_exactly_for_each_setting_that_differs(
    a: dict[str, object], b: dict[str, object]
) -> None:
    intent = _two_ends(a, b)
    violations = list(_link_ends_agree(intent, build_plan(intent)))
    differing = [s for s in ("speed", "mtu", "cable_m") if a[s] != b[s]]
    assert [v.loc[-1] for v in violations] == differing
    for violation in violations:
        # reported once, at leaf1 (the end sorting first), pointing at spine1's value
        assert violation.loc[:2] == ("devices", 0)
        assert violation.also == ("devices", 1, "ports", 0, violation.loc[-1])
        assert "spine1:Ethernet1 has" in violation.expected
        assert violation.actual.startswith("leaf1:Ethernet1 has")


# --------------------------------------------------------------------------- resolved values
# Issue #41, finding 1: a spine's port_defaults say 20 m, the leaf's port says 3 m, and
# `check` passed with the spine end sized for 3 m. IR009 is decided on resolved values, so
# every way the compact form has of giving the two ends of a link different values is refused.

LINK_VALUES: dict[str, list[object]] = {
    "cable_m": [1, 2.5, 3, 20],
    # 100G written two ways: equal once resolved, so never a mismatch
    "speed": ["100G", 100_000_000_000, "400G"],
    "mtu": [1500, 9100, 9214],
}
OTHER = {"speed": "400G", "mtu": 9214, "cable_m": 3}


def _resolved(field: str, value: object) -> object:
    if field != "speed":
        return value
    assert isinstance(value, str | int)
    return parse_speed(value)


@st.composite
def compact_links(draw: st.DrawFn) -> dict[str, object]:
    """A spine and a leaf joined by 1-3 links, each end written as a range, as single ports or
    derived, the field under test on the ports, in port_defaults, in defaults.ports or not."""
    field = draw(st.sampled_from(sorted(LINK_VALUES)))
    value = st.none() | st.sampled_from(LINK_VALUES[field])
    spine_form = draw(st.sampled_from(["range", "singles", "derived"]))
    leaf_form = draw(
        st.sampled_from(["range", "singles"] + (["derived"] * (spine_form != "derived")))
    )
    ends = {}
    for name, form in (("spine1", spine_form), ("leaf1", leaf_form)):
        port = None if form == "derived" else draw(value)
        ends[name] = {"form": form, "port": port, "defaults": draw(value)}
    return {"field": field, "width": draw(st.integers(1, 3)), "ends": ends,
            "fabric": draw(value)}  # fmt: skip


def _compact_link_file(link: dict[str, object]) -> str:
    field, width = link["field"], link["width"]
    assert isinstance(field, str) and isinstance(width, int)
    fabric_ports = {k: v for k, v in OTHER.items() if k != field}
    if link["fabric"] is not None:
        fabric_ports[field] = link["fabric"]
    lines = [
        "name: t",
        "profile: nvidia-default",
        "defaults:",
        "  username: netops",
        "  credentials: {password_env: ROCE_TEST_PASSWORD}",
        f"  ports: {_flow(fabric_ports)}",
        "devices:",
    ]
    ends = link["ends"]
    assert isinstance(ends, dict)
    for k, (name, end) in enumerate(ends.items()):
        other = "leaf1" if name == "spine1" else "spine1"
        lines += [f"  - name: {name}", f"    role: {name[:-1]}", "    platform: arista_eos",
                  f"    host: 10.0.0.{k + 1}"]  # fmt: skip
        if end["defaults"] is not None:
            lines.append(f"    port_defaults: {_flow({field: end['defaults']})}")
        own = {field: end["port"]} if end["port"] is not None else {}
        if end["form"] == "range":
            entry = {"name": f"Ethernet1-{width}", "peer": f'"{other}:Ethernet{{n}}"', **own}
            lines += ["    ports:", f"      - {_flow(entry)}"]
        elif end["form"] == "singles":
            lines.append("    ports:")
            lines += [
                f"      - {_flow({'name': f'Ethernet{i}', 'peer': f'{other}:Ethernet{i}', **own})}"
                for i in range(1, width + 1)
            ]
    return "\n".join(lines) + "\n"


def _flow(values: dict[str, object]) -> str:
    return "{" + ", ".join(f"{key}: {value}" for key, value in values.items()) + "}"


@settings(max_examples=150, deadline=None, derandomize=True)
@given(compact_links())
def test_two_ends_that_state_different_values_are_refused_naming_both(
    link: dict[str, object],
) -> None:
    """Each end states its port's value, else its port_defaults; an end that states nothing
    takes the other end's, a link where neither does takes defaults.ports. Different statements
    are refused (IR009, both ends and where each value came from), equal ones always load."""
    field, ends = link["field"], link["ends"]
    assert isinstance(field, str) and isinstance(ends, dict)
    stated = {
        name: end["port"] if end["port"] is not None else end["defaults"]
        for name, end in ends.items()
    }
    said = [_resolved(field, v) for v in stated.values() if v is not None]
    expected = said[0] if said else link["fabric"]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "fabric.yml"
        path.write_text(_compact_link_file(link), encoding="utf-8")
        os.environ.setdefault("ROCE_TEST_PASSWORD", "x")
        try:
            intent = load_fabric(path).intent
        except IntentError as exc:
            refused: IntentError | None = exc
        else:
            refused = None
    if len(set(map(str, said))) > 1:
        assert refused is not None, f"two ends, {said}, loaded"
        mismatches = [p for p in refused.problems if p.rule == "IR009"]
        assert mismatches, str(refused)
        for problem in mismatches:
            text = str(problem)
            assert field in problem.field, text
            assert "leaf1:Ethernet" in text and "spine1:Ethernet" in text, text
            assert text.count(" from ") == 2 and text.count(f"{path}:") == 3, text
        return
    if expected is None:
        assert refused is not None and "required" in str(refused), str(refused)
        return
    assert refused is None, str(refused)
    for device in intent.devices:
        assert len(device.ports) == link["width"]
        for port in device.ports:
            assert getattr(port, field) == _resolved(field, expected), (device.name, port)


# (what the spine says, what the leaf says, the spine end's provenance, the leaf end's): the
# issue's case, its derived-end variant, and port_defaults against port_defaults over a range.
REFUSED = [
    ("port_defaults: {cable_m: 20}\nports: [{name: Ethernet1, peer: 'leaf1:Ethernet49'}]",
     "ports: [{name: Ethernet49, peer: 'spine1:Ethernet1', cable_m: 3}]",
     "spine1:Ethernet1 has 20 m from port_defaults of spine1 (F:12:", "has 3 m from its port (F:"),
    ("port_defaults: {cable_m: 20}",
     "ports: [{name: Ethernet49, peer: 'spine1:Ethernet1', cable_m: 3}]",
     "spine1:Ethernet1 has 20 m from port_defaults of spine1 (F:12:", "has 3 m from its port (F:"),
    ("port_defaults: {mtu: 9100}",
     "port_defaults: {mtu: 9214}\nports: [{name: Ethernet49-50, peer: 'spine1:Ethernet{n}'}]",
     "has 9100 from port_defaults of spine1 (F:12:", "has 9214 from port_defaults of leaf1 (F:"),
]  # fmt: skip


def _indented(text: str) -> str:
    return "".join(f"    {line}\n" for line in text.splitlines())


@pytest.mark.parametrize(("spine", "leaf", "theirs", "mine"), REFUSED)
def test_a_default_on_one_end_against_a_value_on_the_other_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spine: str, leaf: str, theirs: str, mine: str
) -> None:
    monkeypatch.setenv("ROCE_TEST_PASSWORD", "x")
    path = tmp_path / "fabric.yml"
    path.write_text(
        "name: t\nprofile: nvidia-default\ndefaults:\n  username: netops\n"
        "  credentials: {password_env: ROCE_TEST_PASSWORD}\n"
        "  ports: {speed: 400G, mtu: 9214, cable_m: 3}\ndevices:\n"
        "  - name: spine1\n    role: spine\n    platform: arista_eos\n    host: 10.0.0.1\n"
        f"{_indented(spine)}"
        "  - name: leaf1\n    role: leaf\n    platform: arista_eos\n    host: 10.0.0.2\n"
        f"{_indented(leaf)}",
        encoding="utf-8",
    )
    result = CliRunner().invoke(main, ["check", str(path)])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if "IR009" in line]
    assert errors, result.output
    for error in errors:
        assert theirs.replace("F:", f"{path}:") in error, error
        assert mine.replace("F:", f"{path}:") in error, error
