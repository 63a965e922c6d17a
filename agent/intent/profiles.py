"""Where a fabric's ``profile:`` is found: a name looked up in the profile search path, or a
file next to the fabric file (the loader reads it; the twin's network cache checks that the
same file would still be found, without loading the fabric again).

Only the standard library and :mod:`common`: the twin's start-up imports this module.
"""

from __future__ import annotations

import os
from pathlib import Path

from common.errors import excerpt
from common.resources import builtin_profiles

BUILTIN_PROFILES = builtin_profiles()


def profile_search_path(fabric_file: Path) -> list[Path]:
    """Where a profile name is looked up, first match wins."""
    extra = [Path(p) for p in os.environ.get("ROCE_AGENT_PROFILES", "").split(os.pathsep) if p]
    here = fabric_file.resolve().parent
    return [*extra, here / "profiles", here.parent / "profiles", BUILTIN_PROFILES]


def resolve_profile(reference: str, fabric_file: Path) -> Path | str:
    """The profile file for ``reference``, or why there is none.

    A profile is a name looked up in the search path, or a file in the fabric file's folder
    (or below it). After resolving symlinks it must still be inside one of those folders:
    ``profile: /etc/shadow`` or ``../../etc/shadow`` would otherwise be read, and parts of
    it echoed in error messages.
    """
    here = fabric_file.resolve().parent
    folders = profile_search_path(fabric_file)
    if "/" in reference or "\\" in reference or reference.endswith((".yml", ".yaml")):
        if Path(reference).is_absolute():
            return (
                "Expected: a profile name or a file next to the fabric file "
                "Actual: an absolute path"
            )
        candidates = [here / reference]
    else:
        candidates = [folder / f"{reference}{suffix}" for folder in folders for suffix in _SUFFIXES]
    roots = [_real(folder) for folder in (here, *folders)]
    for candidate in candidates:
        if not candidate.is_file():
            continue
        real = _real(candidate)
        if any(real.is_relative_to(root) for root in roots if root is not None):
            return candidate
        return (
            "Expected: a file in the fabric file's folder or the profile search path "
            f"Actual: {real} (outside them)"
        )
    searched = ", ".join(str(p) for p in folders)
    return f"profile {excerpt(reference)} not found (searched {searched})"


_SUFFIXES = (".yml", ".yaml")


def _real(path: Path) -> Path:
    try:
        return path.resolve(strict=False)
    except (OSError, RuntimeError):  # a symlink loop
        return path
