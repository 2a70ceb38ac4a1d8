"""Publishing turns to a topic at a steady rate: ``casewatch produce`` and the demo's traffic.

One pacer and one send loop for both; what differs is where the messages come from (a file's
lines, replayed with fresh event ids on each pass, or the demo's examples with poison mixed in).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from monitor.runtime.clock import Clock


class Producer(Protocol):
    def send(self, topic: str, value: bytes, key: bytes | None) -> Any: ...


def replay(
    read_pass: Callable[[], Iterable[bytes]], *, loop: bool, count: int | None
) -> Iterator[tuple[bytes | None, bytes]]:
    """(key, value) pairs to publish: the lines of each pass as raw bytes, in order.

    ``read_pass`` returns the lines afresh for every pass (the file is streamed, never held).
    Keys are the conversation_id, so one conversation stays on one partition (ordered).
    With ``loop`` the file repeats; from the second pass on each event_id gets the suffix
    ``-rN`` so replays are new events rather than duplicates the store would drop.
    Lines that are not JSON objects are sent unchanged (they exercise the dead-letter path).
    """
    sent = 0
    n_pass = 0
    while True:
        sent_this_pass = 0
        for line in read_pass():
            raw = line.rstrip(b"\r\n")
            if not raw.strip():
                continue
            if count is not None and sent >= count:
                return
            yield _rewrite(raw, n_pass)
            sent += 1
            sent_this_pass += 1
        n_pass += 1
        if not loop or sent_this_pass == 0:
            return


def _rewrite(raw: bytes, n_pass: int) -> tuple[bytes | None, bytes]:
    try:
        doc = json.loads(raw)
    except ValueError:
        return None, raw
    if not isinstance(doc, dict):
        return None, raw
    conv = doc.get("conversation_id")
    key = str(conv).encode() if conv is not None else None
    if n_pass == 0 or "event_id" not in doc:
        return key, raw
    doc["event_id"] = f"{doc['event_id']}-r{n_pass}"
    return key, json.dumps(doc, separators=(",", ":")).encode()


class Pacer:
    """Spaces sends to ``rate`` per second (None: no limit) on an injected clock."""

    def __init__(self, rate: float | None, clock: Clock) -> None:
        if rate is not None and rate <= 0:
            raise ValueError(f"rate must be > 0, got {rate}")
        self._rate = rate
        self._clock = clock
        self._start: float | None = None
        self._n = 0

    def wait(self, stop: threading.Event | None = None) -> bool:
        """Wait until the next send is due; False if ``stop`` was set meanwhile."""
        if self._rate is None:
            return stop is None or not stop.is_set()
        now = self._clock.monotonic()
        if self._start is None:
            self._start = now
        delay = max(0.0, self._start + self._n / self._rate - now)
        self._n += 1
        if stop is not None:
            return not stop.wait(delay)
        self._clock.sleep(delay)
        return True


@dataclass
class PublishStats:
    sent: int = 0
    failed: int = 0
    last_error: BaseException | None = field(default=None, repr=False)

    def record_failure(self, exc: BaseException) -> None:
        # Runs on the producer's I/O thread; a dead broker fails records by the hundred, so
        # they are counted and the caller reports them once.
        self.failed += 1
        self.last_error = exc


def publish(
    producer: Producer,
    topic: str,
    messages: Iterable[tuple[bytes | None, bytes]],
    pacer: Pacer,
    stats: PublishStats,
    stop: threading.Event | None = None,
) -> None:
    """Send ``messages`` paced by ``pacer`` until they run out or ``stop`` is set; delivery
    failures land in ``stats`` (the caller flushes and reports)."""
    for key, value in messages:
        if not pacer.wait(stop):
            return
        producer.send(topic, value=value, key=key).add_errback(stats.record_failure)
        stats.sent += 1
