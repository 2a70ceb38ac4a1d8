"""What the stream records: intake, sampling, the identifier tripwire, dead letters, stored
verdicts, offset commits, backpressure, consumer lag and rebalances (the families are declared
in ``monitor.metrics.exporter``; the verdicts' own series are judging's,
``monitor.judging.recorder``).

The daemon builds one ``StreamRecorder`` over its ``Metrics`` and hands it to the steps, which
type it by the small protocol each needs (``SamplingMetrics``, ``StoreMetrics``, ...).

It also keeps the run's own tally (``RunTally``: records read, turns sampled, judged, skipped
and dead-lettered, by reason; under the cascade the turns its cheap look saw and drew) for
the daemon's summary lines: the metrics are cumulative over whatever else shares their
registry, and a summary should not sum label sets to say what this run did.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from monitor.judging.recorder import JudgingRecorder, failure_label
from monitor.metrics.exporter import Metrics
from monitor.sampling.budget import UnitState
from monitor.sampling.sampler import CASCADE_REASON
from monitor.schema.turn import Verdict

# Sampling counter children kept per (sampled, assistant, reason): every consumed turn is
# counted, and ``labels()`` costs several microseconds. Bounded, as assistant names are input.
_SAMPLING_CACHE_MAX = 1024
# casewatch_turns_skipped_total reason of a sampled turn whose verdict is already stored.
ALREADY_JUDGED = "already_judged"


class Decision(Protocol):
    """What ``record_sampling`` needs of a ``monitor.sampling.sampler.SampleDecision``."""

    @property
    def sampled(self) -> bool: ...

    @property
    def reason(self) -> str: ...


@dataclass
class RunTally:
    """What the stream did since its recorder was built; updated on the loop's thread, as the
    metrics are (``judge_failed`` by the verdict's failure reason, ``skipped`` and
    ``dead_lettered`` by the reason of their metric)."""

    read: int = 0
    sampled: int = 0
    judged: int = 0
    judge_failed: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    dead_lettered: Counter[str] = field(default_factory=Counter)
    # The cascade's: turns its cheap look saw, and those it drew by their cell's probability
    # (a rule's turns are looked at too, but drawn by the rule).
    looked: int = 0
    drawn: int = 0


class Draws(Protocol):
    """What ``record_verdict`` needs of the cascade's ``monitor.sampling.cascade.DrawLedger``."""

    def of(self, event_id: str) -> tuple[float, str] | None: ...


class StreamRecorder:
    def __init__(
        self,
        metrics: Metrics,
        judging: JudgingRecorder | None = None,
        *,
        draws: Draws | None = None,
    ) -> None:
        self.tally = RunTally()
        # The cascade's draws (None: uniform sampling): a verdict's turn weighs 1/π in
        # casewatch_turns_judged_weight_total, π the probability its draw stored. Read before
        # the store step forgets the entry (the judge step records the verdict first).
        self.draws = draws
        self._m = metrics
        self._assistant = metrics.assistant_label
        self._judging = judging or JudgingRecorder(metrics)
        self._sampling_children: dict[tuple[bool, str, str], Any] = {}
        self._lag_series: set[tuple[str, str]] = set()
        self._lag_lock = threading.Lock()

    def prime_unreadable(self, topics: Iterable[str], reasons: Iterable[str]) -> None:
        for topic in topics:
            for reason in reasons:
                self._m.unreadable_batches.labels(topic=topic, reason=reason)

    def record_unreadable(self, topic: str, reason: str) -> None:
        """One failed read of a batch the consumer cannot decompress or check (retried)."""
        self._m.unreadable_batches.labels(topic=topic, reason=reason).inc()

    def record_exposition_fallback(self, reason: str) -> None:
        """/metrics left its fast renderer (``Exposition``'s ``on_fallback``)."""
        self._m.exposition_fallback.labels(reason=reason).inc()

    def set_kafka_patch_fallbacks(self, states: Mapping[str, bool]) -> None:
        """Each kafka-python patch: 1 when it fell back to the library's behaviour, else 0."""
        for patch, fell_back in states.items():
            self._m.kafka_patch_fallback.labels(patch=patch).set(1 if fell_back else 0)

    def record_group_rejoin(self) -> None:
        self._m.group_rejoins.inc()

    def record_redactions(self, counts: Mapping[str, int]) -> None:
        """Values redacted, by kind; kinds are the configured detectors' names."""
        for kind, n in counts.items():
            self._m.redactions.labels(kind=kind).inc(n)

    def prime_redactions(self, kinds: Iterable[str]) -> None:
        for kind in kinds:
            self._m.redactions.labels(kind=kind)

    def prime(self, *, topics: Iterable[str] = (), dead_letter_reasons: Iterable[str] = ()) -> None:
        """Export zero-valued series for label values known up front, so ``rate()`` and
        ``increase()`` see the first event instead of a series appearing out of nowhere."""
        for topic in topics:
            self._m.turns_consumed.labels(topic=topic)
            self._m.offsets_committed.labels(topic=topic)
        for reason in dead_letter_reasons:
            self._m.dead_letter.labels(reason=reason)

    def record_consumed(self, topic: str, count: int = 1) -> None:
        self._m.turns_consumed.labels(topic=topic).inc(count)
        self.tally.read += count

    def record_sampling(self, assistant: str, decision: Decision, count: int = 1) -> None:
        key = (decision.sampled, assistant, decision.reason)
        child = self._sampling_children.get(key)
        if child is None:
            counter = self._m.turns_sampled if decision.sampled else self._m.turns_skipped
            child = counter.labels(assistant=self._assistant(assistant), reason=decision.reason)
            if len(self._sampling_children) < _SAMPLING_CACHE_MAX:
                self._sampling_children[key] = child
        child.inc(count)
        if decision.sampled:
            self.tally.sampled += count
            if decision.reason == CASCADE_REASON:
                self.tally.drawn += count
        elif count:  # the OTLP skip reasons are primed with a count of 0
            self.tally.skipped[decision.reason] += count

    def record_tripwire(
        self,
        assistant: str,
        checked: int,
        mismatches: Iterable[tuple[str, int]] = (),
        truncated: int = 0,
    ) -> None:
        """``checked`` turns of ``assistant``; ``mismatches``: (identifier kind, turns);
        ``truncated``: turns checked only as far as the tripwire's bounds."""
        label = self._assistant(assistant)
        self._m.tripwire_checked.labels(assistant=label).inc(checked)
        # Created at 0 with the first check, so the share on the pipeline dashboard reads 0
        # (not "no data") and rate() counts the first truncated turn.
        partial = self._m.tripwire_truncated.labels(assistant=label)
        if truncated:
            partial.inc(truncated)
        for kind, n in mismatches:
            self._m.identifier_mismatch.labels(assistant=label, kind=kind).inc(n)

    def record_cheap_look(self, assistant: str, cell: str, count: int) -> None:
        """``count`` turns of ``assistant`` the cascade's cheap look put in ``cell``."""
        self._m.cheap_look_turns.labels(assistant=self._assistant(assistant), cell=cell).inc(count)
        self.tally.looked += count

    def record_already_judged(self, assistant: str, count: int = 1) -> None:
        """Sampled turns not judged because the store already holds their verdict under the
        current judge configuration (a replay after a crash or a rebalance): no judge call."""
        label = self._assistant(assistant)
        self._m.turns_skipped.labels(assistant=label, reason=ALREADY_JUDGED).inc(count)
        self.tally.skipped[ALREADY_JUDGED] += count

    def record_verdict(self, verdict: Verdict) -> None:
        """A verdict the stream finished: judging's series (``JudgingRecorder``), weighted by
        1/π of its cascade draw (1: drawn uniformly, by a rule, or not in the ledger, which is
        also what its stored row says)."""
        drawn = None if self.draws is None else self.draws.of(verdict.event_id)
        self._judging.record_verdict(verdict, 1.0 if drawn is None else 1.0 / drawn[0])
        if verdict.status == "ok" and verdict.turn_band is not None:
            self.tally.judged += 1
        else:
            self.tally.judge_failed[failure_label(verdict.failure_reason)] += 1

    def record_dead_letter(self, reason: str) -> None:
        self._m.dead_letter.labels(reason=reason).inc()
        self.tally.dead_lettered[reason] += 1

    def record_dead_letter_held(self, why: str) -> None:
        self._m.dead_letters_held.labels(why=why).inc()

    def record_traces(self, open_traces: int, open_spans: int, finished: Mapping[str, int]) -> None:
        """Traces being assembled, and how many finished since the last call, by cause."""
        self._m.open_traces.set(open_traces)
        self._m.open_spans.set(open_spans)
        for cause, count in finished.items():
            self._m.traces_finished.labels(cause=cause).inc(count)

    def prime_traces(self, causes: Iterable[str]) -> None:
        for cause in causes:
            self._m.traces_finished.labels(cause=cause)
        for outcome in ("sent", "failed"):
            self._m.spans_repartitioned.labels(outcome=outcome)

    def record_repartition(self, outcome: str, count: int = 1) -> None:
        """OTLP batch parts re-published keyed by trace id (sent) or failing (failed)."""
        self._m.spans_repartitioned.labels(outcome=outcome).inc(count)

    def record_evaluation_export(self, outcome: str, count: int) -> None:
        """Evaluation records exported or dropped (called from the SDK's export thread)."""
        self._m.evaluation_records.labels(outcome=outcome).inc(count)

    def prime_evaluation_export(self, outcomes: Iterable[str]) -> None:
        for outcome in outcomes:
            self._m.evaluation_records.labels(outcome=outcome)

    def record_storage_error(self) -> None:
        self._m.storage_errors.inc()

    def record_stored(self, inserted: int, duplicate: int) -> None:
        if inserted:
            self._m.stored.labels(outcome="inserted").inc(inserted)
        if duplicate:
            self._m.stored.labels(outcome="duplicate").inc(duplicate)

    def record_commit(self, topics: Iterable[str]) -> None:
        for topic in topics:
            self._m.offsets_committed.labels(topic=topic).inc()

    def record_commit_failure(self) -> None:
        self._m.commit_failures.inc()

    def set_in_flight(self, turns: int) -> None:
        self._m.in_flight.set(turns)

    def set_paused_partitions(self, partitions: int) -> None:
        self._m.paused_partitions.set(partitions)

    def set_judge_budget(self, state: Mapping[str, UnitState]) -> None:
        """The hourly judge budget as it stands (``HourlyBudget.state``), per unit."""
        m = self._m
        for unit, now in state.items():
            m.judge_budget_reserved.labels(unit=unit).set(now.reserved)
            m.judge_budget_spent.labels(unit=unit).set(now.spent)
            if now.limit is not None:
                m.judge_budget_limit.labels(unit=unit).set(now.limit)
            if now.available is not None:
                m.judge_budget_available.labels(unit=unit).set(now.available)

    def record_revoke_abandoned(self, turns: int) -> None:
        self._m.revoke_abandoned.inc(turns)

    def set_lag(self, lag: Iterable[tuple[tuple[str, int], int]]) -> None:
        """Replace the lag series (``lag`` as ``dict.items()`` of (topic, partition) -> lag):
        partitions no longer assigned disappear instead of freezing at their last value."""
        current: set[tuple[str, str]] = set()
        for (topic, partition), value in lag:
            key = (topic, str(partition))
            current.add(key)
            self._m.consumer_lag.labels(*key).set(value)
        # Removed one by one (not clear()): a scrape in between must not see every series gone.
        with self._lag_lock:
            for key in self._lag_series - current:
                self._m.consumer_lag.remove(*key)
            self._lag_series = current


__all__ = ["ALREADY_JUDGED", "Decision", "RunTally", "StreamRecorder"]
