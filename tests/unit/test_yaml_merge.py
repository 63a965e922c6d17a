"""YAML merge keys (``<<: *anchor``) and ``x-`` keys: what they give, and where it points.

A fabric written with anchors must still report every problem at the line where the value
is written: the anchor for a merged value, the device for its own. Merge keys are YAML 1.1's
(https://yaml.org/type/merge.html), as PyYAML's SafeLoader reads them (flatten_mapping); the
bounded composer in common/yamlsource.py builds them itself to keep the positions.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.errors import IntentError
from agent.intent.loader import load_fabric
from common.yamlsource import load_yaml


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "f.yml"
    path.write_text(text)
    return path


POSITIONS = [
    # (YAML, data path, expected line:column of the value)
    ("b: &b {a: 1}\nx:\n  <<: *b\n", ("x", "a"), "1:11"),  # merged: where the anchor says it
    ("b: &b {a: 1}\nx:\n  <<: *b\n  a: 2\n", ("x", "a"), "4:6"),  # own key wins, own position
    ("p: &p {a: 1}\nq: &q {a: 2}\nx: {<<: [*p, *q]}\n", ("x", "a"), "1:11"),  # first listed wins
    ("p: &p {a: 1}\nq: &q {a: 2}\nx: {<<: [*q, *p]}\n", ("x", "a"), "2:11"),
    ("i: &i {c: {d: 1}}\no: &o {<<: *i, e: 2}\nx: {<<: *o}\n", ("x", "c", "d"), "1:15"),  # nested
    ("l:\n  - &d {a: 1}\n  - {<<: *d, b: 2}\n", ("l", 1, "a"), "2:12"),  # in a list item
]


@pytest.mark.parametrize(("text", "path", "where"), POSITIONS)
def test_merged_values_point_where_they_are_written(
    tmp_path: Path, text: str, path: tuple[str | int, ...], where: str
) -> None:
    _, source = load_yaml(_write(tmp_path, text))
    position = source.locate(path)
    assert position is not None and f"{position.line}:{position.column}" == where


def test_a_second_merge_key_is_a_duplicate(tmp_path: Path) -> None:
    text = "p: &p {a: 1}\nq: &q {b: 2}\nx:\n  <<: *p\n  <<: *q\n"
    with pytest.raises(IntentError) as caught:
        load_yaml(_write(tmp_path, text))
    (problem,) = caught.value.problems
    assert problem.position is not None and problem.position.line == 5
    assert "duplicate key '<<'" in problem.message and "<<: [*a, *b]" in problem.message


FABRIC = """\
name: t
profile: nvidia-default
x-switch: &switch
  platform: {platform}
  username: netops
  credentials: {{password_env: FABRIC_PW}}
x-notes: anything at all, ignored
defaults:
  ports: {{speed: 100G, mtu: 9100, cable_m: 3}}
devices:
  - {{<<: *switch, name: leaf1, role: leaf, host: 10.0.0.1, ports: [{{name: Ethernet1}}]}}
  - <<: *switch
    name: spine1
    role: spine
    host: 10.0.0.2
    username: {spine_user}
"""


def test_anchors_in_x_keys_fill_devices(tmp_path: Path) -> None:
    intent = load_fabric(
        _write(tmp_path, FABRIC.format(platform="arista_eos", spine_user="admin"))
    ).intent
    leaf, spine = intent.devices
    assert (leaf.platform, leaf.username, spine.platform) == ("arista_eos", "netops", "arista_eos")
    assert spine.username == "admin"  # the device's own key beats the merged one
    assert leaf.credentials is not None and leaf.credentials.password_env == "FABRIC_PW"


@pytest.mark.parametrize(
    ("platform", "spine_user", "line", "column", "field"),
    [
        # a bad value in the anchor: reported at the anchor, once per device that merges it
        ("junos", "admin", 4, 13, "devices[0].platform"),
        # a bad value of the device's own: at the device
        ("arista_eos", "'bad user'", 16, 15, "devices[1].username"),
    ],
)
def test_errors_in_merged_values_point_into_the_file(
    tmp_path: Path, platform: str, spine_user: str, line: int, column: int, field: str
) -> None:
    path = _write(tmp_path, FABRIC.format(platform=platform, spine_user=spine_user))
    with pytest.raises(IntentError) as caught:
        load_fabric(path)
    located = [
        p
        for p in caught.value.problems
        if p.position is not None and (p.position.line, p.position.column) == (line, column)
    ]
    assert any(p.field == field for p in located), str(caught.value)


def test_only_x_keys_are_ignored_at_the_top(tmp_path: Path) -> None:
    text = FABRIC.format(platform="arista_eos", spine_user="admin").replace("x-notes", "notes")
    with pytest.raises(IntentError) as caught:
        load_fabric(_write(tmp_path, text))
    (problem,) = caught.value.problems
    assert problem.position is not None and (problem.position.line, problem.position.column) == (
        7,
        1,
    )
    assert "unknown field 'notes'" in problem.message and "x-" in problem.message
