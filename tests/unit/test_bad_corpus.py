"""Every file in tests/data/bad is refused by ``roce-agent check`` with exit 2, naming the
file, the line and the field a user has to change (and the rule ID for cross-field rules)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent.app.cli import main

BAD = Path(__file__).resolve().parent.parent / "data" / "bad"

# file stem → (line, field, words the message must contain)
EXPECTED: dict[str, tuple[int, str, str]] = {
    "01-injection-interface-newline": (14, "devices[0].ports[0].name", "invalid interface name"),
    "02-injection-device-name": (15, "devices[1].name", "invalid name 'leaf1; reload'"),
    "03-injection-description": (19, "devices[1].description", "without newlines"),
    "04-unknown-platform": (16, "devices[1].platform", "'arista_eos'"),
    "05-misspelt-profile-field": (6, "overrides.pfc.priorites", "unknown field 'priorites'"),
    "06-bad-speed": (21, "devices[1].ports[1].speed", "got '100Q'"),
    "07-bad-size": (7, "overrides.ecn.queues[3].min_threshold", "got '15 parsecs'"),
    "08-probability-zero": (7, "overrides.ecn.queues[3].max_probability", "IR007"),
    "09-probability-over-100": (7, "overrides.ecn.queues[3].max_probability", "IR007"),
    "10-ecn-min-above-max": (7, "overrides.ecn.queues[3].min_threshold", "IR006"),
    "11-ecn-above-pause-threshold": (6, "overrides.buffers.pause_threshold", "IR005"),
    "12-watchdog-restore-before-detect": (6, "overrides.pfc.watchdog.restoration_ms", "IR008"),
    "13-roce-priority-without-pfc": (6, "overrides.pfc.priorities", "IR001"),
    "14-cnp-priority-lossless": (6, "overrides.pfc.priorities", "IR003"),
    "15-cnp-not-strict": (6, "overrides.ets.strict", "IR004"),
    "16-link-speed-mismatch": (20, "devices[1].ports[0].speed", "IR009"),
    "17-link-mtu-mismatch": (27, "devices[2].ports[0].mtu", "IR009"),
    "18-peer-device-missing": (14, "devices[0].ports[0].peer", "IR010"),
    "19-peer-port-missing": (21, "devices[1].ports[1].peer", "IR010"),
    "20-peer-asymmetric": (21, "devices[1].ports[1].peer", "IR011"),
    "21-duplicate-device": (22, "devices[2].name", "IR012"),
    "22-duplicate-port": (21, "devices[1].ports[1].name", "IR012"),
    "23-duplicate-yaml-key": (12, "devices[0].role", "duplicate key 'role'"),
    "24-yaml-syntax": (19, "", "YAML syntax error"),
    "25-profile-not-found": (3, "profile", "'nvidia-defualt' not found"),
    "26-no-credentials": (8, "devices[0]", "credentials is required"),
    "27-two-password-sources": (7, "defaults.credentials", "not both"),
    "28-ets-weights-sum": (6, "overrides.ets.weights", "IR013"),
    "29-roce-cnp-same-dscp": (5, "overrides.cnp.dscp", "IR014"),
    "30-headroom-too-small": (5, "overrides.buffers.xoff", "IR015"),
    "31-nic-cnp-dscp-mismatch": (6, "overrides.nic.dcqcn.cnp_dscp", "IR017"),
    "32-role-platform-mismatch": (22, "devices[2]", "IR020"),
    "33-priority-out-of-range": (5, "overrides.roce.priority", "less than or equal to 7"),
    "34-no-devices": (8, "devices", "at least 1 item"),
    "35-bad-mac": (27, "devices[2].ports[0].mac", "expected a MAC address"),
    "36-duplicate-mgmt-address": (18, "devices[1].host", "IR012"),
    "37-env-name-injection": (7, "defaults.credentials.password_env", "'X; curl evil'"),
    "38-unknown-top-level-key": (5, "defualts", "unknown field 'defualts'"),
    "39-negative-cable": (21, "devices[1].ports[1].cable_m", "greater than or equal to 0"),
    "40-lossy-without-ecn": (6, "overrides.ecn.enabled", "IR019"),
    # hostile input (#11): limits, control characters, numbers, paths, field names
    "41-alias-bomb": (8, "f[1]", "too many values after alias expansion"),
    "42-recursive-alias": (5, "overrides.pfc[0]", "recursive alias *loop"),
    "43-deep-nesting": (4, "overrides" + "[0]" * 63, "nesting too deep"),
    "44-nul-byte": (2, "", "control character U+0000 (NUL byte)"),
    "45-raw-ansi-escape": (13, "", "control character U+001B"),
    "46-ansi-escape-in-key": (5, "overrides", "Actual: '\\x1b[2J\\x1b[31mpfc'"),
    "47-duplicate-int-str-key": (8, "overrides.ecn.queues[3]", "duplicate key '3'"),
    "48-fullwidth-digits-speed": (21, "devices[1].ports[1].speed", "got '１００G'"),
    "49-5000-digit-int": (21, "devices[1].ports[1].mtu", "Actual: 5000 digits"),
    "50-infinite-float": (21, "devices[1].ports[1].cable_m", "Expected: a finite number"),
    "51-speed-1-bps": (21, "devices[1].ports[1].speed", "from 1M to 800G Actual: 1"),
    "52-speed-1T": (21, "devices[1].ports[1].speed", "from 1M to 800G Actual: '1T'"),
    "53-interface-dotdot": (27, "devices[2].ports[0].name", "invalid interface name 'eth..0'"),
    "54-profile-absolute-path": (3, "profile", "Actual: an absolute path"),
    "55-profile-dotdot-escape": (3, "profile", "Actual: /etc/passwd (outside them)"),
    "56-key-with-brackets": (29, "devices[2].ports[0]['mtu[0]']", "unknown field 'mtu[0]'"),
    "57-not-utf8": (26, "", "Expected: UTF-8 text Actual: byte 0xe9"),
    "58-impossible-date": (2, "name", "cannot read value"),
    "59-nan": (21, "devices[1].ports[1].cable_m", "Expected: a finite number Actual: .nan"),
    "60-bidi-override": (13, "", "control character U+202E"),
    "61-escaped-nul-in-value": (2, "name", "Actual: 'bad\\x00example'"),
    "62-merge-key-loop": (5, "overrides['<<']", "recursive alias *m"),
    "63-huge-integer-speed": (21, "devices[1].ports[1].speed", "from 1M to 800G"),
    "64-profile-is-a-folder": (3, "profile", "'./captures/' not found"),
    # issue #29: cable lengths agree on both ends; port names follow the platform
    "65-link-cable-mismatch": (20, "devices[1].ports[0].cable_m", "IR009"),
    "66-port-name-of-another-platform": (21, "devices[1].ports[1].name", "IR021"),
}


def test_corpus_is_complete() -> None:
    on_disk = {p.stem for p in BAD.glob("*.yml")}
    assert on_disk == set(EXPECTED)
    assert len(on_disk) >= 64


@pytest.mark.parametrize("stem", sorted(EXPECTED))
def test_bad_fabric_is_refused_with_file_line_and_field(stem: str) -> None:
    line, field, words = EXPECTED[stem]
    path = BAD / f"{stem}.yml"
    result = CliRunner().invoke(main, ["check", str(path)], env={"ROCE_TEST_PASSWORD": "x"})
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    errors = [row for row in result.stderr.splitlines() if row.startswith("error: ")]
    assert errors, result.stderr
    prefix = f"error: {path}:{line}:"
    wanted = [
        row
        for row in errors
        if row.startswith(prefix) and (not field or f": {field}: " in row) and words in row
    ]
    assert wanted, f"no error at line {line} naming {field!r} with {words!r}:\n{result.stderr}"
    assert re.match(rf"error: {re.escape(str(path))}:{line}:\d+: ", wanted[0])
    # Whatever the file held, nothing a terminal would act on reaches it.
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e]", result.stderr)


def test_console_script_exit_code_and_no_traceback() -> None:
    """The installed entry point behaves like the in-process CLI (real exit status)."""
    path = BAD / "01-injection-interface-newline.yml"
    done = subprocess.run(
        [sys.executable, "-m", "agent", "check", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert f"{path}:14:" in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
