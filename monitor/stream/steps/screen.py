"""Screening in worker processes: the turns that will not be judged, recognised off the
consumer's thread (``daemon.screen_processes``; 0, the default, screens nothing).

Most consumed turns are valid and not sampled. On the consumer's thread each costs pydantic's
parse + validation (half of casewatch's own per-message CPU, ``bench/README.md``) and the
identifier tripwire; both hold the GIL, so another thread cannot take them off the consumer.
Here they run in ``screen_processes`` processes (``ProcessPoolExecutor``, forkserver): a batch
of record values (with their topics when a topic has a decoder of its own) goes out, one mark
per record comes back. Each process runs the chain's own ``TurnDecisions`` (``decisions.py``),
pickled to it once: the object the decode, redact and sample steps decide with, the topic's
decoder (a ``format: mapped`` topic's mapping too) and redactor included, so no decision is
rebuilt here; it decides a batch with each part looked up once (``unjudged_turns``).

- the assistant's name: a valid turn that no configured rule selects, whose tripwire is clean
  and that the rate does not sample. It is finished here and counted exactly as the sample
  step would count it (``not_sampled``; tripwire-checked);
- None: anything else (invalid, oversized, selected by a rule or the rate, a tripwire hit or a
  turn the tripwire could check only in part). The record goes on unchanged to the in-process
  decode → sample steps, which decide as they do without screening: dead-letter reasons, rule
  reasons, tripwire counts and the budget stay in one code path.

Under ``sampling.strategy: cascade`` the processes also take the cascade's cheap look, the
costly part of sampling there (``TurnDecisions.cascade_look``): a turn beyond
``cascade_look_share`` that no rule picks and whose tripwire is clean is finished here as above;
any other valid turn comes back as its ``Look`` (its cell, a short string, and its tripwire
result), and goes on with it in its envelope to the decode → sample steps, where the sample step
counts the tripwire and draws with that cell against the live probabilities, which only the
consumer's process holds. What is decided and counted is what the steps decide without
screening; only the offline judge's reading leaves the consumer's thread.

With ``outcomes.retain_unsampled`` the pipeline gives the step its keeper (``RetainingDone``):
the processes then hand each finished turn back as the row it is kept as (redacted as the keeper
would redact it, serialised there, off the consumer's thread), and the step queues that row with
the keeper before finishing the record, so unsampled turns are kept for feedback with screening
as without it (a turn that cannot be redacted for keeping comes back without a row and is
counted ``dropped`` by the keeper, as it would be there).

So screening never changes an outcome; it only moves the common case off the consumer's
thread. The processes start at the step's first poll, while the group join is under way, not
with the first batch, whose marks would otherwise wait out their imports. A batch whose
process fails or dies (``BrokenProcessPool``) goes on whole to the in-process path and the
pool is rebuilt. Batches are collected in submission order; a record the next step refuses
waits here (backpressure: ``submit`` refuses while any does). On a revoke the pipeline's
``hold`` (``Rebalancing``) finishes what is in flight here, so nothing of a revoked partition
stays in this step.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import multiprocessing
from collections import deque
from collections.abc import Collection, Mapping
from concurrent.futures.process import BrokenProcessPool
from typing import NamedTuple, Protocol, cast

import structlog

from consumers.records import RawMessage, TopicPartition
from monitor.errors import MessageRejected, ScreeningOff
from monitor.runtime.clock import Clock, Deadline, SystemClock
from monitor.sampling.sampler import NOT_SAMPLED
from monitor.stream.steps.base import (
    DoneStep,
    Envelope,
    Look,
    ProcessingStep,
    SamplingMetrics,
    forward,
)
from monitor.stream.steps.decisions import TurnDecisions

log = structlog.get_logger(__name__)

# A batch goes out at this many records or bytes, whichever comes first. Larger batches mean
# fewer hand-offs to the pool's threads, which wait for the GIL behind the consumer's poll
# (bench/README.md, "Ingest per turn, fourth pass"); the byte bound keeps what is in flight
# here small whatever the record size (a batch per queued slot, plus the one being filled).
DEFAULT_BATCH = 1024
BATCH_MAX_BYTES = 1 << 20
# Under the cascade a looked-at turn costs the process milliseconds (the offline judge,
# docs/cascade.md), so a batch is smaller: ~0.3 s of looks at look share 1.0, and what is in
# flight (four batches a process) is screened within ``SCREEN_FINISH_S`` on a revoke.
CASCADE_BATCH = 128
# Consecutive failed batches after which screening is switched off for the rest of the run
# (e.g. processes cannot start here): every record then takes the in-process path.
MAX_FAILURES = 3
_WAIT_SLICE_S = 0.05
# Screening a batch takes milliseconds (a few hundred under the cascade); a revoke waits at
# most this long for those in flight.
SCREEN_FINISH_S = 5.0

# (event id, conversation id, assistant, the redacted turn as JSON text): a kept turn's row.
KeptRow = tuple[str, str, str, str]


class Finished(NamedTuple):
    """A turn the cascade's screening finished (beyond ``cascade_look_share``, no rule, a clean
    tripwire): its assistant, what its redaction replaced per kind (counted as the redact step
    would count it: under the cascade the turns screening finishes would otherwise go through
    that step), and with keeping on its row (None: it cannot be redacted for keeping)."""

    assistant: str
    redactions: tuple[tuple[str, int], ...] = ()
    row: KeptRow | None = None


# The assistant of a turn finished by screening (with keeping on: and its row to keep, None
# when it cannot be redacted for keeping; under the cascade a ``Finished``); a ``Look``: goes
# on with the cascade's cheap look; None: goes on.
Mark = str | tuple[str, KeptRow | None] | Finished | Look | None


class ScreenMetrics(SamplingMetrics, Protocol):
    def record_redactions(self, counts: Mapping[str, int]) -> None: ...


_Flight = tuple[list[Envelope[RawMessage]], "cf.Future[list[Mark]]", int]


class Keeper(Protocol):
    """Where unsampled turns are kept for feedback (``RetainingDone``)."""

    def keep_row(self, row: KeptRow | None) -> None:
        """Queue ``row`` to be kept (None: a turn that could not be redacted, not kept)."""
        ...


_decisions: TurnDecisions | None = None
_keeping = False


def _start_process(decisions: TurnDecisions, keeping: bool = False) -> None:
    global _decisions, _keeping
    _decisions, _keeping = decisions, keeping


def _screen(values: list[bytes | None], topics: list[str] | None = None) -> list[Mark]:
    """One mark per record (its value, and its topic when a topic has a decoder of its own:
    ``ScreenStep._dispatch``): ``TurnDecisions.finishes_unjudged``, and with keeping on the
    finished turn's row (``TurnDecisions.kept_row``)."""
    decisions = _decisions
    if decisions is None:  # pragma: no cover - the pool's initializer always ran
        raise ScreeningOff("the screening process was not initialised")
    if decisions.cascading:
        return _screen_cascade(decisions, values, topics)
    turns = decisions.unjudged_turns(values, topics)
    if not _keeping:
        return [None if turn is None else turn.assistant.name for turn in turns]
    kept_row = decisions.kept_row
    return [None if turn is None else (turn.assistant.name, kept_row(turn)) for turn in turns]


def _screen_cascade(
    decisions: TurnDecisions, values: list[bytes | None], topics: list[str] | None
) -> list[Mark]:
    """``_screen`` under the cascade: a finished turn's mark as there, else its ``Look``."""
    marks: list[Mark] = []
    look = decisions.cascade_look
    # Without topics no topic has a decoder of its own: the topic decides nothing.
    records = zip(topics if topics is not None else [""] * len(values), values, strict=True)
    for topic, value in records:
        seen = look(topic, value)
        if seen is None or isinstance(seen, Look):
            marks.append(seen)
            continue
        turn, redactions = seen
        row = decisions.kept_row(turn) if _keeping else None
        marks.append(Finished(turn.assistant.name, tuple(redactions.items()), row))
    return marks


class ScreenStep:
    def __init__(
        self,
        next_step: ProcessingStep[RawMessage],
        done: DoneStep,
        metrics: ScreenMetrics,
        *,
        processes: int,
        decisions: TurnDecisions,
        batch_size: int | None = None,
        batch_max_bytes: int = BATCH_MAX_BYTES,
        clock: Clock | None = None,
        keeper: Keeper | None = None,
    ) -> None:
        """``keeper``: where the turns screening finishes are kept for feedback (None: not
        kept). ``batch_size``: records a batch (None: ``DEFAULT_BATCH``, ``CASCADE_BATCH``
        when the decisions take the cascade's cheap look)."""
        if batch_size is None:
            batch_size = CASCADE_BATCH if decisions.cascading else DEFAULT_BATCH
        if processes < 1 or batch_size < 1 or batch_max_bytes < 1:
            raise ValueError("processes, batch_size and batch_max_bytes must be >= 1")
        self._next = next_step
        self._done = done
        self._metrics = metrics
        self._processes = processes
        # Pickled once per process (the initializer's argument), not per batch.
        self._init_args = (decisions, keeper is not None)
        # A batch's topics go with its values only when a topic has a decoder of its own
        # (``format: mapped``): otherwise a pair per record to build, pickle and unpickle cost
        # more than the rest of the hand-off (bench/README.md, "Screening per turn").
        self._with_topics = decisions.only_decoder is None
        # Marks that are an assistant or None (no keeper, no cheap look): ``_collect`` hands
        # them on without telling the other kinds apart.
        self._names_only = keeper is None and not decisions.cascading
        self._keeper = keeper
        self._tripwire = decisions.tripwire is not None
        self._batch_size = batch_size
        self._batch_max_bytes = batch_max_bytes
        self._batch_bytes = 0
        # A few batches queued per process, so a process never waits for the consumer's thread.
        self._max_batches = 4 * processes
        self._clock = clock or SystemClock()
        self._pool: cf.ProcessPoolExecutor | None = None
        self._batch: list[Envelope[RawMessage]] = []
        # (batch, its marks to come, the pool generation that screens it)
        self._flight: deque[_Flight] = deque()
        self._generation = 0  # a new pool is a new generation
        self._ready: deque[Envelope[RawMessage]] = deque()  # refused by the next step
        self._skipped: dict[str, int] = {}  # assistant -> turns finished since the last flush
        self._redactions: dict[str, int] = {}  # kind -> values of the cascade's finished turns
        self.fallbacks = 0  # batches handed on unscreened because a process failed
        self._failures = 0  # in a row; at MAX_FAILURES screening is off for this run
        self.disabled = False

    def _executor(self) -> cf.ProcessPoolExecutor:
        if self._pool is None:
            # forkserver, not fork: the daemon has threads (judge workers, kafka-python's I/O)
            # and forking a threaded process can copy a held lock into the child.
            self._pool = cf.ProcessPoolExecutor(
                self._processes,
                mp_context=multiprocessing.get_context("forkserver"),
                initializer=_start_process,
                initargs=self._init_args,
            )
        return self._pool

    def submit(self, message: Envelope[RawMessage]) -> None:
        if self.disabled and not (self._batch or self._flight or self._ready):
            self._next.submit(message)
            return
        if self._ready:
            raise MessageRejected("the next step refuses screened turns")
        if len(self._batch) >= self._batch_size or self._batch_bytes >= self._batch_max_bytes:
            if len(self._flight) >= self._max_batches:
                raise MessageRejected(f"{len(self._flight)} batches are being screened")
            self._dispatch()
        self._batch.append(message)
        value = message.payload.value
        if value:
            self._batch_bytes += len(value)

    def _dispatch(self) -> None:
        batch, self._batch = self._batch, []
        self._batch_bytes = 0
        values = [m.payload.value for m in batch]
        topics = [m.tp.topic for m in batch] if self._with_topics else None
        future: cf.Future[list[Mark]]
        if self.disabled:
            future = cf.Future()
            future.set_exception(ScreeningOff("screening is off"))
        else:
            try:
                future = self._executor().submit(_screen, values, topics)
            # The pool cannot start or take work (RuntimeError: shut down under us).
            except (BrokenProcessPool, RuntimeError, OSError) as exc:
                future = cf.Future()
                future.set_exception(exc)
        self._flight.append((batch, future, self._generation))

    def _collect(self, wait_s: float = 0.0) -> None:
        while self._flight:
            batch, future, generation = self._flight[0]
            if not future.done():
                if wait_s <= 0:
                    return
                cf.wait([future], timeout=wait_s)
                if not future.done():
                    return
            self._flight.popleft()
            try:
                marks = future.result()
            except Exception as exc:  # a process died or failed: decide in this process
                self._fall_back(exc, generation)
                marks = [None] * len(batch)
            else:
                self._failures = 0
            skipped = self._skipped
            if self._names_only:
                names = cast("list[str | None]", marks)
                ready, finished = self._ready.append, self._done.submit
                for message, name in zip(batch, names, strict=True):
                    if name is None:
                        ready(message)
                    else:
                        finished(message)
                        skipped[name] = skipped.get(name, 0) + 1
                continue
            for message, mark in zip(batch, marks, strict=True):
                if mark is None:
                    self._ready.append(message)
                    continue
                if isinstance(mark, tuple):
                    if isinstance(mark, Look):  # goes on, with the cheap look taken
                        tp, offset, record = message.tp, message.offset, message.payload
                        self._ready.append(Envelope(tp, offset, record, None, mark))
                        continue
                    if isinstance(mark, Finished):
                        assistant, replaced, row = mark
                        redactions = self._redactions
                        for kind, n in replaced:
                            redactions[kind] = redactions.get(kind, 0) + n
                    else:
                        assistant, row = mark
                    if self._keeper is not None:
                        self._keeper.keep_row(row)
                else:
                    assistant = mark
                self._done.submit(message)
                skipped[assistant] = skipped.get(assistant, 0) + 1

    @property
    def in_flight(self) -> int:
        """Records here: batched, being screened, or refused by the next step."""
        return len(self._batch) + sum(len(b) for b, _, _ in self._flight) + len(self._ready)

    @property
    def screening(self) -> bool:
        """Whether a batch is in a screening process now."""
        return bool(self._flight)

    def wait_any(self, timeout: float) -> bool:
        """Block until the oldest batch in flight is screened, or ``timeout`` passes (False at
        once when no batch is in flight)."""
        if not self._flight:
            return False
        cf.wait([self._flight[0][1]], timeout=timeout)
        return True

    def _fall_back(self, exc: BaseException, generation: int) -> None:
        self.fallbacks += 1
        if self.disabled or generation != self._generation:
            return  # the other batches of a pool already given up count as one failure
        self._failures += 1
        self._generation += 1
        log.warning("a screening process failed; its batch is decoded here", error=repr(exc))
        if self._pool is not None:
            # Not waited for (a step never blocks the loop): what the old pool still runs is
            # bounded work whose marks are read only if it finishes, and its processes exit
            # after it.
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None  # rebuilt at the next poll; batches in flight fail over too
        if self._failures >= MAX_FAILURES:
            self.disabled = True
            log.error(
                "screening processes keep failing; screening is off until restart",
                failures=self._failures,
            )

    def _forward(self) -> None:
        forward(self._ready, self._next)

    def _flush_counts(self) -> None:
        if self._redactions:
            redactions, self._redactions = self._redactions, {}
            self._metrics.record_redactions(redactions)
        skipped, self._skipped = self._skipped, {}
        for assistant, n in skipped.items():
            self._metrics.record_sampling(assistant, NOT_SAMPLED, n)
            if self._tripwire:
                self._metrics.record_tripwire(assistant, n)

    def _warm(self) -> None:
        """Start the processes ahead of the first batch. A process's start (the imports its
        initializer pays, seconds of CPU) would otherwise fall on the first batches, while the
        consumer's thread waits for their marks; the loop's first polls come during the group
        join, which takes seconds anyway."""
        # On an error the first batch meets it too, and is decided in this process.
        with contextlib.suppress(BrokenProcessPool, RuntimeError, OSError):
            self._executor().submit(_screen, [])

    def poll(self) -> None:
        if self._pool is None and not self.disabled:
            self._warm()
        if self._batch and len(self._flight) < self._max_batches:
            self._dispatch()
        self._collect()
        self._forward()
        self._flush_counts()
        self._next.poll()

    def finish(self, timeout: float) -> None:
        """Screen and hand on everything submitted so far (a revoke: the commit that follows
        must see these records finished or held downstream, not in flight here)."""
        deadline = Deadline(timeout, self._clock)
        if self._batch:
            self._dispatch()
        while self._flight and (deadline.remaining() or 0.0) > 0:
            self._collect(min(_WAIT_SLICE_S, deadline.remaining() or 0.0))
        self._forward()
        self._flush_counts()

    # ``Rebalancing``: nothing stays here across a revoke, so there is nothing to hold.
    def hold(self, tps: Collection[TopicPartition]) -> int:
        self.finish(SCREEN_FINISH_S)
        return 0

    def running_in(self, tps: Collection[TopicPartition]) -> int:
        return 0  # screening is not paid for: ``hold`` finished it

    def release(self, owned: Collection[TopicPartition]) -> None:
        pass

    def discard(self, tps: Collection[TopicPartition]) -> None:
        """Forget the records of these partitions (re-read, or owned elsewhere now)."""
        owned = set(tps)
        self._batch = [m for m in self._batch if m.tp not in owned]
        self._batch_bytes = sum(len(m.payload.value or b"") for m in self._batch)
        self._ready = deque(m for m in self._ready if m.tp not in owned)
        self._flight = deque(
            (batch, future, generation)
            if not any(m.tp in owned for m in batch)
            else (
                [m for m in batch if m.tp not in owned],
                _unscreened(batch, owned, future),
                generation,
            )
            for batch, future, generation in self._flight
        )

    def join(self, timeout: float | None = None) -> None:
        deadline = Deadline(timeout, self._clock)
        if self._batch:
            self._dispatch()
        while self._flight or self._ready:
            remaining = deadline.remaining()
            if remaining is not None and remaining <= 0:
                break
            wait = _WAIT_SLICE_S if remaining is None else min(_WAIT_SLICE_S, remaining)
            self._collect(wait)
            self._forward()
            self._next.poll()
            if not self._flight and self._ready:
                self._clock.sleep(wait)  # the next step refuses: give it time
        self._flush_counts()
        self._next.join(deadline.remaining())

    def close(self) -> None:
        # Never waits (the step protocol): batches not started are cancelled, and a batch a
        # process is screening is bounded work (redaction's size bound) whose result nobody
        # reads; the processes exit when it is done.
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        self._next.close()


def _unscreened(
    batch: list[Envelope[RawMessage]], owned: set[TopicPartition], future: cf.Future[list[Mark]]
) -> cf.Future[list[Mark]]:
    """The marks of ``batch`` without those of ``owned``'s records, once ``future`` is done."""
    keep = [i for i, m in enumerate(batch) if m.tp not in owned]
    result: cf.Future[list[Mark]] = cf.Future()

    def chain(done: cf.Future[list[Mark]]) -> None:
        try:
            marks = done.result()
        except Exception as exc:
            result.set_exception(exc)
        else:
            result.set_result([marks[i] for i in keep])

    future.add_done_callback(chain)
    return result
