"""mkdocs hook (mkdocs.yml ``hooks:``): links from a docs page to a repository file.

The guides link the files they describe (``deploy/agent.yaml``, ``agent/intent/shard.py``).
Those files are not pages of the site, so a strict build would call the links broken. A
link whose target is a file of the repository outside docs/ (written relative to the page or
to the repository root) becomes a link to that file on the forge when ``repo_url`` is set
(ROCE_AGENT_REPO_URL at build time), and its bare text otherwise. Every other link is left to
mkdocs' own validation, so a real broken link still fails ``mkdocs build --strict``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
# [text](target) with no nested brackets in text and no spaces in target; not images.
LINK = re.compile(r"(?<!!)\[([^\]\n]+)\]\(([^)\s]+)\)")


def repo_file(page_dir: Path, target: str) -> str | None:
    """The repository path ``target`` names, if it is a file outside docs/; else None."""
    if "://" in target or target.startswith(("#", "/", "mailto:")):
        return None
    path = target.split("#", 1)[0]
    for candidate in ((page_dir / path).resolve(), (REPO / path).resolve()):
        inside_repo = candidate.is_relative_to(REPO)
        if inside_repo and not candidate.is_relative_to(DOCS) and candidate.exists():
            return candidate.relative_to(REPO).as_posix()
    return None


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    page_dir = (DOCS / page.file.src_uri).parent
    repo_url = (config.get("repo_url") or "").rstrip("/")

    def rewrite(match: re.Match[str]) -> str:
        text, target = match.group(1), match.group(2)
        path = repo_file(page_dir, target)
        if path is None:
            return match.group(0)
        return f"[{text}]({repo_url}/blob/main/{path})" if repo_url else text

    return LINK.sub(rewrite, markdown)
