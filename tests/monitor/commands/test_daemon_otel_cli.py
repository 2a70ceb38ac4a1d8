"""`casewatch run` on an OTLP topic, SIGKILLed with traces half read, then restarted: nothing
lost (every answered request is stored), nothing judged twice (one judge call per turn over
both runs), offsets committed to the end."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from consumers.tansu import EmbeddedBroker, create_topics, free_port
from monitor.storage.store import Store
from tests.fake_judge_server import FakeJudgeServer, content
from tests.fixtures.broker import DLQ_SUFFIX, produce
from tests.support.daemon import rows_per_event
from tests.support.daemon_process import daemon_process, kafka_config, write_config
from tests.support.kafka import committed_offset
from tests.support.rag_traces import ANSWER, QUESTIONS, rag_traces
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


def test_sigkill_mid_trace_then_restart_loses_nothing_and_judges_nothing_twice(
    tansu_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    bootstrap = tansu_broker.bootstrap
    topic = f"otlp_spans.kill.{free_port()}"
    create_topics(bootstrap, [topic], dlq_suffix=DLQ_SUFFIX)
    third = {**QUESTIONS[1], "conversation": "conv-third", "query": "Is 4.2 out yet?"}
    with FakeJudgeServer() as model:
        model.responder = lambda request: content(ANSWER)
        # Per trace: (children, root), in question order.
        a_kids, a_root, b_kids, b_root, c_kids, c_root = rag_traces(
            tmp_path, "genai", model.base_url, "otlp_proto", [*QUESTIONS, third], "span_only"
        )
    # Trace B arrives whole; A and C only in part: their first messages hold the commit.
    for key, value in (a_kids, b_kids, b_root, c_kids):
        produce(bootstrap, topic, [value], key=key)

    with FakeJudgeServer() as judge:
        config, doc = kafka_config(tmp_path, bootstrap, topic, judge, free_port())
        doc["kafka"]["topics"] = [{"name": topic, "format": "otlp_proto"}]
        doc["sampling"] = {"default_rate": 1.0}
        doc["assembly"] = {"idle_seconds": 600}
        config = write_config(tmp_path, doc)
        store = Store(doc["storage"]["url"])
        store.migrate()
        group = doc["kafka"]["group_id"]
        with daemon_process(config, tmp_path / "run1.log") as proc:
            wait_for(lambda: len(_stored(store)) == 1, "trace B judged and stored")
            proc.proc.send_signal(signal.SIGKILL)
            assert proc.wait(10) == -signal.SIGKILL
        # A's first message was never finished: nothing from it on was committed.
        assert (committed_offset(bootstrap, group, topic) or 0) == 0
        assert judge.request_count == 1

        for key, value in (a_root, c_root):
            produce(bootstrap, topic, [value], key=key)
        with daemon_process(config, tmp_path / "run2.log") as proc:
            wait_for(
                lambda: committed_offset(bootstrap, group, topic) == 6,
                "offsets committed to the end after the restart",
            )
            proc.proc.send_signal(signal.SIGTERM)
            assert proc.wait(60) == 0, proc.tail()
        calls = judge.request_count

    judged = _stored(store)
    assert len(judged) == 3 and set(judged.values()) == {1}
    assert calls == 3  # B was read again after the restart and found stored, not re-judged
    store.close()


def _stored(store: Store) -> dict[str, int]:
    return rows_per_event(store)
