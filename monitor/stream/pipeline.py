"""The daemon's processing chain, wired: [assemble →] [screen →] decode → [redact →] sample →
look-up → judge → store → [export →] commit.

From decode to store the steps are ``turn_steps.build_turn_steps``'s, the chain ``casewatch
judge`` runs too; ``build_pipeline`` adds the daemon's intake steps, the export and the commit.
These two functions are the only places that know the concrete steps and their order. The
daemon's loop sees a ``Pipeline``: submit, poll, join, close (``ProcessingStep``), the
rebalance calls (``Rebalancing``, forwarded to every step that holds turns, in chain order),
and the few questions the loop asks (is the database healthy, how many judge calls still run,
how many turns a join would wait for, commit now). ``build_pipeline`` takes a typed
``PipelineConfig``, not the whole settings.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from consumers.dlq import DeadLetterSink
from consumers.offsets import OffsetTracker
from consumers.otel.assembly import TraceAssembler
from consumers.otel.genai import CaseAttributes
from consumers.otel.otlp import OtlpEncoding
from consumers.records import RawMessage, TopicPartition
from consumers.repartition import KnowsPartitions, TraceRepublisher
from consumers.source import TurnSource
from monitor.config.kafka import TopicFormat
from monitor.config.otel import AssemblyConfig
from monitor.config.sampling import SamplingConfig
from monitor.config.settings import Settings
from monitor.errors import TransportError
from monitor.judging.evaluator import Evaluator
from monitor.redaction import Redactor
from monitor.runtime.clock import Clock
from monitor.schema.mapping import TurnMapping
from monitor.schema.outcome import OutcomeMapping, decode_outcome
from monitor.stream.recorder import StreamRecorder
from monitor.stream.steps.assemble import AssembleStep
from monitor.stream.steps.base import DoneStep, Envelope, ProcessingStep
from monitor.stream.steps.commit import CommitStep
from monitor.stream.steps.decisions import Decoder, TurnDecisions
from monitor.stream.steps.decode import DEFAULT_FLUSH_TIMEOUT_S
from monitor.stream.steps.export import ExportStep
from monitor.stream.steps.judge import JudgeStep
from monitor.stream.steps.keeper_process import KeeperProcess
from monitor.stream.steps.lookup import LookupStep
from monitor.stream.steps.outcomes import (
    IntakeMetrics,
    OutcomeDecoder,
    OutcomeMetrics,
    OutcomeStep,
    OutcomeWriter,
)
from monitor.stream.steps.rebalance import Rebalancing
from monitor.stream.steps.retain import RetainingDone, RetainMetrics, RetainWriter
from monitor.stream.steps.screen import ScreenStep
from monitor.stream.steps.store import StoreStep
from monitor.stream.steps.ticket_gate import TicketGate
from monitor.stream.turn_steps import (
    AfterStore,
    SamplingPolicy,
    TurnStepsConfig,
    VerdictStore,
    build_turn_steps,
    turn_decisions,
)

if TYPE_CHECKING:
    # Only named here: the OTLP exporter it imports (~6 MB resident) is loaded by
    # monitor.stream.runner when otel_export is configured.
    from monitor.otel_export.sender import EvaluationSender


class Pipeline:
    """The wired steps behind one interface (see ``monitor.stream.steps.base``)."""

    def __init__(
        self,
        first: ProcessingStep[RawMessage],
        rebalancing: Sequence[Rebalancing],
        *,
        lookup: LookupStep,
        judge: JudgeStep,
        store: StoreStep,
        commit: CommitStep,
        screen: ScreenStep | None = None,
        report_budget: Callable[[], None] | None = None,
        closers: Sequence[Callable[[], None]] = (),
    ) -> None:
        """``closers``: what else the pipeline owns (the unsampled turns' writer), closed
        after the chain."""
        self._first = first
        self._closers = tuple(closers)
        # Sets the hourly judge budget's gauges, after each poll and once closed (what the
        # close gave back shows).
        self._report_budget = report_budget
        self._rebalancing = tuple(rebalancing)
        self._lookup = lookup
        self._judge = judge
        self._store = store
        self._commit = commit
        self._screen = screen

    # The step interface, forwarded to the head of the chain.
    def submit(self, message: Envelope[RawMessage]) -> None:
        self._first.submit(message)

    def poll(self) -> None:
        self._first.poll()
        if self._report_budget is not None:
            self._report_budget()

    def join(self, timeout: float | None) -> None:
        self._first.join(timeout)

    def close(self) -> None:
        self._first.close()
        for close in self._closers:
            close()
        if self._report_budget is not None:
            self._report_budget()

    # The rebalance protocol, forwarded to every step that holds turns (see ``rebalance.py``).
    def hold(self, tps: Collection[TopicPartition]) -> None:
        """Revoked: start no judge call for these partitions' turns until ``release``."""
        for step in self._rebalancing:
            step.hold(tps)

    def judging_in(self, tps: Collection[TopicPartition]) -> int:
        """Paid work under way for these partitions (finished for whoever stores the verdict)."""
        return sum(step.running_in(tps) for step in self._rebalancing)

    def release(self, owned: Collection[TopicPartition]) -> None:
        for step in self._rebalancing:
            step.release(owned)

    def discard(self, tps: Collection[TopicPartition]) -> None:
        for step in self._rebalancing:
            step.discard(tps)

    def wait_progress(self, timeout: float) -> bool:
        """Block until the first step with background work (screening batches, then judge
        calls) finishes some, or ``timeout``. False at once when nothing runs."""
        return any(step.wait_any(timeout) for step in self._rebalancing)

    # What the loop asks of it.
    @property
    def healthy(self) -> bool:
        """False while verdict writes (or look-ups of existing verdicts) fail (for /readyz)."""
        return self._store.healthy and self._lookup.healthy

    @property
    def unfinished(self) -> int:
        """Turns ``join`` would still wait for: being screened, waiting for or in the look-up,
        queued, judged or refused by the store, or buffered for it (those of a revoked partition
        included until the rebalance ends: released or dropped). Open OTLP traces are not:
        ``join`` leaves them open, to be read again."""
        screened = self._screen.in_flight if self._screen is not None else 0
        return screened + self._lookup.in_flight + self._judge.in_flight + self._store.buffered

    @property
    def calls_running(self) -> int:
        return self._judge.calls_running

    def commit(self) -> bool:
        return self._commit.commit()

    def stop_periodic_commits(self) -> None:
        self._commit.stop_periodic()

    @property
    def final_commit_error(self) -> TransportError | None:
        return self._commit.final_error


@dataclass(frozen=True)
class OutcomeIntake:
    """Where the outcome step stores outcome events and what it records of them, and, with
    ``retain``, where unsampled turns are kept for their feedback."""

    writer: OutcomeWriter
    metrics: OutcomeMetrics
    retain: RetainWriter | None = None
    retain_metrics: RetainMetrics | None = None
    # The store's URL, for unsampled turns kept from a process of their own
    # (``outcomes.retain_process``); None: kept on the daemon's writer thread.
    retain_url: str | None = None
    # The source's records can be read again (Kafka): a turn that came with its record's value
    # is kept as the record's place, read back when feedback asks for it.
    retain_places: bool = False


@dataclass(frozen=True)
class PipelineConfig:
    """The daemon's pipeline: the steps of one turn and what comes before and after them."""

    turn: TurnStepsConfig
    commit_interval_s: float
    screen_processes: int
    sampling: SamplingConfig  # the sampler's rules and rates, for the chain's decisions
    topic_formats: Mapping[str, TopicFormat] = field(default_factory=dict)
    mapping: Mapping[str, str] = field(default_factory=dict)
    assembly: AssemblyConfig = field(default_factory=AssemblyConfig)
    # Topics of kind outcomes, with their format (casewatch or mapped), read by the outcome step.
    outcome_topics: Mapping[str, TopicFormat] = field(default_factory=dict)
    outcome_mapping: Mapping[str, str] = field(default_factory=dict)
    outcome_max_buffered: int = 5000

    @classmethod
    def from_settings(cls, settings: Settings) -> PipelineConfig:
        cfg = settings.daemon
        turn = TurnStepsConfig(
            concurrency=cfg.concurrency,
            max_in_flight=cfg.max_in_flight,
            max_bytes=settings.kafka.max_message_bytes,
            flush_timeout_s=min(DEFAULT_FLUSH_TIMEOUT_S, cfg.drain_timeout_seconds),
            redaction=settings.redaction,
            identifier_tripwire=settings.sampling.identifier_tripwire,
        )
        return cls(
            turn=turn,
            commit_interval_s=cfg.commit_interval_seconds,
            screen_processes=cfg.screen_processes,
            sampling=settings.sampling,
            topic_formats=dict(settings.kafka.topic_formats),
            mapping=dict(settings.mapping),
            assembly=settings.assembly,
            outcome_topics=dict(settings.kafka.outcome_topics),
            outcome_mapping=dict(settings.outcomes.mapping),
            outcome_max_buffered=settings.outcomes.max_buffered,
        )


def outcome_decoders(
    topics: Mapping[str, TopicFormat], mapping: Mapping[str, str]
) -> dict[str, OutcomeDecoder]:
    """How each outcomes topic's records are read: casewatch's own outcome event, or the
    settings' ``outcomes.mapping`` for a topic of format mapped."""
    compiled = OutcomeMapping.compile(mapping) if "mapped" in topics.values() else None
    return {
        topic: compiled.decode if compiled is not None and fmt == "mapped" else decode_outcome
        for topic, fmt in topics.items()
    }


def outcome_step(
    next_step: ProcessingStep[RawMessage],
    done: DoneStep,
    dlq: DeadLetterSink,
    outcomes: OutcomeIntake,
    metrics: IntakeMetrics,
    decoders: Mapping[str, OutcomeDecoder],
    *,
    max_bytes: int,
    max_buffered: int,
    redactor: Redactor | None,
    clock: Clock | None = None,
) -> OutcomeStep:
    """The outcome step in front of ``next_step``: the daemon's (``build_pipeline``) and
    ``casewatch outcomes import``'s, which runs it over a file's lines."""
    return OutcomeStep(
        next_step,
        done,
        dlq,
        outcomes.writer,
        metrics,
        outcomes.metrics,
        decoders,
        max_bytes=max_bytes,
        max_buffered=max_buffered,
        redactor=redactor,
        clock=clock,
    )


def chain_decisions(config: PipelineConfig) -> TurnDecisions:
    """The decisions of the pipeline's turn steps (``TurnDecisions``): what its decode, redact
    and sample steps, its screening processes and the read-back of turns kept as their Kafka
    record's place (``stream/reread.py``) decide by."""
    mapped = [t for t, f in config.topic_formats.items() if f == "mapped"]
    decoders: dict[str, Decoder] = {}
    if mapped:
        mapping = TurnMapping.compile(config.mapping)
        decoders = {t: mapping.decode for t in mapped}
    return turn_decisions(config.turn, decoders=decoders, sampling=config.sampling)


def build_pipeline(
    config: PipelineConfig,
    source: TurnSource,
    dlq: DeadLetterSink,
    store: VerdictStore,
    evaluator: Evaluator,
    metrics: StreamRecorder,
    tracker: OffsetTracker,
    sampler: SamplingPolicy,
    clock: Clock,
    evaluation_sender: EvaluationSender | None = None,
    republisher: TraceRepublisher | None = None,
    outcomes: OutcomeIntake | None = None,
    *,
    decisions: TurnDecisions,
) -> Pipeline:
    """``outcomes``: where the records of ``config.outcome_topics`` go (required when there
    are such topics). ``decisions``: the chain's (``chain_decisions(config)``), built once for
    the process (``prepare``) and handed on by the runner, to the judge canary too."""
    commit = CommitStep(source, tracker, metrics, clock, config.commit_interval_s)
    formats = config.topic_formats
    encodings: dict[str, OtlpEncoding] = {
        t: f for t, f in formats.items() if f == "otlp_proto" or f == "otlp_json"
    }
    # Turns assembled from OTLP spans finish through tickets (``steps/assemble.py``): every
    # step that finishes a message hands it to the gate, which passes the rest on to commit.
    done = TicketGate(commit) if encodings else commit
    after_store: AfterStore | None = None
    if evaluation_sender is not None:
        after_store = partial(ExportStep, done, evaluation_sender)
    # One set: the decode, redact and sample steps and the screening processes decide by the
    # same decisions, so screening never changes an outcome, on any topic.
    unsampled: RetainingDone | None = None
    if outcomes is not None and outcomes.retain is not None and outcomes.retain_metrics:
        redactor = decisions.redactor
        # Kept redacted: unless the chain already redacts before judging, here.
        redact = None
        if redactor is not None and not config.turn.redaction.before_judging:
            redact = lambda turn: redactor.redact_turn(turn).turn  # noqa: E731
        keeper = None
        if outcomes.retain_url is not None:
            keeper = KeeperProcess(outcomes.retain_url, decisions, clock)
        unsampled = RetainingDone(
            done,
            outcomes.retain,
            outcomes.retain_metrics,
            redact=redact,
            keeper=keeper,
            places=outcomes.retain_places,
        )
    steps = build_turn_steps(
        config.turn,
        done,
        dlq,
        store,
        evaluator,
        metrics,
        sampler,
        clock,
        after_store=after_store,
        decisions=decisions,
        unsampled=unsampled,
    )
    first: ProcessingStep[RawMessage] = steps.first
    # The sample step holds at most one decision, kept for a record the loop may drop.
    rebalancing: list[Rebalancing] = [steps.sample, steps.lookup, steps.judge]
    screen: ScreenStep | None = None
    if config.screen_processes > 0:
        screen = ScreenStep(
            first,
            done,
            metrics,
            processes=config.screen_processes,
            decisions=decisions,
            clock=clock,
            keeper=unsampled,  # the turns it finishes are kept too
        )
        first = screen
        rebalancing.insert(0, screen)
    if encodings and isinstance(done, TicketGate):
        asm = config.assembly
        assemble = AssembleStep(
            steps.after_decode,
            first,
            done,
            steps.dlq,
            metrics,
            TraceAssembler(
                idle_seconds=asm.idle_seconds,
                max_traces=asm.max_open_traces,
                max_spans=asm.max_open_spans,
                max_spans_per_trace=asm.max_spans_per_trace,
                settle_seconds=asm.settle_seconds,
                remember_finished=asm.remember_finished_traces,
            ),
            encodings=encodings,
            max_bytes=config.turn.max_bytes,
            case_attributes=CaseAttributes(**{k: tuple(v) for k, v in asm.case_attributes.items()}),
            clock=clock,
            flush_timeout_s=config.turn.flush_timeout_s,
            repartition=asm.repartition_topics(dict(formats)),
            republisher=republisher,
            partitions=source if isinstance(source, KnowsPartitions) else None,
        )
        done.attach(assemble)
        first = assemble
        rebalancing.insert(0, assemble)
    if config.outcome_topics:
        if outcomes is None:
            raise ValueError("outcomes topics need an outcome writer (build_pipeline outcomes=)")
        first = outcome_step(
            first,
            done,
            steps.dlq,
            outcomes,
            metrics,
            outcome_decoders(config.outcome_topics, config.outcome_mapping),
            max_bytes=config.turn.max_bytes,
            max_buffered=config.outcome_max_buffered,
            redactor=decisions.redactor,
            clock=clock,
        )
    return Pipeline(
        first,
        rebalancing,
        lookup=steps.lookup,
        judge=steps.judge,
        store=steps.store,
        commit=commit,
        screen=screen,
        report_budget=lambda: metrics.set_judge_budget(sampler.budget.state()),
        closers=[unsampled.close] if unsampled is not None else [],
    )
