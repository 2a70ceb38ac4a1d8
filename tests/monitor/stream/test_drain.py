"""The drain after a stop keeps the consumer in its group (``monitor/stream/drain.py``).

Kafka's semantics: a member that does not poll within ``max_poll_interval_ms`` leaves its group
(kafka-python's heartbeat thread sends LeaveGroup and forgets the generation), and a commit it
makes after that is refused. A drain that outlasts the interval must still commit what it
finished, so a restart reads none of it again.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from consumers.dlq import KafkaDeadLetterQueue
from consumers.kafka_source import KafkaTurnSource
from consumers.tansu import EmbeddedBroker
from monitor.settings import Settings
from monitor.storage.store import Store
from tests.fake_judge_server import FakeJudgeServer
from tests.fixtures.broker import produce
from tests.fixtures.judge_server import fake_judge_config
from tests.support.daemon import kafka_settings, rows_per_event, running, turn_values
from tests.support.kafka import committed_offset
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

MAX_POLL_INTERVAL_MS = 3000
# Every judge call outlasts the poll interval three times over: a drain that waits for the
# calls under way at the stop lasts longer than the interval, however the machine is loaded.
JUDGE_LATENCY_S = 3 * MAX_POLL_INTERVAL_MS / 1000


def _settings(bootstrap: str, topic: str, url: str, judge: FakeJudgeServer, n: int) -> Settings:
    config = fake_judge_config(judge, timeout_seconds=10 * JUDGE_LATENCY_S, transport_retries=0)
    settings = kafka_settings(
        bootstrap,
        topic,
        url,
        judges={"remote": config},
        judge="remote",
        # Every turn judged at once; nothing committed before the stop but by the drain.
        daemon={
            "concurrency": n,
            "drain_timeout_seconds": 10 * JUDGE_LATENCY_S,
            "commit_interval_seconds": 3600,
        },
    )
    kafka = settings.kafka.model_copy(update={"max_poll_interval_ms": MAX_POLL_INTERVAL_MS})
    return settings.model_copy(update={"kafka": kafka})


def test_a_drain_longer_than_the_poll_interval_still_commits_what_it_finished(
    tansu_broker: EmbeddedBroker, kafka_topic: str, tmp_path: Path
) -> None:
    bootstrap = tansu_broker.bootstrap
    n = 5
    produce(bootstrap, kafka_topic, turn_values(n, "d"))
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    Store(url).migrate()
    with FakeJudgeServer(latency=JUDGE_LATENCY_S) as judge:
        settings = _settings(bootstrap, kafka_topic, url, judge, n)
        group, kafka = settings.kafka.group_id, settings.kafka
        store = Store(url)
        with running(settings, KafkaTurnSource(kafka), KafkaDeadLetterQueue(kafka), store) as h:
            wait_for(lambda: judge.request_count == n, what="every turn being judged")
            h.daemon.stop()  # the drain now waits out the judge calls
            wait_for(lambda: h.daemon.wait_finished(0), what="the drain over")
            assert h.daemon.final_commit_error is None
        # Every turn was finished by the drain, stored, and its offset committed.
        assert rows_per_event(Store(url)) == {f"d-{i}": 1 for i in range(n)}
        assert committed_offset(bootstrap, group, kafka_topic) == n

        # A restart in the same group reads nothing again, so judges nothing again.
        store = Store(url)
        with running(settings, KafkaTurnSource(kafka), KafkaDeadLetterQueue(kafka), store) as h:
            lag = {"topic": kafka_topic, "partition": "0"}
            wait_for(
                lambda: h.registry.get_sample_value("casewatch_consumer_lag", lag) == 0,
                what="the restarted consumer at the end of the partition",
            )
            consumed = h.sample("casewatch_turns_consumed_total", {"topic": kafka_topic})
        assert consumed == 0
        assert judge.request_count == n
