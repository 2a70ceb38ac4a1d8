"""A consumer group joined on a thread of its own, while the daemon gets the rest ready.

A join round is the broker's to time (on Tansu 0.6 a static member's takes half the session
timeout plus 3 s), so a restarted daemon that joins first and opens its store, judge clients
and probe server meanwhile reaches its first verdict that much sooner. A kafka-python consumer
is not thread-safe: whoever uses it waits for the join to end first (``wait``). A join that
fails or times out is simply redone by the next ``poll()``.
"""

from __future__ import annotations

import threading
from typing import Any

import structlog

from consumers._kafka import broker_errors
from consumers._kafka_group import join_group

log = structlog.get_logger(__name__)


class EarlyJoin:
    def __init__(self, servers: list[str], timeout_ms: int) -> None:
        self._servers = servers
        self._timeout_ms = timeout_ms
        self._thread: threading.Thread | None = None
        # Under way: the partitions it is given are only noted (no caller is there to hear).
        self.joining = False

    def start(self, consumer: Any) -> None:
        """Join ``consumer``'s group on a thread, unless a join started here is not over yet."""
        if self._thread is not None:
            return
        self.joining = True
        self._thread = threading.Thread(
            target=self._join, args=(consumer,), name="kafka-join", daemon=True
        )
        self._thread.start()

    def wait(self) -> None:
        """Wait for the join to end (bounded: it has its timeout); a no-op on its own thread,
        where the rebalance listener it triggers runs."""
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
            self._thread = None

    def _join(self, consumer: Any) -> None:
        try:
            with broker_errors("joining the group", self._servers):
                joined = join_group(consumer, self._timeout_ms)
            log.info("joined the consumer group" if joined else "group join not finished yet")
        except Exception as exc:  # the loop's first poll joins again and reports failures
            log.warning("joining the consumer group failed; retrying on poll", error=str(exc))
        finally:
            self.joining = False
