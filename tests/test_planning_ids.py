"""The methods casewatch implements are named by what they are (the papers' names, as
docs/index.md lists them: Case-Aware, DAFE, DICE, Pencils Down), never by the planning ids
they were once filed under, which no operator or newcomer can resolve."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# A planning id (the word, a space, hyphen or underscore, then 00N) or a reference to what was
# filed under one (the word followed by "example", as a test name or in prose). Underscores
# separate words here, so letters alone bound them: random seeds (seed=3, --seed, seeds, a
# seed_turn helper) are not matched.
PLANNING_ID = re.compile(r"(?<![a-z])seed[ _-](?:0{2}\d(?!\d)|examples?(?![a-z]))", re.IGNORECASE)


def test_no_planning_id_in_a_tracked_file() -> None:
    tracked = (
        subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
        .stdout.decode()
        .split("\0")
    )
    assert len(tracked) > 100
    found = []
    for name in tracked:
        path = ROOT / name
        if not name or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary
        found += [
            f"{name}:{n}" for n, line in enumerate(text.splitlines(), 1) if PLANNING_ID.search(line)
        ]
    assert found == []
