"""Unsampled turns kept for their feedback from a process of their own
(``outcomes.retain_process``).

Keeping every unsampled turn on the daemon's threads cost intake more than half its rate
(``bench/ingest.py --outcomes``): serialising each turn on the consumer's thread, and the
writer thread's database work, which takes the GIL back from the consumer once per row (the
SQLite driver releases it around each step). Here both are in one process
(``ProcessPoolExecutor``, forkserver, like the screening processes), to which the keeper's
writer thread (``RetainingDone``) hands batches of:

- records (``Record``: the topic and the record's bytes, ``Envelope.raw``) of turns no step
  changed since they were decoded: decoded again here with the chain's own ``TurnDecisions``
  (the topic's decoder), which gives the same turn, and serialised; redacted first when the
  chain redacts only for storage (``redaction.before_judging: false``), as the thread would
  (``TurnDecisions.kept_row``). Never the bytes themselves: a record with a duplicated JSON
  key holds text the decoded turn, and so redaction, never saw;
- rows made in the daemon: a turn redaction changed (serialised on the consumer's thread), or
  one a screening process finished;
- batches of places (``PlaceBatch``) of turns read from Kafka, a row each
  (``RetainedTurns.retain``'s ``places``): read back from Kafka only when feedback asks for a
  turn.

What the process cannot keep is counted as on the thread: a record it cannot decode or redact
is ``dropped`` (never kept unredacted); a batch the database does not take is ``failed``; so is
a batch whose process died (the pool is rebuilt for the next). Two batches may be with the
process at once, so the next is on its way while one is written; on a stop the writer thread
waits for both. An in-memory SQLite store has no second connection to it: the pipeline then
keeps turns on the thread (``usable``).
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
from collections import deque
from collections.abc import Sequence
from concurrent.futures.process import BrokenProcessPool
from datetime import UTC, datetime
from typing import NamedTuple

from monitor.errors import CasewatchError, InvalidEvent
from monitor.runtime.clock import Clock
from monitor.sampling.judging_redaction import Unredactable
from monitor.storage.engine import in_memory
from monitor.storage.retained_turns import PlaceBatch, RetainedRow, RetainedTurns
from monitor.storage.store import Store
from monitor.stream.steps.decisions import TurnDecisions
from monitor.stream.steps.retain import Record

# A row made in the daemon, a record the process decodes (and redacts when asked), or a
# batch of records' places, written as it is.
Item = RetainedRow | Record | PlaceBatch


class Kept(NamedTuple):
    stored: int
    dropped: int  # could not be decoded or redacted: not kept
    failed: int  # the database did not take them
    error: str | None  # why, when ``failed``


_state: tuple[TurnDecisions, RetainedTurns] | None = None


def _start(url: str, decisions: TurnDecisions) -> None:
    global _state
    _state = (decisions, RetainedTurns(Store(url)))


def _keep(items: list[Item], now_s: float) -> Kept:
    if _state is None:  # pragma: no cover - the pool's initializer always ran
        return Kept(0, 0, _turns(items), "the keeper process was not initialised")
    decisions, records = _state
    rows = []
    places = []
    dropped = 0
    for item in items:
        if isinstance(item, PlaceBatch):  # records' places: nothing to decode
            places.append(item)
            continue
        if not isinstance(item, Record):  # a row made in the daemon
            rows.append(item)
            continue
        try:
            turn = decisions.decode(item.topic, item.value)
        except InvalidEvent:
            dropped += 1
            continue
        if item.redact:  # the chain redacts only for storage: as its redact step would first
            redacted = decisions.redact(turn)
            if isinstance(redacted, Unredactable):  # never kept as it is
                dropped += 1
                continue
            turn = redacted.turn
        # Redacted here when the chain redacts only for storage; else as the daemon had it.
        row = decisions.kept_row(turn)
        if row is None:
            dropped += 1
            continue
        rows.append(row)
    turns = sum(len(batch.event_ids) for batch in places)
    try:
        records.retain(rows, now=datetime.fromtimestamp(now_s, UTC), places=places)
    except CasewatchError as exc:
        return Kept(0, dropped, len(rows) + turns, str(exc))
    return Kept(len(rows) + turns, dropped, 0, None)


class KeeperProcess:
    """The process unsampled turns are kept from. ``keep`` and ``collect`` run on the keeper's
    writer thread: up to ``IN_FLIGHT`` batches are with the process at once, so one is sent
    while another is written (the hand-off is not on the process's time)."""

    IN_FLIGHT = 2

    def __init__(self, url: str, decisions: TurnDecisions, clock: Clock) -> None:
        self._url = url
        self._decisions = decisions
        self._clock = clock
        self._pool: cf.ProcessPoolExecutor | None = None
        self._flight: deque[tuple[cf.Future[Kept], int]] = deque()

    @staticmethod
    def usable(url: str) -> bool:
        """Whether a second process can reach the store at ``url`` (not in-memory SQLite)."""
        return not (url.startswith("sqlite") and in_memory(url))

    def _executor(self) -> cf.ProcessPoolExecutor:
        if self._pool is None:
            self._pool = cf.ProcessPoolExecutor(
                1,
                mp_context=multiprocessing.get_context("forkserver"),
                initializer=_start,
                initargs=(self._url, self._decisions),
            )
        return self._pool

    def start(self) -> None:
        """Start the process now (its imports take seconds), not with the first batch."""
        self._executor().submit(int)

    def keep(self, items: Sequence[Item]) -> list[Kept]:
        """Hand ``items`` to the process; returns the batches that ended meanwhile (waiting for
        the oldest while ``IN_FLIGHT`` are with the process)."""
        ended = self.collect(wait=len(self._flight) >= self.IN_FLIGHT)
        try:
            future = self._executor().submit(_keep, list(items), self._clock.time())
        except (BrokenProcessPool, RuntimeError) as exc:
            self._replace()
            ended.append(Kept(0, 0, _turns(items), _stopped(exc)))
        else:
            self._flight.append((future, _turns(items)))
        return ended

    def collect(self, *, wait: bool = False, every: bool = False) -> list[Kept]:
        """The batches that ended (``wait``: the oldest too; ``every``: all of them). A batch
        whose process died is failed whole, and the process replaced for the next."""
        ended: list[Kept] = []
        flight = self._flight
        while flight and (flight[0][0].done() or wait or every):
            future, size = flight.popleft()
            wait = False
            try:
                ended.append(future.result())
            except (BrokenProcessPool, RuntimeError, OSError) as exc:
                self._replace()
                ended.append(Kept(0, 0, size, _stopped(exc)))
        return ended

    def _replace(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def _turns(items: Sequence[Item]) -> int:
    """How many turns ``items`` hold (a batch of places holds many)."""
    return sum(len(i.event_ids) if isinstance(i, PlaceBatch) else 1 for i in items)


def _stopped(exc: BaseException) -> str:
    return f"the keeper process stopped: {type(exc).__name__}"
