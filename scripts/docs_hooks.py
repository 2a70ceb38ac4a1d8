"""MkDocs hooks of the documentation site (mkdocs.yml, ``hooks:``).

- ``on_page_markdown`` turns a relative link that leaves docs/ (``../rules/RUNBOOK.md#...``,
  ``../ARCHITECTURE.md``) into a link to that file in the repository (``repo_url``), which works
  on GitHub and on the site alike; a link to a file that does not exist is a warning, which
  ``--strict`` makes a failed build, like a broken link between pages.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import Files

log = logging.getLogger("mkdocs.plugins.casewatch")

_OUTSIDE = re.compile(r"\]\((?P<path>(?:\.\./)+[^)#\s]*)(?P<anchor>#[^)\s]*)?\)")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    root = Path(config.config_file_path).resolve().parent  # the repository: mkdocs.yml's folder
    source = Path(config["docs_dir"]).resolve() / page.file.src_path
    repo = (config.get("repo_url") or "").rstrip("/")

    def to_repository(match: re.Match[str]) -> str:
        target = (source.parent / match.group("path")).resolve()
        try:
            relative = target.relative_to(root)
        except ValueError:
            log.warning("%s: the link %s leaves the repository", page.file.src_path, match[0])
            return match[0]
        if not target.exists():
            log.warning(
                "%s: the link %s points at %s, which does not exist",
                page.file.src_path,
                match.group("path"),
                relative,
            )
            return match[0]
        kind = "tree" if target.is_dir() else "blob"
        return f"]({repo}/{kind}/main/{relative.as_posix()}{match.group('anchor') or ''})"

    return _OUTSIDE.sub(to_repository, markdown)
