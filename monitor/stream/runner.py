"""The one place the streaming daemon is assembled: store, source and dead-letter sink (Kafka,
or a JSONL file), metrics, evaluator, judge watch, the scheduled jobs (``jobs/build.py``),
daemon and probe server.

``casewatch run`` runs it in the foreground (signals drain it); ``casewatch demo`` and the
benchmarks run it on a thread. Either way the pieces and their wiring are the same, so what a
demo or a benchmark shows is what production runs.

Every Kafka call and every step of closing has a limit (``stream/shutdown_budget.py``), so a
stop takes at most ``shutdown_budget_s(settings)`` whatever the brokers do.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import ExitStack, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

import structlog
from prometheus_client import CollectorRegistry

from monitor.config.settings import Settings
from monitor.errors import ListenError, OffsetsNotCommitted
from monitor.stream.file_state import STDIN, STDIN_DLQ, file_sidecars
from monitor.stream.shutdown_budget import (
    JOBS_STOP_S,
    KAFKA_CLOSE_TIMEOUT_S,
    broker_call_timeout_s,
    shutdown_budget_s,
)
from monitor.stream.signals import drain_signals

if TYPE_CHECKING:
    from consumers.dlq import DeadLetterSink
    from consumers.repartition import TraceRepublisher
    from consumers.source import TurnSource
    from monitor.jobs.scheduler import JobScheduler
    from monitor.judging.evaluator import Evaluator
    from monitor.metrics.exporter import Metrics
    from monitor.otel_export.sender import EvaluationSender
    from monitor.runtime.clock import Clock
    from monitor.sampling.sampler import Sampler
    from monitor.storage.store import Store
    from monitor.stream.daemon import Daemon
    from monitor.stream.http import Heartbeat
    from monitor.stream.pipeline import OutcomeIntake, Pipeline
    from monitor.stream.recorder import StreamRecorder
    from monitor.stream.reread import TurnReread
    from monitor.stream.steps.decisions import TurnDecisions

log = structlog.get_logger(__name__)


def _source_and_dlq(
    settings: Settings,
    file_path: Path | None,
    follow: bool,
    opened: Callable[[str, Callable[[], None]], None],
) -> tuple[TurnSource, DeadLetterSink]:
    from consumers.dlq import FileDeadLetterSink, KafkaDeadLetterQueue
    from consumers.file_source import FILE_TOPIC, FileTurnSource
    from consumers.kafka_source import KafkaTurnSource

    source: TurnSource
    dlq: DeadLetterSink
    # Binary protobuf holds newlines: an otlp_proto file carries one base64 message a line.
    base64_lines = settings.kafka.topic_formats.get(FILE_TOPIC) == "otlp_proto"
    if file_path == STDIN:
        # A pipe cannot be re-read: no offsets file; dead letters in the working directory.
        source = FileTurnSource(None, base64_lines=base64_lines)
        opened("source", source.close)
        dlq = FileDeadLetterSink(STDIN_DLQ)
    elif file_path is not None:
        dlq_path, offsets_path = file_sidecars(file_path, settings.storage.url)
        source = FileTurnSource(
            file_path, follow=follow, offsets_path=offsets_path, base64_lines=base64_lines
        )
        opened("source", source.close)
        note = source.resume_note()
        if note is not None:
            log.warning(note)
        dlq = FileDeadLetterSink(dlq_path)
    else:
        call_s = broker_call_timeout_s(settings)
        kafka_source = KafkaTurnSource(
            settings.kafka, commit_timeout_s=call_s, close_timeout_s=KAFKA_CLOSE_TIMEOUT_S
        )
        opened("source", kafka_source.close)
        kafka_source.start_join()
        source = kafka_source
        dlq = KafkaDeadLetterQueue(
            settings.kafka, send_timeout_s=call_s, close_timeout_s=KAFKA_CLOSE_TIMEOUT_S
        )
    opened("dead-letter sink", dlq.close)
    return source, dlq


def _outcome_intake(
    settings: Settings,
    store: Store,
    metrics: Metrics,
    recorder: StreamRecorder,
    clock: Clock,
    source: TurnSource,
) -> OutcomeIntake | None:
    """The outcome step's writer and recorder, when topics of kind outcomes are read; with
    ``outcomes.retain_unsampled``, where unsampled turns are kept (on a Kafka source, as their
    records' places: ``_reread`` reads them back)."""
    if not settings.kafka.outcome_topics and not settings.outcomes.retain_unsampled:
        return None
    from monitor.jobs.recorders import OutcomeRecorder
    from monitor.schema.outcome import OUTCOME_DLQ_REASONS
    from monitor.storage.outcomes import OutcomeRecords
    from monitor.stream.pipeline import OutcomeIntake
    from monitor.stream.steps.outcomes import UNSTORABLE

    outcome_recorder = OutcomeRecorder(metrics)
    outcome_recorder.prime()
    recorder.prime(dead_letter_reasons=(*OUTCOME_DLQ_REASONS, UNSTORABLE))
    records = OutcomeRecords(store, clock)
    if settings.outcomes.retain_unsampled:
        from monitor.stream.steps.keeper_process import KeeperProcess

        url = store.url if settings.outcomes.retain_process else None
        if url is not None and not KeeperProcess.usable(url):
            url = None  # an in-memory store has no second connection: kept on a thread
        from consumers.kafka_source import KafkaTurnSource
        from monitor.storage.retained_turns import RetainedTurns

        return OutcomeIntake(
            records,
            outcome_recorder,
            RetainedTurns(store, clock),
            outcome_recorder,
            url,
            retain_places=isinstance(source, KafkaTurnSource),
        )
    return OutcomeIntake(records, outcome_recorder)


def _reread(settings: Settings, source: TurnSource, decisions: TurnDecisions) -> TurnReread | None:
    """How the feedback judging job reads back turns kept as their Kafka record's place (with
    ``outcomes.retain_unsampled`` on a Kafka source): a consumer of no group, opened on its
    first read, and the pipeline's own decisions (``Prepared.decisions``)."""
    from consumers.kafka_source import KafkaTurnSource

    if not settings.outcomes.retain_unsampled or not isinstance(source, KafkaTurnSource):
        return None
    from consumers.record_reader import KafkaRecordReader
    from monitor.stream.reread import TurnReread

    return TurnReread(KafkaRecordReader(settings.kafka), decisions)


def stream_daemon(
    settings: Settings,
    source: TurnSource,
    dlq: DeadLetterSink,
    store: Store,
    evaluator: Evaluator,
    metrics: Metrics,
    sampler: Sampler,
    clock: Clock | None = None,
    *,
    heartbeat: Heartbeat | None = None,
    exit_when_idle: bool = False,
    dead_letters_to: str | None = None,
    rerun: str | None = None,
    decisions: TurnDecisions | None = None,
) -> Daemon:
    """The ``Daemon`` of ``settings`` over what the caller opened (and closes, after ``run``
    returned and ``Daemon.close``). Its recorder, offset tracker and clock are built here and
    shared by its loop and its pipeline; the pipeline and, with ``otel_export``, the evaluation
    sender are the daemon's to close. ``sampler`` runs on ``clock``
    (``prepare.stream_sampler``); ``dead_letters_to`` names where ``dlq`` writes and
    ``rerun`` how to read the input again, for the summary lines. ``decisions``: the chain's,
    built once by ``prepare`` (``Prepared.decisions``; None: built here from the settings, for
    a caller that ran no ``prepare``)."""
    from consumers.offsets import OffsetTracker
    from monitor.runtime.clock import SystemClock
    from monitor.stream.daemon import Daemon
    from monitor.stream.pipeline import PipelineConfig, build_pipeline, chain_decisions
    from monitor.stream.recorder import StreamRecorder

    clock = clock or SystemClock()
    config = PipelineConfig.from_settings(settings)
    if decisions is None:
        decisions = chain_decisions(config)
    recorder = StreamRecorder(metrics, draws=sampler.draws)
    tracker = OffsetTracker()
    # Verdicts written back as OTLP log records, when configured: the SDK's export thread
    # sends them, so the stream never waits on the endpoint.
    sender: EvaluationSender | None = None
    export = settings.otel_export
    if export is not None:
        # Imported here, not with the rest: opentelemetry's SDK and requests are ~6 MB
        # resident, which a daemon that sends nothing should not carry.
        from monitor.otel_export.sender import OUTCOMES, EvaluationSender

        sender = EvaluationSender(
            export.endpoint,
            recorder,
            headers=export.resolve_headers(),
            timeout_s=export.timeout_seconds,
            max_queue_size=export.max_queue_size,
            max_batch_size=export.max_batch_size,
            schedule_delay_ms=export.schedule_delay_ms,
        )
        recorder.prime_evaluation_export(OUTCOMES)
    pipeline: Pipeline | None = None
    republisher = None
    outcomes = _outcome_intake(settings, store, metrics, recorder, clock, source)
    try:
        republisher = _republisher(settings, source)
        pipeline = build_pipeline(
            config,
            source,
            dlq,
            store,
            evaluator,
            recorder,
            tracker,
            sampler,
            clock,
            evaluation_sender=sender,
            republisher=republisher,
            outcomes=outcomes,
            decisions=decisions,
        )
        return Daemon(
            settings.daemon,
            settings.kafka,
            source,
            store,
            pipeline,
            recorder,
            tracker,
            clock,
            evaluation_sender=sender,
            heartbeat=heartbeat,
            exit_when_idle=exit_when_idle,
            sampling=settings.sampling,
            dead_letters_to=dead_letters_to,
            rerun=rerun,
        )
    except BaseException:
        # Not the daemon's yet: closed here.
        if pipeline is not None:
            pipeline.close()  # closes the republisher too (the assemble step owns it)
        elif republisher is not None:
            republisher.close()
        if sender is not None:
            sender.close(0.0)
        raise


def _republisher(settings: Settings, source: TurnSource) -> TraceRepublisher | None:
    """The producer of the repartition topics, with ``assembly.repartition`` on Kafka (a file
    is one partition: its traces are whole where they are read)."""
    from consumers.kafka_source import KafkaTurnSource
    from consumers.repartition import TraceRepublisher

    if not settings.assembly.repartition_topics(dict(settings.kafka.topic_formats)):
        return None
    if not isinstance(source, KafkaTurnSource):
        return None
    call_s = broker_call_timeout_s(settings)
    return TraceRepublisher(
        settings.kafka, send_timeout_s=call_s, close_timeout_s=KAFKA_CLOSE_TIMEOUT_S
    )


class DaemonRunner:
    """The daemon of ``settings`` with its metrics in ``registry``; reads ``file_path`` (JSONL,
    appended to with ``follow``) instead of Kafka when given. ``exit_when_idle`` (default: a
    file without ``follow``) ends the run once the source is exhausted and all work finished.

    Building connects the source (a Kafka consumer starts joining its group at once, on a
    thread) and the dead-letter sink, then the store (and migrates it), and binds the probe
    port; anything failing closes what was opened and raises (``ListenError`` for the port,
    another ``CasewatchError`` for operator errors). Then either ``start()`` (a
    thread; ``stop()`` drains and closes) or ``run_foreground()`` (blocks; closes when done).
    Each resource registers its close on the runner's exit stack as it is opened (source,
    dead-letter sink, store, evaluator, judge watch, scheduled jobs, the daemon, the probe
    server): whatever fails, at building, starting or running, closes exactly what was
    opened, last first.
    """

    def __init__(
        self,
        settings: Settings,
        registry: CollectorRegistry,
        *,
        file_path: Path | None = None,
        follow: bool = False,
        exit_when_idle: bool | None = None,
    ) -> None:
        if follow and file_path is None:
            raise ValueError("follow needs a file_path")
        if exit_when_idle is None:
            exit_when_idle = file_path is not None and not follow
        self.registry = registry
        self.error: BaseException | None = None
        self._jobs: JobScheduler | None = None
        self._thread: threading.Thread | None = None
        self._stopped = False
        # What this runner opened, closed in reverse order once the daemon has stopped.
        self._opened = ExitStack()
        self._shutdown_budget_s = shutdown_budget_s(settings)
        # Everything that can be checked without I/O, before the group is joined or the
        # database migrated.
        from monitor.runtime.clock import SystemClock
        from monitor.stream.prepare import prepare
        from monitor.stream.run_summary import (
            dead_letters_text,
            rerun_text,
            source_text,
            start_fields,
        )

        prepared = prepare(settings, SystemClock())
        sampler = prepared.sampler
        read_from = source_text(settings, file_path, follow)
        dead_letters_to = dead_letters_text(settings, file_path)
        opened = self._open
        try:
            # The source first: a Kafka consumer joins its group on a thread while the rest is
            # imported and opened (the join round is mostly the broker's waiting).
            source, dlq = _source_and_dlq(settings, file_path, follow, opened)
            log.info("startup: source and dead-letter sink ready")
            from monitor.jobs.build import build_jobs
            from monitor.jobs.scheduler import JobScheduler
            from monitor.judging.evaluator import build_evaluator
            from monitor.judging.preflight import JudgeWatch, judges_to_probe
            from monitor.judging.recorder import JudgingRecorder
            from monitor.metrics.exporter import Metrics, disable_created_series
            from monitor.storage.store import Store
            from monitor.stream.http import ProbeApp, ProbeServer
            from monitor.stream.recorder import StreamRecorder

            store = Store.from_config(settings.storage)
            opened("store", store.close)
            store.migrate()
            log.info("startup: store ready")
            # Metrics first: a panel evaluator reports every outcome to them. The daemon is an
            # entrypoint: its registry serves no *_created series (see disable_created_series).
            disable_created_series()
            self.metrics = Metrics(registry)
            panel = JudgingRecorder(self.metrics)
            evaluator = build_evaluator(
                settings,
                concurrency=settings.daemon.concurrency,
                on_panel_result=panel.record_panel,
            )
            opened("evaluator", evaluator.close)
            # One request per judge endpoint, as `casewatch judge` does first; a judge that is
            # down is logged and reported on /readyz, but the daemon starts (it may come back).
            judges = JudgeWatch(judges_to_probe(settings))
            opened("judge watch", judges.close)
            judges.start()
            log.info("startup: judge ready")
            self.store = store
            # The cascade's draws: each drawn turn's row stores its probability and cell.
            store.draws = sampler.draws
            # One hourly budget for the stream and the jobs that call judges (rubric grading).
            jobs = JobScheduler(store, self.metrics)
            # Stops scheduling, closes every job added and releases their leases.
            opened("scheduled jobs", lambda: jobs.shutdown(JOBS_STOP_S))
            for job in build_jobs(
                settings,
                store,
                self.metrics,
                SystemClock(),
                inputs=prepared.job_inputs,
                budget=sampler.budget,
                lease_owner=jobs.owner,
                reread=_reread(settings, source, prepared.decisions),
            ):
                jobs.add(job)
            self._jobs = jobs
            self.daemon = stream_daemon(
                settings,
                source,
                dlq,
                store,
                evaluator,
                self.metrics,
                sampler,
                exit_when_idle=exit_when_idle,
                dead_letters_to=dead_letters_to,
                rerun=rerun_text(settings, file_path),
                decisions=prepared.decisions,
            )
            # Its pipeline and sender are closed as its run returns; this is for a run that
            # never starts (the port below taken).
            opened("daemon", self.daemon.close)
            daemon = self.daemon

            def details() -> dict[str, list[str]]:
                down = judges.down()
                return {**daemon.readiness_details(), **({"judges_down": down} if down else {})}

            app = ProbeApp(
                registry,
                self.daemon.heartbeat,
                {**self.daemon.checks(), "judges": lambda: not judges.down()},
                details,
                on_exposition_fallback=StreamRecorder(self.metrics).record_exposition_fallback,
            )
            host, port = settings.server.host, settings.server.port
            try:
                self.server = ProbeServer(app, host, port)
            except OSError as exc:
                raise ListenError(host, port, exc) from exc
            opened("probe server", self.server.close)
            # What this run reads, judges and writes where, before anything is read.
            log.info(
                "run starting",
                **start_fields(settings, source=read_from, dead_letters_to=dead_letters_to),
            )
        except BaseException:
            self._close_opened()
            raise

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def commit_error(self) -> OffsetsNotCommitted | None:
        """Set once the daemon stopped without committing its final offsets."""
        cause = self.daemon.final_commit_error
        return None if cause is None else OffsetsNotCommitted(cause)

    @property
    def alive(self) -> bool:
        """Whether the daemon thread of ``start()`` is still running."""
        return self._thread is not None and self._thread.is_alive()

    def _open(self, name: str, close: Callable[[], None]) -> None:
        """Register ``close`` as the resource just opened is: one failing close must not
        leak the others, so its failure is logged and the closing goes on."""

        def closing() -> None:
            try:
                close()
            except Exception:
                log.warning("closing failed", component=name, exc_info=True)

        self._opened.callback(closing)

    def _start_services(self) -> None:
        self.server.start()
        if self._jobs is not None:
            self._jobs.start()

    def _stop_services(self) -> None:
        """For a daemon thread that did not finish: what serves and schedules stops, what it
        still uses stays open (both closes are idempotent; the exit stack repeats them)."""
        if self._jobs is not None:
            self._jobs.shutdown(JOBS_STOP_S)
        self.server.close()

    def _close_opened(self) -> None:
        # Last opened, first closed: the source last, as its revocation commit (a Kafka
        # consumer leaving its group) goes through the stopped daemon's commit step.
        self._opened.close()

    def start(self) -> DaemonRunner:
        """Serve the probes and run the daemon on a thread; a failure lands in ``error``."""
        try:
            self._start_services()
            self._thread = threading.Thread(target=self._run, name="daemon", daemon=True)
            self._thread.start()
        except BaseException:
            self._stopped = True
            self._close_opened()
            raise
        return self

    def _run(self) -> None:
        try:
            self.daemon.run()
        except BaseException as exc:  # the owner reads ``error``; the thread itself just ends
            self.error = exc
            log.exception("the daemon stopped with an error")

    def run_foreground(self, install_signals: bool = True) -> None:
        """Serve the probes and run the daemon on this thread until it stops (SIGTERM/SIGINT
        with ``install_signals``, ``daemon.stop()``, or an exhausted file); then close all and
        put back the signal handlers it replaced. Raises ``OffsetsNotCommitted`` (after
        closing) when the final commit failed."""
        # The stop bound holds whatever a client library does (stream/watchdog.py).
        from monitor.stream.watchdog import StopWatchdog

        watchdog = StopWatchdog(self._shutdown_budget_s).start()

        def stop() -> None:
            watchdog.arm()
            self.daemon.stop()

        # Left only once all is closed: a signal while closing still stops, or ends, the process.
        with drain_signals(stop) if install_signals else nullcontext():
            try:
                self._start_services()
                if install_signals:
                    log.info("SIGTERM/SIGINT drain and stop; a second one stops at once")
                self.daemon.run()
            finally:
                self._stopped = True
                self._close_opened()
                watchdog.done()
        if (error := self.commit_error) is not None:
            raise error

    def stop(self, timeout_s: float) -> bool:
        """Drain, commit and close everything; False if the daemon thread did not finish."""
        if self._stopped:
            return True
        self._stopped = True
        self.daemon.stop()
        if self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout_s)
        finished = not self.alive
        if finished:
            self._close_opened()
        else:  # a thread still draining keeps its resources; the process exits anyway
            self._stop_services()
        return finished
