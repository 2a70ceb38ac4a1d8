"""``casewatch compare --cases A B`` on SQLite and PostgreSQL: two assistants paired by
conversation on their cases' current case scores, B - A; and the pure comparison's notes."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from click.testing import CliRunner

from monitor.cli import main
from monitor.stats.case_comparison import CaseScore, compare_cases
from monitor.storage.store import Store
from tests.support.case_verdicts import JUDGED, store_case


def test_compare_cases_pairs_conversations_on_case_scores(runner: CliRunner, store: Store) -> None:
    for i in range(12):
        cid = f"conv-{i:02d}"
        store_case(store, cid, assistant="helpdesk", score=0.95 - i / 200, turns=1)
        store_case(store, cid, assistant="canary", score=0.3 + i / 200, outcome="unresolved",
                   turns=1)  # fmt: skip
    store_case(store, "conv-only-a", assistant="helpdesk", turns=1)
    # A resumed case: its current (newest) verdict is the one compared.
    store_case(store, "conv-00", assistant="canary", version=2, score=0.35, outcome="partial",
               judged_at=JUDGED + timedelta(hours=1), with_turns=False)  # fmt: skip
    args = ["compare", "--cases", "helpdesk", "canary", "--db", store.url]
    result = runner.invoke(main, [*args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["unit"] == "case" and doc["n_pairs"] == 12
    assert (doc["cases_a"], doc["cases_b"], doc["only_a"], doc["only_b"]) == (13, 12, 1, 0)
    score = doc["case_score"]
    assert score["mean_delta"] < -0.5 and score["wilcoxon_p"] < 0.01
    assert score["ci_high"] < 0
    assert doc["resolved"]["mean_delta"] == -1.0
    assert set(doc["metrics"]) == {
        "resolution", "issue_tracking", "workflow_alignment", "consistency", "customer_effort"
    }  # fmt: skip
    text = runner.invoke(main, args, catch_exceptions=False).output
    assert "paired cases: 12 (only in A: 1, only in B: 0); Δ = B − A" in text
    assert "case score" in text and "resolved" in text


def test_compare_without_cases_still_reads_files_and_says_what_is_missing(
    runner: CliRunner, tmp_path: Path, store: Store
) -> None:
    result = runner.invoke(main, ["compare", str(tmp_path / "a.jsonl"), str(tmp_path / "b")])
    assert result.exit_code == 2
    assert "no such file" in result.output and "--cases" in result.output
    store_case(store, "c-1", assistant="helpdesk", turns=1)
    nothing = runner.invoke(main, ["compare", "--cases", "helpdesk", "ghost", "--db", store.url])
    assert nothing.exit_code == 2 and "unknown assistant 'ghost'" in nothing.output


def test_different_case_judges_and_no_shared_conversation_are_noted() -> None:
    a = [CaseScore("c1", 0.9, {"resolution": 0.9}, "resolved", "cfg-a")]
    b = [CaseScore("c2", 0.4, {"resolution": 0.4}, "unresolved", "cfg-b")]
    result = compare_cases("A", a, "B", b)
    assert result.n_pairs == 0
    assert any("different case judge configurations" in n for n in result.notes)
    assert any("nothing to compare" in n for n in result.notes)
