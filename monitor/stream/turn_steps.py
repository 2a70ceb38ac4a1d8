"""The steps one turn goes through, wired: decode → [redact →] sample → look-up → judge →
store, for every driver of the chain.

The daemon (``pipeline.build_pipeline``) puts its intake steps before them and the export and
the commit after; ``casewatch judge`` (``monitor.batch``) feeds them a file and gives them the
granular file as the store and its rejects file as the dead-letter sink. What differs between
the two is only what the steps are given: the typed ``TurnStepsConfig``, a ``VerdictStore``,
a ``SamplingPolicy`` and a recorder (``TurnMetrics``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol

from monitor.config.sampling import SamplingConfig
from monitor.judging.evaluator import Evaluator
from monitor.judging.heuristic.tripwire import identifier_tripwire
from monitor.redaction import Redactor
from monitor.redaction.config import RedactionConfig
from monitor.runtime.clock import Clock
from monitor.sampling.budget import HourlyBudget
from monitor.sampling.judging_redaction import JudgingRedaction
from monitor.sampling.sampler import Sampler
from monitor.schema.turn import TurnEvent
from monitor.stream.steps.base import (
    DoneStep,
    JudgedTurn,
    ProcessingStep,
    SamplingMetrics,
    VerdictWriter,
)
from monitor.stream.steps.commit import CommitMetrics
from monitor.stream.steps.decisions import Decoder, TurnDecisions, cheap_cell
from monitor.stream.steps.decode import DecodeMetrics, DecodeStep
from monitor.stream.steps.judge import JudgeMetrics, JudgeStep
from monitor.stream.steps.lookup import JudgedLookup, LookupMetrics, LookupStep
from monitor.stream.steps.redact import (
    RedactingDeadLetterSink,
    RedactingWriter,
    RedactionMetrics,
    RedactStep,
)
from monitor.stream.steps.sample import Decider, SampleStep
from monitor.stream.steps.store import StoreMetrics, StoreStep

if TYPE_CHECKING:  # the protocol only: kafka-python need not be loaded
    from consumers.dlq import DeadLetterSink


class TurnMetrics(
    CommitMetrics,
    DecodeMetrics,
    RedactionMetrics,
    SamplingMetrics,
    LookupMetrics,
    JudgeMetrics,
    StoreMetrics,
    Protocol,
):
    """What the steps of one turn record (the daemon's ``StreamRecorder``, the batch's own)."""

    def prime_redactions(self, kinds: Iterable[str]) -> None: ...


class VerdictStore(JudgedLookup, VerdictWriter, Protocol):
    """Where verdicts are kept and looked up: the SQL store, or the batch's granular file."""


class SamplingPolicy(Decider, Protocol):
    """Which turns are judged (the daemon's ``Sampler``; the batch judges every turn once),
    and the budget a sampled turn's reservation is drawn from (its decision carries the
    reservation, the steps settle it)."""

    @property
    def budget(self) -> HourlyBudget: ...


@dataclass(frozen=True)
class TurnStepsConfig:
    """What the steps of one turn are built with."""

    concurrency: int  # judge calls at once
    max_in_flight: int  # turns held by the look-up and the judge step each
    max_bytes: int  # a larger record is dead-lettered ``too_large`` before any parsing
    flush_timeout_s: float  # a dead-letter flush in progress at a stop fits the drain
    redaction: RedactionConfig
    identifier_tripwire: bool  # checked on every turn by the sample step
    # A turn that cannot be redacted is dead-lettered (the batch's rejects file) instead of
    # being finished as skipped (the daemon).
    dead_letter_unredactable: bool = False
    # Each judge thread stores its verdict (``StoreStep.write_now`` as the judge step's
    # ``on_judged``) before taking the next turn (the daemon: a paid verdict never waits in
    # memory for the loop), or the store step on the loop's thread stores them all in batches
    # (the batch: a file written from one thread, no lock convoy).
    write_through: bool = True


# Builds the step after the store (the daemon's export), given how free text that leaves the
# process is redacted: the chain's redactor, or unchanged when redaction is off.
AfterStore = Callable[[Callable[[str], str]], ProcessingStep[JudgedTurn]]


class TurnSteps(NamedTuple):
    """The steps of one turn, wired, from decode to store."""

    first: DecodeStep
    after_decode: ProcessingStep[TurnEvent]  # redact, or sample
    sample: SampleStep
    lookup: LookupStep
    judge: JudgeStep
    store: StoreStep
    dlq: DeadLetterSink  # the sink as the steps use it (redacting, when configured)
    decisions: TurnDecisions  # what decode, redact and sample decided by


def turn_decisions(
    config: TurnStepsConfig,
    *,
    decoders: Mapping[str, Decoder] | None = None,
    sampling: SamplingConfig | None = None,
) -> TurnDecisions:
    """The decisions the steps of ``config`` take, built once for the chain and its screening
    processes: ``decoders`` per topic (``format: mapped``), the redact step's redactor (when
    ``config.redaction`` redacts turns), the identifier tripwire, and ``sampling``'s rules and
    rates (the sampler's: ``Sampler.reason_for``; None when the chain's sampling gives no
    reasons)."""
    return TurnDecisions(
        config.max_bytes,
        decoders=decoders,
        redaction=JudgingRedaction.from_config(config.redaction),
        tripwire=identifier_tripwire if config.identifier_tripwire else None,
        sampling=sampling,
    )


def build_turn_steps(
    config: TurnStepsConfig,
    done: DoneStep,
    dlq: DeadLetterSink,
    store: VerdictStore,
    evaluator: Evaluator,
    metrics: TurnMetrics,
    sampling: SamplingPolicy,
    clock: Clock,
    *,
    after_store: AfterStore | None = None,
    decisions: TurnDecisions | None = None,
    unsampled: DoneStep | None = None,
) -> TurnSteps:
    """decode → [redact →] sample → look-up → judge → store → ``after_store`` (or ``done``).

    ``decisions`` (``turn_decisions(config)`` when None) are what decode, redact and sample
    decide by: the pipeline builds them once and gives them to its screening processes too.
    One redactor (``config.redaction``; none when off), the decisions' when they redact turns,
    serves the redact step, the stored turns, the dead-letter sink and ``after_store``'s free
    text. Every step that finishes a
    message early (dead-lettered, skipped, already judged) hands it to ``done``. With
    ``config.write_through`` the judge threads store each verdict as they make it
    (``StoreStep.write_now``); the store step writes the rest in batches. ``unsampled``: where
    the sample step finishes the turns it does not sample (``done`` when None; the pipeline's
    ``RetainingDone`` keeps them for feedback).
    """
    if decisions is None:
        decisions = turn_decisions(config)
    red = config.redaction
    redactor = decisions.redactor
    if redactor is None and red.enabled:  # no turn is redacted: dead letters, exported text
        redactor = Redactor(red.policy())
    if redactor is not None:
        metrics.prime_redactions(redactor.policy.kinds())
    writer: VerdictWriter = store
    if redactor is not None and red.stored_turns and not red.before_judging:
        writer = RedactingWriter(store, redactor, metrics)
    if redactor is not None and red.dead_letter:
        dlq = RedactingDeadLetterSink(dlq, redactor, metrics)
    next_after_store: DoneStep = done
    if after_store is not None:
        next_after_store = after_store(redactor.redact_loose if redactor is not None else _as_is)
    store_step = StoreStep(
        next_after_store,
        writer,
        metrics,
        clock,
        dlq=dlq,
    )
    judge = JudgeStep(
        store_step,
        evaluator,
        metrics,
        concurrency=config.concurrency,
        max_in_flight=config.max_in_flight,
        clock=clock,
        on_judged=store_step.write_now if config.write_through else None,
    )
    # A replayed turn costs a look-up, not a judge call.
    lookup = LookupStep(
        judge,
        done,
        store,
        evaluator.config_hash,
        metrics,
        max_in_flight=config.max_in_flight,
        clock=clock,
    )
    cascading = isinstance(sampling, Sampler) and sampling.cascade is not None
    sample = SampleStep(
        lookup,
        unsampled or done,
        sampling,
        metrics,
        tripwire=decisions.tripwire,
        # sampling.strategy: cascade: the cheap look at every turn, then the draw by its cell.
        cascade=(sampling, cheap_cell) if isinstance(sampling, Sampler) and cascading else None,
    )
    after_decode: ProcessingStep[TurnEvent] = sample
    if decisions.redactor is not None:
        after_decode = RedactStep(
            sample,
            done,
            decisions,
            metrics,
            dlq=dlq if config.dead_letter_unredactable else None,
        )
    first = DecodeStep(
        after_decode,
        done,
        dlq,
        metrics,
        config.max_bytes,
        flush_timeout_s=config.flush_timeout_s,
        clock=clock,
        decisions=decisions,
    )
    return TurnSteps(first, after_decode, sample, lookup, judge, store_step, dlq, decisions)


def _as_is(text: str) -> str:
    return text
