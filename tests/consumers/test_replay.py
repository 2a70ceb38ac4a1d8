"""The replay producer's pure parts: which messages, keyed how, paced how; stats of failures."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from consumers.replay import Pacer, PublishStats, publish, replay
from monitor.runtime.clock import ManualClock


def _lines(*docs: Any) -> list[bytes]:
    return [d if isinstance(d, bytes) else json.dumps(d).encode() + b"\n" for d in docs]


def test_replay_sends_lines_as_they_are_keyed_by_conversation() -> None:
    lines = _lines({"event_id": "e1", "conversation_id": "c1"}, b"\n", b"garbage\n")
    out = list(replay(lambda: lines, loop=False, count=None))
    assert out == [(b"c1", lines[0].rstrip(b"\n")), (None, b"garbage")]


def test_replay_loop_renames_events_per_pass_and_stops_at_count() -> None:
    lines = _lines({"event_id": "e1", "conversation_id": "c1"}, {"event_id": "e2"})
    out = list(replay(lambda: lines, loop=True, count=5))
    ids = [json.loads(v)["event_id"] for _, v in out]
    assert ids == ["e1", "e2", "e1-r1", "e2-r1", "e1-r2"]


def test_replay_of_an_empty_file_ends_even_with_loop() -> None:
    assert list(replay(lambda: [b"\n"], loop=True, count=None)) == []


def test_pacer_spaces_sends_on_the_clock() -> None:
    clock = ManualClock()
    pacer = Pacer(4.0, clock)
    for _ in range(5):
        pacer.wait()
    assert clock.monotonic() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="rate"):
        Pacer(0, clock)


class _Future:
    def __init__(self, error: BaseException | None) -> None:
        self._error = error

    def add_errback(self, fn: Any) -> None:
        if self._error is not None:
            fn(self._error)


class _Producer:
    """Records sends; fails every value listed in ``fail`` the way kafka-python's futures do."""

    def __init__(self, fail: set[bytes]) -> None:
        self.sent: list[tuple[bytes | None, bytes]] = []
        self._fail = fail

    def send(self, topic: str, value: bytes, key: bytes | None) -> _Future:
        self.sent.append((key, value))
        return _Future(RuntimeError("broker gone") if value in self._fail else None)


def test_publish_counts_sent_and_failed_and_keeps_the_last_error() -> None:
    producer = _Producer(fail={b"b"})
    stats = PublishStats()
    clock = ManualClock()
    publish(producer, "t", [(None, b"a"), (b"k", b"b"), (None, b"c")], Pacer(2.0, clock), stats)
    assert producer.sent == [(None, b"a"), (b"k", b"b"), (None, b"c")]
    assert (stats.sent, stats.failed, str(stats.last_error)) == (3, 1, "broker gone")
    assert clock.monotonic() == pytest.approx(1.0)


def test_publish_stops_when_asked() -> None:
    stop = threading.Event()
    stop.set()
    producer = _Producer(fail=set())
    stats = PublishStats()
    publish(producer, "t", [(None, b"a")], Pacer(None, ManualClock()), stats, stop)
    assert producer.sent == [] and stats.sent == 0
