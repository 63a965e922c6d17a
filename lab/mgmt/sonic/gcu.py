"""The Generic Config Updater: ``config apply-patch``, ``replace``, ``checkpoint``,
``rollback``, ``list-checkpoints``, ``delete-checkpoint`` (and ``config save``).

Written from sonic-net/sonic-utilities (commit 691b1bbc4fd2b71657d1b0b334c37136deb51526):

* ``config/main.py``: the click commands, their options, and what they print ("Patch applied
  successfully.", "Failed to apply patch due to: ...", "Config rolled back successfully.",
  "Failed to rollback config", "Checkpoint created successfully.", "Checkpoint deleted
  successfully.", ``json.dumps(checkpoints, indent=4)``, "** DRY RUN EXECUTION **"); a failure
  ends with ``ctx.fail(ex)`` (click: ``Usage: ...``, ``Try '... -h' for help.``, ``Error: ...``).
* ``generic_config_updater/main.py`` ``apply_patch_from_file``: the file is read and checked
  (``Invalid patch format in file: ...``), missing tables get an empty ``add`` first
  (``append_emptytables_if_required``), the patch is simulated and YANG-validated
  (``Validate json patch: [...] failed due to: ...``), then applied per scope; a scope's failure
  is ``Failed to apply patch on the following scopes:\\n- localhost: ...``.
* ``generic_config_updater/generic_updater.py``: the ``Patch Applier`` / ``Config Replacer`` /
  ``Config Rollbacker`` log lines GCU prints to the console (``TitledLogger`` in
  ``gu_common.py``: ``"<title>: <msg>"``), field-operation rules (``remove`` of
  ``/PFC_WD/GLOBAL`` is illegal), the empty-table refusal, and ``StrictPatchSorter``'s refusal of
  tables without YANG models.

A failed patch changes nothing here (the lab validates all of it before committing); a real
GCU applies its sorted changes one by one and can stop half way (the agent rolls back to its
checkpoint for that reason). Each change is one operation of the patch (GCU's sorter may split
or reorder them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

from lab.mgmt.sonic import jsonpatch, schema
from lab.mgmt.sonic.checkpoints import CheckpointStore
from lab.mgmt.sonic.configdb import SHOWN_CONFIG_DB_PATH, ConfigDb, clone

SCOPE = "localhost"  # gu_common.HOST_NAMESPACE
ILLEGAL_REMOVALS = (
    "/PFC_WD/GLOBAL/POLL_INTERVAL",
    "/PFC_WD/GLOBAL",
    "/LOOPBACK_INTERFACE/Loopback0",
)
CFGGEN = "/usr/local/bin/sonic-cfggen"


class GcuError(Exception):
    """A GCU failure: its message is what the command's ``Error:`` line says."""


class CommitError(Exception):
    """The lab could not put the config into effect (the data plane refused it)."""


class ConfigDbOwner(Protocol):
    """The switch state GCU reads and changes."""

    checkpoints: CheckpointStore
    files: dict[str, str]

    @property
    def db(self) -> ConfigDb:
        """The running CONFIG_DB."""
        ...

    async def commit(self, candidate: ConfigDb) -> None:
        """Make ``candidate`` the running CONFIG_DB (CommitError if the data plane refuses)."""
        ...

    async def save(self) -> None:
        """``config save``: write the running CONFIG_DB to config_db.json."""
        ...


@dataclass
class Console:
    """What a command prints (stdout and stderr, interleaved as a terminal shows them)."""

    lines: list[str]

    def log(self, title: str, message: str) -> None:
        """``TitledLogger.log``: ``"<title>: <msg>"`` (print_all_to_console=True)."""
        self.lines.append(f"{title}: {message}")

    def text(self) -> str:
        return "\n".join(self.lines)


def click_failure(console: Console, command: str, metavar: str, message: str) -> None:
    """``ctx.fail(message)`` (click 8's usage error, exit code 2)."""
    console.lines += [
        f"Usage: config {command} [OPTIONS] {metavar}",
        f"Try 'config {command} -h' for help.",
        "",
        f"Error: {message}",
    ]


# ------------------------------------------------------------------------------- apply-patch


def _read_patch(owner: ConfigDbOwner, path: str) -> list[dict[str, Any]]:
    text = owner.files.get(path)
    if text is None:
        raise GcuError(f"[Errno 2] No such file or directory: '{path}'")
    try:
        patch = json.loads(text)
    except json.JSONDecodeError as exc:
        raise GcuError(str(exc)) from None
    if not _valid_format(patch):
        raise GcuError(f"Invalid patch format in file: {path}")
    ops: list[dict[str, Any]] = patch
    return ops


def _valid_format(patch: Any) -> bool:
    """``validate_patch_format``."""
    return isinstance(patch, list) and all(
        isinstance(op, dict) and "op" in op and "path" in op and op["op"] in jsonpatch.OPS
        for op in patch
    )


def _with_missing_tables(ops: list[dict[str, Any]], db: ConfigDb) -> list[dict[str, Any]]:
    """``append_emptytables_if_required``: an empty ``add`` before a missing table's first use."""
    result = list(ops)
    for table in sorted({_table_of(op["path"]) for op in ops} - set(db) - {""}):
        first = next(i for i, op in enumerate(result) if _table_of(op["path"]) == table)
        result.insert(first, {"op": "add", "path": f"/{jsonpatch.escape(table)}", "value": {}})
    return result


def _table_of(path: str) -> str:
    try:
        parts = jsonpatch.parse_pointer(path)
    except jsonpatch.PatchError:
        return ""
    return parts[0] if parts else ""


def _validate_patch(ops: list[dict[str, Any]], db: ConfigDb) -> None:
    """``validate_patch``: simulate on the running config and check the YANG models."""
    try:
        target = jsonpatch.apply_patch(db, ops)
        if not isinstance(target, dict):
            raise jsonpatch.PatchError("the patched config is not a JSON object")
        schema.validate(target)
    except schema.YangError as exc:
        raise GcuError(
            f"Validate json patch: {ops} failed due to: Data Loading Failed\n{exc}"
        ) from None
    except jsonpatch.PatchError as exc:
        raise GcuError(f"Validate json patch: {ops} failed due to: {exc}") from None


def _field_operations(old: ConfigDb, target: ConfigDb) -> None:
    """``ConfigWrapper.validate_field_operation``: removals GCU never allows."""
    for op in jsonpatch.make_patch(old, target):
        if op["op"] == "remove" and op["path"] in ILLEGAL_REMOVALS:
            raise GcuError(
                "Given patch operation is invalid. Operation: remove is illegal on field: "
                + op["path"]
            )


def _empty_tables(target: ConfigDb) -> None:
    empty = [table for table, entries in target.items() if not entries]
    if empty:
        plural = "s" if len(empty) != 1 else ""
        pad = " " * 32
        raise GcuError(
            f"{SCOPE}: given patch is not valid because it will result in empty tables "
            f"{pad}which is not allowed in ConfigDb. {pad}Table{plural}: {', '.join(empty)}"
        )


async def _patch_applier(
    console: Console, owner: ConfigDbOwner, ops: list[dict[str, Any]], dry_run: bool
) -> ConfigDb:
    """``PatchApplier.apply``; returns the new config (committed unless ``dry_run``)."""
    title = "Patch Applier"
    console.log(title, f"{SCOPE}: Patch application starting.")
    console.log(title, f"{SCOPE}: Patch: {json.dumps(ops)}")
    console.log(title, f"{SCOPE} getting current config db.")
    old = owner.db
    console.log(title, f"{SCOPE}: simulating the target full config after applying the patch.")
    try:
        target: ConfigDb = jsonpatch.apply_patch(old, ops)
    except jsonpatch.PatchError as exc:
        raise GcuError(str(exc)) from None
    console.log(
        title,
        f"{SCOPE}: validating all JsonPatch operations are permitted on the specified fields",
    )
    _field_operations(old, target)
    console.log(
        title,
        f"{SCOPE}: validating target config does not have empty tables,\n"
        + " " * 28
        + "since they do not show up in ConfigDb.",
    )
    _empty_tables(target)
    console.log(title, f"{SCOPE}: sorting patch updates.")
    if any(not schema.has_model(_table_of(op["path"])) for op in ops):
        raise GcuError(
            "Given patch is not valid because it has changes to tables without YANG models"
        )
    count, plural = len(ops), "s" if len(ops) != 1 else ""
    colon = ":" if ops else "."
    console.log(title, f"The {SCOPE} patch was converted into {count} change{plural}{colon}")
    console.log(title, f"{SCOPE}: applying {count} change{plural} in order{colon}")
    for op in ops:
        console.log(title, f"  * {json.dumps([op])}")
        if dry_run:
            console.log("** DryRun", f"Would apply {json.dumps([op])}")
    console.log(title, f"{SCOPE}: verifying patch updates are reflected on ConfigDB.")
    if not dry_run:
        try:
            await owner.commit(target)
        except CommitError as exc:
            raise GcuError(f"{SCOPE}: {exc}") from None
    console.log(title, f"{SCOPE} patch application completed.")
    return target


@dataclass(frozen=True)
class PatchRequest:
    """``config apply-patch`` arguments."""

    path: str
    dry_run: bool = False
    config_format: str = "CONFIGDB"


async def apply_patch(console: Console, owner: ConfigDbOwner, request: PatchRequest) -> bool:
    """``config apply-patch``."""
    if request.dry_run:
        console.lines.append("** DRY RUN EXECUTION **")
    try:
        await _apply_patch_from_file(console, owner, request)
    except GcuError as exc:
        console.lines.append(f"Failed to apply patch due to: {exc}")
        click_failure(console, "apply-patch", "PATCH_FILE_PATH", str(exc))
        return False
    console.lines.append("Patch applied successfully.")
    return True


async def _apply_patch_from_file(
    console: Console, owner: ConfigDbOwner, request: PatchRequest
) -> None:
    ops = _read_patch(owner, request.path)
    if request.config_format != "CONFIGDB":
        raise GcuError("lab: only CONFIGDB-format patches are emulated (SONICYANG is not)")
    ops = _with_missing_tables(ops, owner.db)
    _validate_patch(ops, owner.db)
    try:
        await _patch_applier(console, owner, ops, request.dry_run)
    except GcuError as exc:
        raise GcuError(
            f"Failed to apply patch on the following scopes:\n- {SCOPE}: {exc}"
        ) from None


# ------------------------------------------------------------------------------- replace


async def _replace(console: Console, owner: ConfigDbOwner, target: ConfigDb, dry_run: bool) -> None:
    """``ConfigReplacer.replace``."""
    title = "Config Replacer"
    console.log(title, "Config replacement starting.")
    console.log(title, f"Target config length: {len(json.dumps(target))}.")
    console.log(title, "Getting current config db.")
    console.log(title, "Generating patch between target config and current config db.")
    ops = jsonpatch.make_patch(owner.db, target)
    try:
        schema.validate(target)
    except schema.YangError as exc:
        raise GcuError(f"Given patch will produce invalid config. Error: {exc}") from None
    console.log(title, "Applying patch using 'Patch Applier'.")
    await _patch_applier(console, owner, ops, dry_run)
    console.log(title, "Verifying config replacement is reflected on ConfigDB.")
    console.log(title, "Config replacement completed.")


async def replace(console: Console, owner: ConfigDbOwner, path: str, dry_run: bool) -> bool:
    """``config replace``."""
    if dry_run:
        console.lines.append("** DRY RUN EXECUTION **")
    try:
        text = owner.files.get(path)
        if text is None:
            raise GcuError(f"[Errno 2] No such file or directory: '{path}'")
        try:
            target = json.loads(text)
        except json.JSONDecodeError as exc:
            raise GcuError(str(exc)) from None
        await _replace(console, owner, target, dry_run)
    except GcuError as exc:
        console.lines.append("Failed to replace config")
        click_failure(console, "replace", "TARGET_FILE_PATH", str(exc))
        return False
    console.lines.append("Config replaced successfully.")
    return True


# ------------------------------------------------------------------------------- checkpoints


async def rollback(console: Console, owner: ConfigDbOwner, name: str, dry_run: bool) -> bool:
    """``config rollback`` (``FileSystemConfigRollbacker.rollback``)."""
    title = "Config Rollbacker"
    if dry_run:
        console.lines.append("** DRY RUN EXECUTION **")
    try:
        console.log(title, "Config rollbacking starting.")
        console.log(title, f"Checkpoint name: {name}.")
        console.log(title, f"Verifying '{name}' exists.")
        if not owner.checkpoints.exists(name):
            raise GcuError(f"Checkpoint '{name}' does not exist")
        console.log(title, "Loading checkpoint into memory.")
        target = owner.checkpoints.load(name)
        console.log(title, "Replacing config using 'Config Replacer'.")
        await _replace(console, owner, target, dry_run)
        console.log(title, "Config rollbacking completed.")
    except GcuError as exc:
        console.lines.append("Failed to rollback config")
        click_failure(console, "rollback", "CHECKPOINT_NAME", str(exc))
        return False
    console.lines.append("Config rolled back successfully.")
    return True


def checkpoint(console: Console, owner: ConfigDbOwner, name: str) -> bool:
    """``config checkpoint``."""
    title = "Config Rollbacker"
    console.log(title, "Config checkpoint starting.")
    console.log(title, f"Checkpoint name: {name}.")
    console.log(title, "Getting current config db.")
    console.log(title, "Getting checkpoint full-path.")
    console.log(title, "Ensuring checkpoint directory exist.")
    console.log(title, f"Saving config db content to {owner.checkpoints.shown_path(name)}.")
    try:
        owner.checkpoints.save(name, clone(owner.db))
    except OSError as exc:
        console.lines.append("Failed to create a config checkpoint")
        click_failure(console, "checkpoint", "CHECKPOINT_NAME", str(exc))
        return False
    console.log(title, "Config checkpoint completed.")
    console.lines.append("Checkpoint created successfully.")
    return True


def delete_checkpoint(console: Console, owner: ConfigDbOwner, name: str) -> bool:
    """``config delete-checkpoint``."""
    title = "Config Rollbacker"
    console.log(title, "Deleting checkpoint starting.")
    console.log(title, f"Checkpoint name: {name}.")
    console.log(title, "Checking checkpoint exists.")
    if not owner.checkpoints.exists(name):
        console.lines.append("Failed to delete config checkpoint")
        click_failure(
            console, "delete-checkpoint", "CHECKPOINT_NAME", f"Checkpoint '{name}' does not exist"
        )
        return False
    console.log(title, "Deleting checkpoint.")
    owner.checkpoints.delete(name)
    console.log(title, "Deleting checkpoint completed.")
    console.lines.append("Checkpoint deleted successfully.")
    return True


def list_checkpoints(console: Console, owner: ConfigDbOwner, includes_time: bool) -> bool:
    """``config list-checkpoints [-t]`` (its log lines are info level: not printed)."""
    console.lines.append(json.dumps(owner.checkpoints.listing(includes_time), indent=4))
    return True


async def save(console: Console, owner: ConfigDbOwner) -> bool:
    """``config save -y``: ``Running command: ...`` (clicommon.run_command, display_cmd)."""
    console.lines.append(f"Running command: {CFGGEN} -d --print-data > {SHOWN_CONFIG_DB_PATH}")
    await owner.save()
    return True
