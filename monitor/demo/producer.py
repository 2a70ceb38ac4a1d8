"""The demo's producer: a thread replaying the examples into the topic at a steady rate."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import structlog

from consumers.replay import Pacer, PublishStats, publish
from monitor.demo.examples import demo_messages
from monitor.runtime.clock import SystemClock

log = structlog.get_logger(__name__)

# The replay producer's blocking calls (a send waiting for metadata, the flush on close) and the
# wait for its thread: bounded, so a dead broker cannot hold the demo up.
PRODUCER_TIMEOUT_S = 5.0
PRODUCER_STOP_S = 3 * PRODUCER_TIMEOUT_S  # a send, then the flush and the sender's exit


class ReplayProducer:
    """Replays the examples in a loop at ``rate`` msgs/s on a thread, until ``stop()``."""

    def __init__(self, bootstrap: str, topic: str, docs: list[dict[str, Any]], rate: float) -> None:
        self._bootstrap = bootstrap
        self._topic = topic
        self._docs = docs
        self._pacer = Pacer(rate, SystemClock())
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-producer", daemon=True)
        self.stats = PublishStats()

    @property
    def sent(self) -> int:
        return self.stats.sent

    def start(self) -> ReplayProducer:
        self._thread.start()
        return self

    def replace_docs(self, docs: list[dict[str, Any]]) -> None:
        """Replay ``docs`` from the next record on (the loop in progress is cut short)."""
        if not docs:
            raise ValueError("replace_docs needs at least one document")
        self._docs = docs

    def stop(self, timeout_s: float = PRODUCER_STOP_S) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def _messages(self) -> Iterator[tuple[bytes | None, bytes]]:
        n_loop = 0
        while self._docs:  # endless, paced and stopped by publish()
            docs = self._docs
            for message in demo_messages(docs, n_loop, lambda: datetime.now(UTC)):
                if self._docs is not docs:  # replaced: start a loop of the new ones
                    break
                yield message
            n_loop += 1

    def _run(self) -> None:
        from consumers._kafka import close_producer
        from consumers.producer import open_producer

        try:
            producer = open_producer(
                "the demo producer",
                [self._bootstrap],
                client_id="casewatch-demo",
                linger_ms=5,
                max_block_ms=int(PRODUCER_TIMEOUT_S * 1000),
            )
        except Exception as exc:  # the thread must report, not die silently
            log.error("demo producer could not connect", error=str(exc))
            return
        try:
            publish(producer, self._topic, self._messages(), self._pacer, self.stats, self._stop)
        except Exception as exc:
            log.error("demo producer stopped", error=str(exc))
        finally:
            close_producer(producer, PRODUCER_TIMEOUT_S)
            if self.stats.failed:
                log.warning(
                    "demo producer: records not published",
                    n=self.stats.failed,
                    error=str(self.stats.last_error),
                )


__all__ = ["PRODUCER_STOP_S", "PRODUCER_TIMEOUT_S", "ReplayProducer"]
