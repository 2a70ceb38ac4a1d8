"""The daemon with a judge panel (two primaries + an arbiter) end to end on a file source.

The primaries (told apart by ``model`` on the fake OpenAI-compatible server) disagree exactly
on the turns whose query carries a marker, so the arbiter calls, the stored verdicts and the
panel counters are all known in advance.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from consumers.dlq import FileDeadLetterSink
from consumers.file_source import FileTurnSource
from monitor.config.settings import load_settings
from monitor.judging.evaluator import build_evaluator
from monitor.judging.recorder import JudgingRecorder
from monitor.metrics.exporter import Metrics
from monitor.schema.turn import METRICS
from monitor.storage.audit import counts, stored_verdicts
from monitor.storage.store import Store
from tests.fake_judge_server import FakeJudgeServer, Reply, case_data_of, scores
from tests.fixtures.databases import make_turn
from tests.fixtures.judge_server import fake_judge_config
from tests.support.daemon import build_daemon, close_opened

MARK = "[dispute]"


def respond(request: dict[str, Any]) -> Reply:
    data = case_data_of(request)
    assert data is not None
    disputed = MARK in str(data["query"])
    if request["model"] == "judge-a":
        return scores(0.9)
    if request["model"] == "judge-b":
        return scores({m: 0.2 if disputed and m == "hallucination" else 0.95 for m in METRICS})
    return scores(0.88)


def test_daemon_panel_calls_the_arbiter_only_on_disagreement(tmp_path: Path) -> None:
    n, disputed = 20, {3, 7, 11, 15, 19}
    turns = [
        make_turn(f"evt-{i}", query=f"VPN drops {MARK}" if i in disputed else "VPN drops")
        for i in range(n)
    ]
    data = tmp_path / "turns.jsonl"
    data.write_text("".join(t.model_dump_json() + "\n" for t in turns))
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    with FakeJudgeServer(responder=respond) as server:
        cfg = {"transport_retries": 0, "output_retries": 0, "price_input_per_mtok": 1.0}
        settings = load_settings(
            None,
            storage={"url": url},
            judges={
                m: fake_judge_config(server, model=m, **cfg)
                for m in ("judge-a", "judge-b", "judge-arbiter")
            },
            panel={"primaries": ["judge-a", "judge-b"], "arbiter": "judge-arbiter"},
        )
        store = Store(url)
        store.migrate()
        registry = CollectorRegistry()
        metrics = Metrics(registry)
        evaluator = build_evaluator(
            settings,
            concurrency=settings.daemon.concurrency,
            on_panel_result=JudgingRecorder(metrics).record_panel,
        )
        source = FileTurnSource(data, offsets_path=tmp_path / "offsets.json")
        dlq = FileDeadLetterSink(tmp_path / "dlq.jsonl")
        daemon = build_daemon(settings, source, dlq, store, evaluator, metrics, exit_when_idle=True)
        thread = threading.Thread(target=daemon.run, daemon=True)
        thread.start()
        assert daemon.wait_finished(timeout=60)
        thread.join(timeout=10)
        daemon.close()
        close_opened(source, dlq, store, evaluator)
        arbiter_requests = sum(r["model"] == "judge-arbiter" for r in server.requests)

    assert arbiter_requests == len(disputed)
    rows = stored_verdicts(store, limit=100)
    assert {r["event_id"] for r in rows if r["arbitrated"]} == {f"evt-{i}" for i in disputed}
    assert counts(store)["judgments"] == 2 * n + len(disputed)

    def sample(name: str, **labels: str) -> float:
        return registry.get_sample_value(name, labels) or 0.0

    assert sample("casewatch_panel_turns_total", assistant="helpdesk", agreement="disagreed") == 5
    assert sample("casewatch_panel_turns_total", assistant="helpdesk", agreement="agreed") == 15
    assert sample("casewatch_arbiter_calls_total", assistant="helpdesk") == 5
    assert (
        sample("casewatch_disagreements_total", assistant="helpdesk", metric="hallucination") == 5
    )
    # The arbiter (0.88 → minor) sides with judge-a (0.9 → none)? Neither band matches exactly,
    # so the side is decided by distance: judge-a's scores are closer on every metric.
    assert (
        sample("casewatch_arbitration_outcome_total", assistant="helpdesk", sided_with="primary_a")
        == 5
    )
    assert sample("casewatch_judge_cost_usd_by_role_total", role="arbiter") > 0
    assert sample("casewatch_judge_cost_usd_by_role_total", role="primary") > sample(
        "casewatch_judge_cost_usd_by_role_total", role="arbiter"
    )
    store.close()
