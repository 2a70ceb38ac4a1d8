"""Write the values table of helm/casewatch/README.md from helm/casewatch/values.yaml.

Every key whose line is preceded by a ``# --`` comment (continued by further ``#`` lines) gets a
row: its dotted path, its default (as JSON; "…" for a section whose keys have rows of their
own) and the comment. The table sits between the markers
``<!-- values-table:start -->`` and ``<!-- values-table:end -->``.

    .venv/bin/python scripts/helm_values_docs.py          # rewrite the table
    .venv/bin/python scripts/helm_values_docs.py --check  # exit 1 if it is out of date
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
CHART_DIR = ROOT / "helm" / "casewatch"
VALUES = CHART_DIR / "values.yaml"
README = CHART_DIR / "README.md"
START = "<!-- values-table:start -->"
END = "<!-- values-table:end -->"

_KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_][A-Za-z0-9_]*):(?:\s|$)")
_DOC = re.compile(r"^ *# -- ?(?P<text>.*)$")
_MORE = re.compile(r"^ *# ?(?P<text>.*)$")


def documented_keys(text: str) -> list[tuple[str, str]]:
    """(dotted key, description) for every ``# --`` documented key, in file order."""
    rows: list[tuple[str, str]] = []
    stack: list[tuple[int, str]] = []
    doc: list[str] | None = None
    for line in text.splitlines():
        if (m := _DOC.match(line)) is not None:
            doc = [m["text"].strip()]
            continue
        if doc is not None and (m := _MORE.match(line)) is not None:
            doc.append(m["text"].strip())
            continue
        if (m := _KEY.match(line)) is None:
            if line.strip() and not line.lstrip().startswith("#"):
                doc = None
            continue
        indent = len(m["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, m["key"]))
        if doc is not None:
            rows.append((".".join(k for _, k in stack), " ".join(doc)))
            doc = None
    return rows


def _default(values: dict[str, Any], dotted: str) -> Any:
    node: Any = values
    for part in dotted.split("."):
        node = node[part]
    return node


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def table() -> str:
    text = VALUES.read_text(encoding="utf-8")
    values = yaml.safe_load(text)
    lines = ["| key | default | description |", "| --- | --- | --- |"]
    rows = documented_keys(text)
    parents = {key.rpartition(".")[0] for key, _ in rows}
    for key, description in rows:
        # A section whose keys have rows of their own: its default is in those rows.
        default = "…" if key in parents else json.dumps(_default(values, key), ensure_ascii=False)
        lines.append(f"| `{key}` | `{_cell(default)}` | {_cell(description)} |")
    return "\n".join(lines) + "\n"


def rewritten(readme: str) -> str:
    head, start, rest = readme.partition(START)
    _old, end, tail = rest.partition(END)
    if not start or not end:
        raise SystemExit(f"{README}: markers {START} / {END} not found")
    return f"{head}{START}\n{table()}{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write the chart README's values table.")
    parser.add_argument("--check", action="store_true", help="exit 1 if the table is stale")
    args = parser.parse_args(argv)
    current = README.read_text(encoding="utf-8")
    new = rewritten(current)
    if args.check:
        if new != current:
            print(
                f"{README.relative_to(ROOT)}: the values table is out of date: "
                "run .venv/bin/python scripts/helm_values_docs.py",
                file=sys.stderr,
            )
            return 1
        return 0
    README.write_text(new, encoding="utf-8")
    print(f"wrote the values table of {README.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
