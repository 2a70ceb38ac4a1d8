"""End to end: turns on the embedded Kafka broker → the daemon judges and stores them → the
scheduled ``rubric`` job grades the answers of the turns matching a rubric entry on the fake
OpenAI-compatible server → SQL rows with extracted answers and the coverage metrics on /metrics.
"""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry

from consumers.tansu import EmbeddedBroker
from monitor.storage.rubric_gradings import RubricGradings
from monitor.storage.store import Store
from monitor.stream.runner import DaemonRunner
from tests.fake_judge_server import FakeJudgeServer, keyword_grader
from tests.fixtures.broker import produce
from tests.fixtures.databases import make_turn
from tests.fixtures.judge_server import fake_judge_config
from tests.support.daemon import kafka_settings, rows_per_event
from tests.support.http import http_get
from tests.support.waiting import wait_for

RUBRICS = """\
- id: vpn-drops
  query: VPN drops
  reviewed: true
  questions:
    - Which driver must be reinstalled?
    - Which KB article applies?
    - Which MTU is recommended?
    - Is a reboot needed?
"""


def test_the_daemon_grades_matching_live_answers_against_their_rubric(
    tansu_broker: EmbeddedBroker, kafka_topic: str, tmp_path: Path
) -> None:
    rubrics = tmp_path / "rubrics.yaml"
    rubrics.write_text(RUBRICS)
    # Four turns on the rubric's case (two assistants), one on another case: not graded.
    turns = [
        make_turn("stable-0", assistant="stable"),
        make_turn("stable-1", assistant="stable"),
        make_turn("canary-0", assistant="canary", answer="Reboot the laptop."),
        make_turn("canary-1", assistant="canary", answer="See KB-1 and set MTU 1400."),
        make_turn("other", case={"subject": "Printer offline", "description": "d"}),
    ]
    produce(tansu_broker.bootstrap, kafka_topic, [t.model_dump_json().encode() for t in turns])
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    registry = CollectorRegistry()
    with FakeJudgeServer() as server:
        server.responder = keyword_grader(
            {
                "Which driver must be reinstalled?": "VPN driver",
                "Which KB article applies?": "KB-1",
                "Which MTU is recommended?": "MTU 1400",
            }
        )
        settings = kafka_settings(
            tansu_broker.bootstrap,
            kafka_topic,
            url,
            server={"port": 0},
            judges={"grader": fake_judge_config(server)},  # turns: the offline heuristic
            sampling={"budget_calls_per_hour": 1000},
            rubric={
                "enabled": True,
                "rubric_file": rubrics,
                "judge": "grader",
                "interval_seconds": 0.2,
            },
        )
        runner = DaemonRunner(settings, registry).start()
        try:

            def sample(name: str, **labels: str) -> float:
                return registry.get_sample_value(name, labels) or 0.0

            def graded() -> float:
                return sum(
                    sample("casewatch_rubric_graded_total", assistant=a, outcome="ok")
                    for a in ("stable", "canary")
                )

            wait_for(lambda: graded() == 4, "four live answers graded")
            port = int(runner.url.rsplit(":", 1)[1])
            status, text = http_get(port, "/metrics")
        finally:
            assert runner.stop(timeout_s=60)
        assert runner.error is None

    assert status == 200
    assert 'casewatch_rubric_graded_total{assistant="stable",outcome="ok"} 2.0' in text
    assert 'casewatch_rubric_coverage_bucket{assistant="canary",le="0.0"} 1.0' in text
    # stable: driver + KB -> 2/4 twice; canary: nothing (0/4), then KB + MTU (2/4).
    assert sample("casewatch_rubric_coverage_sum", assistant="stable") == 1.0
    assert sample("casewatch_rubric_coverage_count", assistant="canary") == 2
    assert sample("casewatch_rubric_coverage_sum", assistant="canary") == 0.5
    assert sample("casewatch_job_runs_total", job="rubric", outcome="ok") >= 1

    store = Store(url)
    try:
        assert set(rows_per_event(store)) == {t.event_id for t in turns}
        gradings = RubricGradings(store)
        assert gradings.for_event("other") == []
        [row] = gradings.for_event("canary-1")
        assert [(g["grade"], g["answer"]) for g in row["grades"]] == [
            (0, ""),
            (5, "KB-1"),
            (5, "MTU 1400"),
            (0, ""),
        ]
        assert row["coverage"] == 0.5 and row["assistant_name"] == "canary"
    finally:
        store.close()
