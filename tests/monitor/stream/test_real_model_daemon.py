"""The daemon on the embedded Kafka broker with a real model server as its judge
(llama-cpp-python on SmolLM2-135M, tests/model_server.py): every turn on the topic ends stored,
judged with all eight metrics or judge_failed with its reason, the offsets committed to the
end, the judge's requests and tokens on /metrics.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from consumers.tansu import EmbeddedBroker
from monitor.judging.judge import FAILURE_REASONS
from monitor.schema.turn import METRICS
from monitor.storage.audit import stored_verdicts
from monitor.storage.store import Store
from monitor.stream.runner import DaemonRunner
from tests.fixtures.broker import produce
from tests.fixtures.model_server import real_judge_config
from tests.model_server import RealModelServer
from tests.support.daemon import kafka_settings
from tests.support.kafka import committed_offset
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def test_the_daemon_judges_live_turns_with_the_real_model(
    real_model: RealModelServer, tansu_broker: EmbeddedBroker, kafka_topic: str, tmp_path: Path
) -> None:
    lines = (EXAMPLES / "turns.jsonl").read_text().splitlines()[:1]
    ids = {json.loads(line)["event_id"] for line in lines}
    produce(tansu_broker.bootstrap, kafka_topic, [line.encode() for line in lines])
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    settings = kafka_settings(
        tansu_broker.bootstrap,
        kafka_topic,
        url,
        server={"port": 0},
        # 16 tokens: a whole judgment by this model takes minutes on a busy 2-core machine.
        judges={"smollm2": real_judge_config(real_model, max_output_tokens=16, output_retries=0)},
        judge="smollm2",
        daemon={"concurrency": 2},
    )
    registry = CollectorRegistry()
    store = Store(url)
    runner = DaemonRunner(settings, registry).start()
    try:

        def stored() -> int:
            return len(stored_verdicts(store, limit=100))

        # Generous: a judge call of a 135M model on a shared 2-core machine.
        wait_for(lambda: stored() == len(ids), "the turn stored", timeout=600)
        group = settings.kafka.group_id
        wait_for(
            lambda: committed_offset(tansu_broker.bootstrap, group, kafka_topic) == len(ids),
            "offsets committed to the end",
            timeout=120,
        )
    finally:
        assert runner.stop(timeout_s=120)
    assert runner.error is None

    rows = stored_verdicts(store, limit=100)
    assert {r["event_id"] for r in rows} == ids
    for row in rows:
        if row["status"] == "ok":
            assert set(row["metric_scores"]) == set(METRICS)
        else:
            assert row["failure_reason"] in FAILURE_REASONS
            assert row["failure_reason"] == "truncated"  # cut at 16 tokens
    requests = sum(
        registry.get_sample_value(
            "casewatch_judge_requests_total", {"judge": "smollm2", "outcome": o}
        )
        or 0.0
        for o in ("ok", "failed")
    )
    assert requests == len(ids)
    tokens = registry.get_sample_value(
        "casewatch_judge_tokens_total", {"judge": "smollm2", "kind": "input"}
    )
    assert tokens and tokens > 0
    store.close()
