"""Safety fields of a link (issue #29): cable_m and mtu have no silent default, both ends of a
link agree on speed, MTU and cable length (IR009, naming both ends and where each is written),
port names follow the platform (IR021), and ``rules_by_id()`` lists every rule ``check``
enforces, model-level ones included."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from agent.errors import IntentError
from agent.intent import sizing
from agent.intent.loader import load_fabric
from agent.intent.model import FabricIntent, Port
from agent.intent.plan import build_plan
from agent.intent.rules import MODEL_RULES, RULES, _link_ends_agree, rules_by_id

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
    assert f"spine1:Ethernet1 has {theirs}" in text and f"leaf1:Ethernet1 has {mine}" in text
    assert re.search(rf"other end at {re.escape(str(path))}:16:\d+\)$", text), text


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
