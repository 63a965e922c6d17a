"""The lab switch's SONiC Generic Config Updater: checkpoint, apply-patch (and its refusals),
dry run, rollback, list/delete checkpoints, config save and persistence, the rollback timer.

Expected texts are sonic-utilities' own (config/main.py, generic_config_updater/*.py, commit
691b1bbc4fd2b71657d1b0b334c37136deb51526) and python-jsonpatch's for refused operations.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.device.platforms.sonic import Sonic
from tests.unit.sonic_lab_helpers import LabSonic, run

WRED_MIN = "/WRED_PROFILE/AZURE_LOSSLESS/green_min_threshold"


def _patch(*ops: dict[str, object]) -> str:
    return json.dumps(list(ops))


async def _applied(lab: LabSonic, patch: str, *flags: str) -> str:
    await lab.write("/tmp/p.json", patch)
    return await lab.run(" ".join(["sudo config apply-patch /tmp/p.json", *flags]))


def test_apply_patch_changes_config_db_and_the_data_plane() -> None:
    async def scenario() -> None:
        lab = await LabSonic().start()
        assert lab.qos()["ports"]["eth1"]["queues"]["3"]["ecn"]["min_bytes"] == 1048576
        out = await _applied(lab, _patch({"op": "add", "path": WRED_MIN, "value": "20000"}))
        assert out.splitlines()[0] == "Patch Applier: localhost: Patch application starting."
        assert out.splitlines()[-1] == "Patch applied successfully."
        assert lab.switch.db["WRED_PROFILE"]["AZURE_LOSSLESS"]["green_min_threshold"] == "20000"
        assert lab.qos()["ports"]["eth1"]["queues"]["3"]["ecn"]["min_bytes"] == 20000
        assert lab.qos()["ports"]["eth2"]["queues"]["4"]["ecn"]["min_bytes"] == 20000

    run(scenario())


# (what the patch does, the patch, the words GCU's failure must contain)
REFUSALS = [
    (
        "remove of a missing member",
        _patch({"op": "remove", "path": "/WRED_PROFILE/AZURE_LOSSLESS/nope"}),
        "failed due to: can't remove a non-existent object 'nope'",
    ),
    (
        "replace of a missing member",
        _patch({"op": "replace", "path": "/SCHEDULER/scheduler.0/priority", "value": "1"}),
        "can't replace a non-existent object 'priority'",
    ),
    (
        "add under a missing entry",
        _patch({"op": "add", "path": "/QUEUE/Ethernet0|7/wred_profile", "value": "AZURE_LOSSLESS"}),
        "member 'Ethernet0|7' not found in",
    ),
    (
        "unknown field",
        _patch({"op": "add", "path": "/WRED_PROFILE/AZURE_LOSSLESS/colour", "value": "blue"}),
        "Data Loading Failed\nAll Keys are not parsed in WRED_PROFILE\ndict_keys(['colour'])",
    ),
    (
        "value out of range",
        _patch(
            {
                "op": "add",
                "path": "/WRED_PROFILE/AZURE_LOSSLESS/green_drop_probability",
                "value": "150",
            }
        ),
        'Invalid value "150" in "green_drop_probability" element.',
    ),
    (
        "reference to a missing WRED profile",
        _patch({"op": "add", "path": "/QUEUE/Ethernet0|3/wred_profile", "value": "NOPE"}),
        'of value "NOPE" points to a non-existing leaf.',
    ),
    (
        "entry of a port the switch does not have",
        _patch({"op": "add", "path": "/PFC_WD/Ethernet99", "value": {"action": "drop"}}),
        'of value "Ethernet99" points to a non-existing leaf.',
    ),
    (
        "table without a YANG model",
        _patch({"op": "add", "path": "/FOO_TABLE", "value": {"x": {"a": "b"}}}),
        "- localhost: Given patch is not valid because it has changes to tables without YANG "
        "models",
    ),
    (
        "removal GCU forbids",
        _patch({"op": "remove", "path": "/PFC_WD/GLOBAL"}),
        "Given patch operation is invalid. Operation: remove is illegal on field: /PFC_WD/GLOBAL",
    ),
    (
        "an empty table left behind",
        _patch({"op": "remove", "path": "/CABLE_LENGTH/AZURE"}),
        "given patch is not valid because it will result in empty tables",
    ),
    (
        "not a JSON patch",
        json.dumps([{"op": "add", "value": 1}]),
        "Invalid patch format in file: /tmp/p.json",
    ),
    (
        "not JSON",
        "[{",
        "Expecting property name enclosed in double quotes",
    ),
    (
        "ECN min above max (valid SONiC, refused by the lab data plane)",
        _patch({"op": "add", "path": WRED_MIN, "value": "9999999"}),
        "- localhost: localhost: lab data plane refused the config:",
    ),
]


@pytest.mark.parametrize(("what", "patch", "words"), REFUSALS, ids=[r[0] for r in REFUSALS])
def test_refused_patch_changes_nothing(what: str, patch: str, words: str) -> None:
    async def scenario() -> None:
        lab = await LabSonic().start()
        before, pushes = lab.switch.db, len(lab.dataplane.set_qos_calls)
        out = await _applied(lab, patch)
        assert "Failed to apply patch due to: " in out
        assert words in out
        assert "Usage: config apply-patch [OPTIONS] PATCH_FILE_PATH" in out
        assert "\nError: " in out
        assert "Patch applied successfully." not in out
        assert lab.switch.db == before
        assert len(lab.dataplane.set_qos_calls) == pushes

    run(scenario())


def test_missing_patch_file() -> None:
    async def scenario() -> None:
        lab = await LabSonic().start()
        out = await lab.run("sudo config apply-patch /tmp/none.json")
        assert "Error: [Errno 2] No such file or directory: '/tmp/none.json'" in out

    run(scenario())


def test_a_missing_table_is_created_by_the_patch() -> None:
    """``append_emptytables_if_required``: adding an entry to an absent table works."""

    async def scenario() -> None:
        lab = await LabSonic().start()
        assert "DOT1P_TO_TC_MAP" not in lab.switch.db
        value = {str(p): str(p) for p in range(8)}
        out = await _applied(
            lab, _patch({"op": "add", "path": "/DOT1P_TO_TC_MAP/ROCE", "value": value})
        )
        assert out.endswith("Patch applied successfully.")
        assert lab.switch.db["DOT1P_TO_TC_MAP"] == {"ROCE": value}

    run(scenario())


def test_dry_run_changes_nothing() -> None:
    async def scenario() -> None:
        lab = await LabSonic().start()
        before, pushes = lab.switch.db, len(lab.dataplane.set_qos_calls)
        out = await _applied(lab, _patch({"op": "add", "path": WRED_MIN, "value": "20000"}), "-d")
        assert out.splitlines()[0] == "** DRY RUN EXECUTION **"
        assert "** DryRun: Would apply [{" in out
        assert out.endswith("Patch applied successfully.")
        assert lab.switch.db == before
        assert len(lab.dataplane.set_qos_calls) == pushes

    run(scenario())


def test_checkpoint_rollback_list_and_delete(tmp_path: Path) -> None:
    async def scenario() -> None:
        lab = await LabSonic(tmp_path).start()
        factory, factory_qos = lab.switch.db, lab.qos()
        out = await lab.run("sudo config checkpoint before")
        assert out.endswith("Checkpoint created successfully.")
        assert "Saving config db content to /etc/sonic/checkpoints/before.cp.json." in out
        saved = tmp_path / "checkpoints" / "before.cp.json"
        assert json.loads(saved.read_text()) == factory
        await _applied(lab, _patch({"op": "add", "path": WRED_MIN, "value": "20000"}))
        assert lab.qos() != factory_qos
        assert json.loads(await lab.run("sudo config list-checkpoints")) == ["before"]
        timed = json.loads(await lab.run("sudo config list-checkpoints -t"))
        assert [c["name"] for c in timed] == ["before"] and timed[0]["time"].endswith("+00:00")
        out = await lab.run("sudo config rollback before")
        assert out.endswith("Config rolled back successfully.")
        assert lab.switch.db == factory
        assert lab.qos() == factory_qos
        out = await lab.run("sudo config delete-checkpoint before")
        assert out.endswith("Checkpoint deleted successfully.")
        assert not saved.exists()
        assert json.loads(await lab.run("sudo config list-checkpoints")) == []

    run(scenario())


# (command, the lines its failure ends with)
CHECKPOINT_ERRORS = [
    (
        "sudo config rollback nope",
        [
            "Failed to rollback config",
            "Usage: config rollback [OPTIONS] CHECKPOINT_NAME",
            "Try 'config rollback -h' for help.",
            "",
            "Error: Checkpoint 'nope' does not exist",
        ],
    ),
    (
        "sudo config delete-checkpoint nope",
        [
            "Failed to delete config checkpoint",
            "Usage: config delete-checkpoint [OPTIONS] CHECKPOINT_NAME",
            "Try 'config delete-checkpoint -h' for help.",
            "",
            "Error: Checkpoint 'nope' does not exist",
        ],
    ),
    (
        "sudo config checkpoint",
        [
            "Usage: config checkpoint [OPTIONS] CHECKPOINT_NAME",
            "Try 'config checkpoint -h' for help.",
            "",
            "Error: Missing argument 'CHECKPOINT_NAME'.",
        ],
    ),
    (
        "sudo config apply-patch -x /tmp/p.json",
        [
            "Usage: config apply-patch [OPTIONS] PATCH_FILE_PATH",
            "Try 'config apply-patch -h' for help.",
            "",
            "Error: No such option: -x",
        ],
    ),
    ("config checkpoint x", ["Root privileges are required for this operation"]),
]


@pytest.mark.parametrize(
    ("command", "tail"), CHECKPOINT_ERRORS, ids=[c for c, _ in CHECKPOINT_ERRORS]
)
def test_command_errors(command: str, tail: list[str]) -> None:
    async def scenario() -> None:
        lab = await LabSonic().start()
        out = await lab.run(command)
        assert out.splitlines()[-len(tail) :] == tail

    run(scenario())


def test_config_save_persists_across_a_restart(tmp_path: Path) -> None:
    async def scenario() -> None:
        lab = await LabSonic(tmp_path).start()
        await _applied(lab, _patch({"op": "add", "path": WRED_MIN, "value": "20000"}))
        await lab.run("sudo config checkpoint kept")
        out = await lab.run("sudo config save -y")
        assert out == (
            "Running command: /usr/local/bin/sonic-cfggen -d --print-data > "
            "/etc/sonic/config_db.json"
        )
        db, qos = lab.switch.db, lab.qos()
        restarted = await LabSonic(tmp_path).start()  # a new process on the same state dir
        assert restarted.switch.db == db
        assert restarted.qos() == qos
        assert json.loads(await restarted.run("sudo config list-checkpoints")) == ["kept"]

    run(scenario())


def test_unsaved_changes_are_lost_on_restart(tmp_path: Path) -> None:
    async def scenario() -> None:
        lab = await LabSonic(tmp_path).start()
        factory = lab.switch.db
        await _applied(lab, _patch({"op": "add", "path": WRED_MIN, "value": "20000"}))
        restarted = await LabSonic(tmp_path).start()
        assert restarted.switch.db == factory

    run(scenario())


def test_replace_with_the_checkpoint_content() -> None:
    async def scenario() -> None:
        lab = await LabSonic().start()
        factory = lab.switch.db
        await _applied(lab, _patch({"op": "add", "path": WRED_MIN, "value": "20000"}))
        await lab.write("/tmp/full.json", json.dumps(factory))
        out = await lab.run("sudo config replace /tmp/full.json")
        assert out.endswith("Config replaced successfully.")
        assert lab.switch.db == factory

    run(scenario())


# ------------------------------------------------------------------------------- timers


ROLLBACK_TIMER = (
    "sudo systemd-run --on-active=60 --unit=roce-agent-20260101-000000-001-rollback "
    "/usr/local/bin/config rollback roce-agent-20260101-000000-001"
)
TIMERS = "systemctl list-timers --all --plain --no-legend 'roce-agent-*-rollback.timer'"


def test_the_timer_rolls_back_when_it_fires() -> None:
    async def scenario() -> None:
        lab = await LabSonic().start()
        factory, factory_qos = lab.switch.db, lab.qos()
        await lab.run("sudo config checkpoint roce-agent-20260101-000000-001")
        await _applied(lab, _patch({"op": "add", "path": WRED_MIN, "value": "20000"}))
        out = await lab.run(ROLLBACK_TIMER)
        assert out == (
            "Running timer as unit: roce-agent-20260101-000000-001-rollback.timer\n"
            "Will run service as unit: roce-agent-20260101-000000-001-rollback.service"
        )
        await lab.fire_timers(30)
        assert lab.switch.db != factory  # not yet
        listed = await lab.run(TIMERS)
        assert " 30s left " in listed
        sessions = Sonic.sessions_from_text(
            "leaf1", await lab.run("sudo config list-checkpoints"), listed
        )
        assert [(s.name, s.rollback_in_s) for s in sessions] == [
            ("roce-agent-20260101-000000-001", 30.0)
        ]
        await lab.fire_timers(31)
        assert lab.switch.db == factory
        assert lab.qos() == factory_qos
        elapsed = await lab.run(TIMERS)
        assert elapsed.split()[:2] == ["n/a", "n/a"]  # elapsed, still loaded
        assert " left" not in elapsed

    run(scenario())


def test_a_stopped_timer_never_fires() -> None:
    async def scenario() -> None:
        lab = await LabSonic().start()
        await lab.run("sudo config checkpoint roce-agent-20260101-000000-001")
        await _applied(lab, _patch({"op": "add", "path": WRED_MIN, "value": "20000"}))
        changed = lab.switch.db
        await lab.run(ROLLBACK_TIMER)
        out = await lab.run("sudo systemctl stop roce-agent-20260101-000000-001-rollback.timer")
        assert out == ""
        await lab.fire_timers(120)
        assert lab.switch.db == changed
        assert await lab.run(TIMERS) == ""
        again = await lab.run("sudo systemctl stop roce-agent-20260101-000000-001-rollback.timer")
        assert again == (
            "Failed to stop roce-agent-20260101-000000-001-rollback.timer: Unit "
            "roce-agent-20260101-000000-001-rollback.timer not loaded."
        )

    run(scenario())


# (systemd-run arguments, what it prints)
SYSTEMD_RUN = [
    ("--on-active=5min --unit=t1 /bin/true", "Running timer as unit: t1.timer"),
    ("--on-active=1h --unit=t1 -q /bin/true", ""),
    ("--on-active=soon --unit=t1 /bin/true", "Failed to parse timer value: soon"),
    ("--on-active=60 --unit=t1", "Command line to execute required."),
    ("--frobnicate /bin/true", "systemd-run: unrecognized option '--frobnicate'"),
]


@pytest.mark.parametrize(("args", "first_line"), SYSTEMD_RUN, ids=[a for a, _ in SYSTEMD_RUN])
def test_systemd_run_arguments(args: str, first_line: str) -> None:
    async def scenario() -> None:
        lab = await LabSonic().start()
        out = await lab.run(f"sudo systemd-run {args}")
        assert (out.splitlines() or [""])[0] == first_line

    run(scenario())


def test_timer_names_are_unique_and_need_root() -> None:
    async def scenario() -> None:
        lab = await LabSonic().start()
        assert (await lab.run("systemd-run --on-active=60 --unit=t1 /bin/true")) == (
            "Failed to start transient timer unit: Interactive authentication required."
        )
        await lab.run("sudo systemd-run --on-active=60 --unit=t1 /bin/true")
        assert (await lab.run("sudo systemd-run --on-active=60 --unit=t1 /bin/true")) == (
            "Failed to start transient timer unit: Unit t1.timer was already loaded or has a "
            "fragment file."
        )
        listing = await lab.run("systemctl list-timers")
        lines = listing.splitlines()
        assert lines[0].split() == ["NEXT", "LEFT", "LAST", "PASSED", "UNIT", "ACTIVATES"]
        assert "1min 0s left" in lines[1] and lines[1].endswith("t1.timer t1.service")
        assert lines[-2:] == [
            "1 timers listed.",
            "Pass --all to see loaded but inactive timers, too.",
        ]

    run(scenario())


def test_the_drivers_timer_command_rolls_back_and_drops_the_checkpoint() -> None:
    """``/bin/sh -c 'config rollback X && config delete-checkpoint X'`` as the service."""

    async def scenario() -> None:
        lab = await LabSonic().start()
        factory = lab.switch.db
        name = "roce-agent-20260101-000000-001"
        await lab.run(f"sudo config checkpoint {name}")
        await _applied(lab, _patch({"op": "add", "path": WRED_MIN, "value": "20000"}))
        config = "/usr/local/bin/config"
        undo = f"{config} rollback {name} && {config} delete-checkpoint {name}"
        await lab.run(f"sudo systemd-run --on-active=5 --unit={name}-rollback /bin/sh -c '{undo}'")
        await lab.fire_timers(6)
        assert lab.switch.db == factory
        assert json.loads(await lab.run("sudo config list-checkpoints")) == []

    run(scenario())


# (sh -c text, what it prints: && stops after a failure, || runs after one, ; always)
COMMAND_STRINGS = [
    ("echo a && echo b", "a\nb"),
    ("cat /tmp/none && echo b", "cat: /tmp/none: No such file or directory"),
    ("cat /tmp/none || echo b", "cat: /tmp/none: No such file or directory\nb"),
    ("cat /tmp/none; echo b", "cat: /tmp/none: No such file or directory\nb"),
    ("config rollback nope && echo b", "Root privileges are required for this operation"),
]


@pytest.mark.parametrize(("text", "expected"), COMMAND_STRINGS, ids=[t for t, _ in COMMAND_STRINGS])
def test_sh_c(text: str, expected: str) -> None:
    async def scenario() -> str:
        lab = await LabSonic().start()
        output: str = await lab.shell.run_argv(["/bin/sh", "-c", text], root=False)
        return output

    assert run(scenario()) == expected
