"""The daemon's processing chain, wired: decode → redact → sample → look-up → judge → store →
commit.

``build_pipeline`` is the only place that knows the concrete steps and their order; the
daemon's loop sees a ``Pipeline``: submit, poll, join, close (``ProcessingStep``), the rebalance
calls (``Rebalancing``, forwarded to every step that holds turns, in chain order), and the few
questions the loop asks (is the database healthy, how many judge calls still run, commit now).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from consumers.dlq import DeadLetterSink
from consumers.offsets import OffsetTracker
from consumers.otel.assembly import TraceAssembler
from consumers.otel.genai import CaseAttributes
from consumers.otel.otlp import OtlpEncoding
from consumers.records import RawMessage, TopicPartition
from consumers.source import TurnSource
from monitor.clock import Clock
from monitor.errors import TransportError
from monitor.judging.evaluator import Evaluator
from monitor.judging.heuristic.tripwire import identifier_tripwire
from monitor.models import TurnEvent
from monitor.otel_export.sender import EvaluationSender
from monitor.redaction import Redactor
from monitor.sampling.sampler import Sampler
from monitor.settings import Settings
from monitor.storage.store import Store
from monitor.stream.recorder import StreamRecorder
from monitor.stream.steps.assemble import AssembleStep, TicketGate
from monitor.stream.steps.base import Envelope, JudgedTurn, ProcessingStep, VerdictWriter
from monitor.stream.steps.commit import CommitStep
from monitor.stream.steps.decode import DEFAULT_FLUSH_TIMEOUT_S, DecodeStep
from monitor.stream.steps.export import ExportStep
from monitor.stream.steps.judge import JudgeStep
from monitor.stream.steps.lookup import LookupStep
from monitor.stream.steps.rebalance import Rebalancing
from monitor.stream.steps.redact import RedactingDeadLetterSink, RedactingWriter, RedactStep
from monitor.stream.steps.sample import SampleStep
from monitor.stream.steps.screen import ScreenStep
from monitor.stream.steps.store import StoreStep
from monitor.turn_mapping import TurnMapping


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
    ) -> None:
        self._first = first
        self._rebalancing = tuple(rebalancing)
        self._lookup = lookup
        self._judge = judge
        self._store = store
        self._commit = commit

    # The step interface, forwarded to the head of the chain.
    def submit(self, message: Envelope[RawMessage]) -> None:
        self._first.submit(message)

    def poll(self) -> None:
        self._first.poll()

    def join(self, timeout: float | None) -> None:
        self._first.join(timeout)

    def close(self) -> None:
        self._first.close()

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
    def calls_running(self) -> int:
        return self._judge.calls_running

    def commit(self) -> bool:
        return self._commit.commit()

    def stop_periodic_commits(self) -> None:
        self._commit.stop_periodic()

    @property
    def final_commit_error(self) -> TransportError | None:
        return self._commit.final_error


def build_pipeline(
    settings: Settings,
    source: TurnSource,
    dlq: DeadLetterSink,
    store: Store,
    evaluator: Evaluator,
    metrics: StreamRecorder,
    tracker: OffsetTracker,
    sampler: Sampler,
    clock: Clock,
    evaluation_sender: EvaluationSender | None = None,
) -> Pipeline:
    cfg = settings.daemon
    commit = CommitStep(source, tracker, metrics, clock, cfg.commit_interval_seconds)
    formats = settings.kafka.topic_formats
    encodings: dict[str, OtlpEncoding] = {
        t: f for t, f in formats.items() if f == "otlp_proto" or f == "otlp_json"
    }
    # Turns assembled from OTLP spans finish through tickets (``steps/assemble.py``): every
    # step that finishes a message hands it to the gate, which passes the rest on to commit.
    done = TicketGate(commit) if encodings else commit
    # Redaction: one redactor for the step, the store and the dead-letter topic.
    red = settings.redaction
    redactor = Redactor(red.policy()) if red.enabled else None
    if redactor is not None:
        metrics.prime_redactions(redactor.policy.kinds())
    writer: VerdictWriter = store
    if redactor is not None and red.stored_turns and not red.before_judging:
        writer = RedactingWriter(store, redactor, metrics)
    if redactor is not None and red.dead_letter:
        dlq = RedactingDeadLetterSink(dlq, redactor, metrics)
    after_store: ProcessingStep[JudgedTurn] = done
    if evaluation_sender is not None:
        red_text = redactor.redact_loose if redactor is not None else (lambda text: text)
        after_store = ExportStep(done, evaluation_sender, red_text)
    # Write-through: each judge thread stores its verdict as soon as it is judged.
    store_step = StoreStep(after_store, writer, metrics, clock, dlq=dlq, write_through=True)
    judge = JudgeStep(
        store_step,
        evaluator,
        metrics,
        sampler.budget,
        concurrency=cfg.concurrency,
        max_in_flight=cfg.max_in_flight,
        clock=clock,
        reserved_per_turn=sampler.calls_per_turn,
        on_judged=store_step.write_now if store_step.write_through else None,
    )
    # A replayed turn costs a database read, not a judge call.
    lookup = LookupStep(
        judge,
        done,
        store,
        evaluator.config_hash,
        metrics,
        sampler.budget,
        max_in_flight=cfg.max_in_flight,
        clock=clock,
        reserved_per_turn=sampler.calls_per_turn,
    )
    sample = SampleStep(
        lookup,
        done,
        sampler,
        metrics,
        tripwire=identifier_tripwire if settings.sampling.identifier_tripwire else None,
    )
    after_decode: ProcessingStep[TurnEvent] = sample
    if redactor is not None and red.active:
        after_decode = RedactStep(
            sample, done, redactor, metrics, forward_redacted=red.before_judging
        )
    mapped = [t for t, f in formats.items() if f == "mapped"]
    decoders: dict[str, Callable[[bytes | None, int], TurnEvent]] = {}
    if mapped:
        mapping = TurnMapping.compile(settings.mapping)
        decoders = {t: mapping.decode for t in mapped}
    first: ProcessingStep[RawMessage] = DecodeStep(
        after_decode,
        done,
        dlq,
        metrics,
        settings.kafka.max_message_bytes,
        # A flush in progress when a stop comes must fit in the drain budget too.
        flush_timeout_s=min(DEFAULT_FLUSH_TIMEOUT_S, cfg.drain_timeout_seconds),
        clock=clock,
        decoders=decoders,
    )
    rebalancing: list[Rebalancing] = [lookup, judge]
    if cfg.screen_processes > 0:
        screen = ScreenStep(
            first,
            done,
            metrics,
            processes=cfg.screen_processes,
            max_bytes=settings.kafka.max_message_bytes,
            sampling=settings.sampling,
            redaction=red,
            clock=clock,
        )
        first = screen
        rebalancing.insert(0, screen)
    if encodings and isinstance(done, TicketGate):
        asm = settings.assembly
        assemble = AssembleStep(
            after_decode,
            first,
            done,
            dlq,
            metrics,
            TraceAssembler(
                idle_seconds=asm.idle_seconds,
                max_traces=asm.max_open_traces,
                max_spans=asm.max_open_spans,
                max_spans_per_trace=asm.max_spans_per_trace,
            ),
            encodings=encodings,
            max_bytes=settings.kafka.max_message_bytes,
            case_attributes=CaseAttributes(**{k: tuple(v) for k, v in asm.case_attributes.items()}),
            clock=clock,
            flush_timeout_s=min(DEFAULT_FLUSH_TIMEOUT_S, cfg.drain_timeout_seconds),
        )
        done.attach(assemble)
        first = assemble
        rebalancing.insert(0, assemble)
    return Pipeline(first, rebalancing, lookup=lookup, judge=judge, store=store_step, commit=commit)
