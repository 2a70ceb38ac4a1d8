"""The daemon on a consumer group the embedded broker has wedged (Tansu-quirks group: Kafka
never gets a group into this state).

The group's leader left while it led a forming round, so Tansu 0.6 names, for ever, a leader
the group no longer has (tests/consumers/group_member.leave_while_leading). A static daemon
joining it gets no partitions until its source notices, takes the departed leader's place and
forms the group; then every turn is judged and stored once, the offsets are committed to the
end, and the rejoin is counted.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from consumers.dlq import KafkaDeadLetterQueue
from consumers.kafka_source import KafkaTurnSource
from consumers.tansu import EmbeddedBroker
from monitor.storage.store import Store
from tests.consumers.group_member import leave_while_leading
from tests.fixtures.broker import produce
from tests.support.daemon import kafka_settings, rows_per_event, running, turn_values
from tests.support.kafka import committed_offset
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.tansu_quirks]


def test_a_wedged_group_is_formed_again_and_every_turn_judged_once(
    tansu_broker: EmbeddedBroker, kafka_topic: str, tmp_path: Path
) -> None:
    bootstrap = tansu_broker.bootstrap
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    settings = kafka_settings(bootstrap, kafka_topic, url)
    kafka = settings.kafka.model_copy(
        update={"group_instance_id": "casewatch-0", "broker_quirks": "tansu"}
    )
    settings = settings.model_copy(update={"kafka": kafka})
    produce(bootstrap, kafka_topic, turn_values(20))
    leave_while_leading(bootstrap, kafka_topic, kafka.group_id)
    store = Store(url)
    store.migrate()
    with running(settings, KafkaTurnSource(kafka), KafkaDeadLetterQueue(kafka), store) as h:
        # Noticing takes 3 session timeouts (18 s), the rejoin a round of its own.
        wait_for(
            lambda: committed_offset(bootstrap, kafka.group_id, kafka_topic) == 20,
            timeout=180,
            what="the group formed and every offset committed",
        )
        assert rows_per_event(store) == {f"evt-{i}": 1 for i in range(20)}
        assert h.sample("casewatch_consumer_group_rejoins_total") == 1
        assert h.sample("casewatch_turns_consumed_total", {"topic": kafka_topic}) == 20
