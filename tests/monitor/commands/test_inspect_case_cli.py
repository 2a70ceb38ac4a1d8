"""``casewatch inspect case CONVERSATION_ID`` on SQLite and PostgreSQL: the conversation's
turns with their verdicts, then every case verdict (the newest current) with each case
judge's reasons, as text and as JSON; an unknown conversation exits 2 with one line."""

from __future__ import annotations

import json

from click.testing import CliRunner

from monitor.cli import main
from monitor.judging.heuristic.case_judge import HeuristicCaseJudge
from monitor.runtime.clock import ManualClock
from monitor.storage.case_queries import newest_case
from monitor.storage.store import Store
from tests.support.cases import case_job, store_turn, turn


def test_inspect_case_shows_the_turns_then_each_version_with_its_reasons(store: Store) -> None:
    clock = ManualClock(start=1_800_000_000.0)
    timed = Store(store.url, clock=clock)
    try:
        store_turn(timed, turn("conv-i", 0, query="I already ran `vpnctl reset --all`, no luck."))
        store_turn(timed, turn("conv-i", 1, answer="Run `vpnctl reset --all` again."))
        job = case_job(timed, [HeuristicCaseJudge()], clock)
        clock.advance(601)
        job.run_once()
        clock.advance(10)
        store_turn(timed, turn("conv-i", 2, query="That worked, thanks!", answer="Great."))
        clock.advance(601)
        job.run_once()
    finally:
        timed.close()
    assert newest_case(store, "helpdesk") == "conv-i"
    assert newest_case(store, "nobody") is None
    runner = CliRunner()
    text = runner.invoke(main, ["inspect", "case", "conv-i", "--db", store.url])
    assert text.exit_code == 0, text.output
    out = text.output
    assert out.index("turns") < out.index("case verdict helpdesk v1 (superseded")
    assert "case verdict helpdesk v2 (current, closed idle)" in out
    assert "workflow_alignment" in out and "vpnctl reset --all" in out
    doc = json.loads(
        runner.invoke(main, ["inspect", "case", "conv-i", "--db", store.url, "--json"]).output
    )
    assert [t["turn_index"] for t in doc["turns"]] == [0, 1, 2]
    assert [(v["version"], v["current"]) for v in doc["verdicts"]] == [(1, False), (2, True)]
    assert doc["verdicts"][1]["resolution_outcome"] == "resolved"
    assert doc["verdicts"][0]["judgments"][0]["reasons"]["workflow_alignment"]["score"] < 0.61
    missing = runner.invoke(main, ["inspect", "case", "no-such", "--db", store.url])
    assert missing.exit_code == 2
    assert "no stored turn has conversation id 'no-such'" in missing.output
