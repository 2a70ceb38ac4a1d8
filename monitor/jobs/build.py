"""The daemon's scheduled jobs, built from the settings (each feature adds its block here).

Each job's ``close`` is registered as it is built: a job failing to build closes the ones built
before it (and a canary failing to build, the judges it was given)."""

from __future__ import annotations

from contextlib import ExitStack
from typing import TYPE_CHECKING, TypeVar

from monitor.config.settings import Settings
from monitor.jobs.drift import DriftJob
from monitor.jobs.inputs import JobInputs
from monitor.jobs.retention import RetentionJob
from monitor.jobs.rubric import RubricJob
from monitor.jobs.scheduler import Job
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import Clock
from monitor.sampling.budget import Budget
from monitor.sampling.judging_redaction import JudgingRedaction
from monitor.sampling.sampler import Sampler
from monitor.storage.store import Store

if TYPE_CHECKING:
    from monitor.jobs.feedback_judging import Reread

T = TypeVar("T")


def build_jobs(
    settings: Settings,
    store: Store,
    metrics: Metrics,
    clock: Clock,
    *,
    inputs: JobInputs,
    budget: Budget | None = None,
    lease_owner: str | None = None,
    reread: Reread | None = None,
) -> list[Job]:
    """``inputs``: the files the jobs are given, read at the entrypoint
    (``read_job_inputs(settings)``, which ``stream/prepare.py`` calls): building reads no file.
    ``budget``: the daemon's hourly judge budget (its sampler's), which jobs calling a judge
    charge; without one they get their own buckets from ``settings.sampling``.
    ``lease_owner``: the scheduler's owner id, on which jobs that save state fence their saves.
    ``reread``: how the feedback judging job reads back turns kept as their Kafka record's
    place (a Kafka source; the job closes it). The jobs returned are the caller's to close; if
    building one fails, those built are closed here before the error propagates."""
    with ExitStack() as built:
        if reread is not None:
            built.callback(reread.close)  # until the job that closes it is built
        jobs = _build_jobs(
            settings, inputs, store, metrics, clock, budget, lease_owner, built, reread
        )
        built.pop_all()  # built whole: the caller closes them now
    return jobs


class _Jobs(list[Job]):
    """The jobs built so far, each registered on ``built`` to be closed if a later one fails."""

    def __init__(self, built: ExitStack) -> None:
        super().__init__()
        self._built = built

    def append(self, job: Job) -> None:
        self._built.callback(job.close)
        super().append(job)


def _build_jobs(
    settings: Settings,
    inputs: JobInputs,
    store: Store,
    metrics: Metrics,
    clock: Clock,
    budget: Budget | None,
    lease_owner: str | None,
    built: ExitStack,
    reread: Reread | None = None,
) -> list[Job]:
    jobs = _Jobs(built)
    storage = settings.storage
    if storage.retention_days is not None:
        jobs.append(
            RetentionJob(
                store,
                storage.retention_days,
                clock=clock,
                interval_seconds=storage.retention_interval_seconds,
            )
        )
    rubric = settings.rubric
    if rubric.enabled:
        judge_name = rubric.judge or settings.judge
        jobs.append(
            RubricJob(
                rubric,
                judge_name,
                settings.judge_config(judge_name),
                store,
                metrics,
                budget or Sampler(settings.sampling, clock).budget,
                rubrics=_read(inputs.rubrics, "rubric.rubric_file"),
                clock=clock,
            )
        )
    if settings.drift.enabled:
        jobs.append(
            DriftJob(
                settings.drift,
                store,
                metrics,
                clock=clock,
                retention_days=storage.retention_days,
            )
        )
    if settings.failure_modes.enabled:  # Failed turns grouped into recurring causes
        from monitor.jobs.failure_modes import FailureModesJob

        jobs.append(
            FailureModesJob(
                settings.failure_modes,
                store,
                metrics,
                clock=clock,
                lease_owner=lease_owner,
                retention_days=storage.retention_days,
            )
        )
    if settings.quality_estimate.enabled:  # The label-corrected severe rate
        from monitor.jobs.quality_estimate import QualityEstimateJob

        jobs.append(QualityEstimateJob(settings.quality_estimate, store, metrics, clock=clock))
    if settings.judge_canary.enabled:
        jobs.append(_judge_canary(settings, inputs, store, metrics, clock, budget, lease_owner))
    if settings.detection.enabled:  # Sequential detection of quality regressions
        from monitor.jobs.detection import DetectionJob
        from monitor.jobs.recorders import DetectionRecorder

        jobs.append(
            DetectionJob(
                settings.detection,
                list(settings.critical_metrics),
                store,
                DetectionRecorder(metrics),
                clock=clock,
                lease_owner=lease_owner,
                cascade=settings.sampling.strategy == "cascade",
                failure_modes=settings.failure_modes.enabled,
            )
        )
    outcomes = settings.outcomes
    if settings.kafka.outcome_topics or outcomes.retain_unsampled:  # what customers said
        from monitor.jobs.outcome_join import OutcomeJoinJob
        from monitor.jobs.recorders import OutcomeRecorder
        from monitor.storage.outcomes import OutcomeRecords

        records = OutcomeRecords(store, clock)
        jobs.append(OutcomeJoinJob(outcomes, records, OutcomeRecorder(metrics)))
        if outcomes.retain_unsampled:
            from monitor.jobs.feedback_judging import FeedbackJudgingJob
            from monitor.judging.evaluator import build_evaluator
            from monitor.judging.recorder import JudgingRecorder
            from monitor.storage.retained_turns import RetainedTurns

            jobs.append(
                FeedbackJudgingJob(
                    outcomes,
                    store,
                    records,
                    RetainedTurns(store, clock),
                    build_evaluator(settings, concurrency=1),
                    budget or Sampler(settings.sampling, clock).budget,
                    OutcomeRecorder(metrics),
                    JudgingRecorder(metrics),
                    calls_per_turn=len(settings.effective_panel().primaries),
                    reread=reread,
                )
            )
    if settings.cases.enabled:  # Conversations judged as a whole when they go quiet
        jobs.append(_cases(settings, store, metrics, clock, budget, lease_owner))
    if settings.cases.enabled and settings.quality_estimate.enabled:  # case labels' estimates
        from monitor.jobs.case_estimate import CaseQualityEstimateJob

        jobs.append(CaseQualityEstimateJob(settings.quality_estimate, store, metrics))
    if settings.cases.enabled and settings.detection.enabled:  # detectors on case signals
        from monitor.jobs.case_detection import CaseDetectionJob
        from monitor.jobs.recorders import DetectionRecorder

        jobs.append(
            CaseDetectionJob(
                settings.detection,
                store,
                DetectionRecorder(metrics),
                clock=clock,
                lease_owner=lease_owner,
            )
        )
    if settings.detection.enabled:  # detectors on what users said (outcomes in the store)
        from monitor.jobs.outcome_detection import OutcomeDetectionJob
        from monitor.jobs.recorders import DetectionRecorder

        jobs.append(
            OutcomeDetectionJob(
                settings.detection,
                store,
                DetectionRecorder(metrics),
                clock=clock,
                lease_owner=lease_owner,
            )
        )
    if settings.baseline.enabled:
        from monitor.jobs.baseline_tiers import build_baseline_job

        jobs.append(
            build_baseline_job(
                settings.baseline,
                _read(inputs.probes, "baseline.probes"),
                settings.judge_config(settings.baseline.judge),
                store,
                metrics,
                clock,
                budget or Sampler(settings.sampling, clock).budget,
            )
        )
    if settings.review.enabled:  # The review queue on the annotation server
        jobs.append(_review_queue(settings, store, metrics, clock, jobs))
    return jobs


def _review_queue(
    settings: Settings, store: Store, metrics: Metrics, clock: Clock, jobs: list[Job]
) -> Job:
    """The review queue; after a pull that stored labels it refreshes the estimates through the
    quality estimate job built above (when it is on)."""
    from monitor.annotation.label_studio import LabelStudioClient
    from monitor.jobs.quality_estimate import QualityEstimateJob
    from monitor.jobs.review_queue import ReviewQueueJob

    review = settings.review
    estimates = next((j for j in jobs if isinstance(j, QualityEstimateJob)), None)
    client = LabelStudioClient(review.url, review.token(), timeout_s=review.timeout_seconds)
    return ReviewQueueJob(
        review,
        store,
        metrics,
        client,
        weights=settings.weights(),
        critical=settings.critical_metrics,
        refresh=None if estimates is None else estimates.run_once,
        clock=clock,
    )


def _read(parsed: T | None, setting: str) -> T:
    if parsed is None:  # a caller's mistake, not the operator's
        raise ValueError(f"build_jobs: {setting} was not read (pass read_job_inputs(settings))")
    return parsed


def _canary_redaction(settings: Settings, inputs: JobInputs) -> JudgingRedaction | None:
    """The chain's redaction, read with the inputs (``JobInputs.canary_redaction``): never
    built again here, and never missing when the settings redact turns."""
    if settings.judge_canary.file is not None:  # the turns are read with it
        _read(inputs.canary_turns, "judge_canary.file (canary_file_turns)")
    if settings.redaction.active:
        return _read(inputs.canary_redaction, "the chain's redaction (canary_redaction)")
    return inputs.canary_redaction


def _judge_canary(
    settings: Settings,
    inputs: JobInputs,
    store: Store,
    metrics: Metrics,
    clock: Clock,
    budget: Budget | None,
    lease_owner: str | None,
) -> Job:
    """The canary re-judged by every judge of the live configuration (primaries, arbiter)."""
    from monitor.jobs.judge_canary import CanaryJudge, JudgeCanaryJob
    from monitor.jobs.recorders import JudgeCanaryRecorder
    from monitor.judging.config_hash import judge_config_hash, single_judge_hash
    from monitor.judging.factory import build_judge

    # The job closes its judges; until it is built, they are closed here if building fails.
    with ExitStack() as built:
        judges = []
        for name, role in settings.effective_panel().roles():
            judge = build_judge(name, settings.judge_config(name), role)
            built.callback(judge.close)
            judges.append(CanaryJudge(name, single_judge_hash(settings, name), judge))
        job = JudgeCanaryJob(
            settings.judge_canary,
            judges,
            store,
            JudgeCanaryRecorder(metrics),
            budget or Sampler(settings.sampling, clock).budget,
            weights=settings.weights(),
            critical=settings.critical_metrics,
            live_config_hash=judge_config_hash(settings),
            redaction=_canary_redaction(settings, inputs),
            file_turns=inputs.canary_turns,
            clock=clock,
            lease_owner=lease_owner,
        )
        built.pop_all()
    return job


def _cases(
    settings: Settings,
    store: Store,
    metrics: Metrics,
    clock: Clock,
    budget: Budget | None,
    lease_owner: str | None,
) -> Job:
    """The case job, judging with the case judges of the live panel's judges."""
    from monitor.jobs.cases import CaseJob
    from monitor.jobs.recorders import CaseRecorder
    from monitor.judging.case_panel import (
        CasePanel,
        NamedJudge,
        build_case_judge,
        case_config_hash,
    )

    cfg = settings.cases
    panel_cfg = settings.effective_panel()
    named = [
        NamedJudge(name, settings.judge_config(name), role) for name, role in panel_cfg.roles()
    ]
    with ExitStack() as built:
        judges = []
        for judge in named:
            case_judge = build_case_judge(judge, max_prompt_chars=cfg.max_prompt_chars)
            built.callback(case_judge.close)
            judges.append(case_judge)
        arbiter = judges[-1] if panel_cfg.arbiter else None
        primaries = judges[:-1] if arbiter is not None else judges
        job = CaseJob(
            cfg,
            CasePanel(primaries, arbiter),
            case_config_hash(named, cfg.max_prompt_chars),
            store,
            CaseRecorder(metrics),
            budget or Sampler(settings.sampling, clock).budget,
            clock=clock,
            lease_owner=lease_owner,
        )
        built.pop_all()
    return job
