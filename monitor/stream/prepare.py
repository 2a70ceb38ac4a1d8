"""The daemon's configuration, checked whole before the first connection.

``prepare`` runs at the entrypoint, before the runner opens anything: before a Kafka consumer
joins its group (a member that joins and then exits on a bad key makes the group rebalance
twice) and before the store is migrated. It compiles what the pipeline compiles (sampling
rules, redaction patterns), resolves every secret the configuration will use (judge keys,
assistant tokens, the redaction key: read once, when the settings were built; asked for here),
and checks every judge the stream, the rubric job and the baseline job will call, and that
``storage.url`` names a database casewatch supports whose driver is installed (a PostgreSQL URL
in an environment without the ``postgres`` extra would otherwise fail after the consumer
joined its group, as an ImportError). It reads and parses the files the jobs are given (the
rubric set, the probe set, the judge canary's turns: ``jobs/inputs.py``) and hands them on, so
building the jobs reads no file. It builds the chain's ``TurnDecisions`` once for the process
(decoders, redaction, tripwire, sampling rules): the runner hands them to the pipeline, and
their redaction, with the job inputs, to the judge canary, which redacts its turns by it. A
problem is a ``ConfigError`` naming the setting; the command
exits 2 with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from monitor.config.settings import Settings
from monitor.errors import ConfigError
from monitor.jobs.assistant_client import check_endpoint
from monitor.jobs.inputs import JobInputs, read_job_inputs
from monitor.judging.rubric_grader import require_llm_judge
from monitor.runtime.clock import Clock
from monitor.sampling.sampler import Sampler
from monitor.storage.engine import url_problem
from monitor.stream.pipeline import PipelineConfig, chain_decisions
from monitor.stream.steps.decisions import TurnDecisions


def judges_in_use(settings: Settings) -> list[str]:
    """Every judge the daemon will call: the panel's, the rubric grader, the pairwise judge."""
    names = [name for name, _ in settings.effective_panel().roles()]
    if settings.rubric.enabled:
        names.append(settings.rubric.judge or settings.judge)
    if settings.baseline.enabled:
        names.append(settings.baseline.judge)
    return list(dict.fromkeys(names))


@dataclass(frozen=True)
class Prepared:
    """What ``prepare`` checked and built, for the runner to hand on."""

    sampler: Sampler  # its rules compiled; its hourly budget the stream and the jobs share
    job_inputs: JobInputs  # the jobs' files, parsed (``build_jobs(inputs=...)``)
    # The chain's decisions, the one set of the process: the pipeline's
    # (``stream_daemon(decisions=...)``) and, their redaction, the judge canary's.
    decisions: TurnDecisions


def prepare(settings: Settings, clock: Clock) -> Prepared:
    """Checks ``settings`` before any connection (ConfigError on the first problem; see the
    module): the sampler of the stream, the parsed files of the jobs and the chain's
    decisions."""
    problem = url_problem(settings.storage.url)
    if problem is not None:
        raise ConfigError(problem)
    for name in judges_in_use(settings):
        settings.judge_config(name).resolve_api_key()
    if settings.rubric.enabled:
        name = settings.rubric.judge or settings.judge
        require_llm_judge(name, settings.judge_config(name))
    if settings.baseline.enabled:
        for assistant in settings.baseline.assistants:
            if assistant.endpoint is not None:
                check_endpoint(assistant.endpoint)
    if settings.review.enabled:
        settings.review.token()  # the review queue's token is readable
    # The redaction policy compiles (its patterns, its key long enough), as do the mapping
    # and the sampling rules: built once, here, for the chain and the canary.
    decisions = chain_decisions(PipelineConfig.from_settings(settings))
    # The canary's file turns are redacted as they are read, by the chain's redaction.
    job_inputs = read_job_inputs(settings, decisions.redaction)
    return Prepared(stream_sampler(settings, clock), job_inputs, decisions)


def stream_sampler(settings: Settings, clock: Clock) -> Sampler:
    """The daemon's sampler: ``settings.sampling`` on ``clock`` (the daemon's own)."""
    # A panel spends one request per primary on every sampled turn (the arbiter's and any
    # retries are settled when the verdict is in).
    return Sampler(
        settings.sampling, clock, calls_per_turn=len(settings.effective_panel().primaries)
    )


__all__ = ["Prepared", "judges_in_use", "prepare", "stream_sampler"]
