"""Markdown as GitHub renders it, for the links from alerts to runbook sections."""

from __future__ import annotations

import re


def anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as dashes."""
    out = set()
    for line in markdown.splitlines():
        if m := re.match(r"^#{1,6}\s+(.*?)\s*$", line):
            slug = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
            out.add(slug)
    return out
