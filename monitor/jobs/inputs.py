"""The files the jobs are given by the settings, read and checked once, at the entrypoint: the
rubric set (``rubric.rubric_file``), the probe set (``baseline.probes``) and the judge canary's
turns (``judge_canary.file``).

``stream/prepare.py`` reads them before the daemon opens anything, so a missing or invalid file
ends ``casewatch run`` with exit 2 before the consumer joins its group or the store is migrated;
``build_jobs`` hands the parsed objects to the jobs, which read no file. The canary's turns are
redacted by the redaction the daemon's chain redacts by (``TurnDecisions.redaction``, built once
by ``prepare`` and handed here), which the canary job is handed on with the inputs. This module
stays light (no store, no metrics): it is imported before the consumer starts joining.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from monitor.config.baseline import BaselineConfig
from monitor.config.judge_canary import JudgeCanaryConfig
from monitor.config.rubric import RubricConfig
from monitor.config.settings import Settings
from monitor.errors import CanarySetError, ConfigError, RubricSetError
from monitor.judging.probes import Probe, load_probes
from monitor.judging.rubric_set import RubricSet, load_rubric_set
from monitor.reports.judge_canary import CanaryTurn, load_canary_file
from monitor.sampling.judging_redaction import TOO_LARGE, JudgingRedaction, Unredactable


@dataclass(frozen=True)
class JobInputs:
    """What the enabled jobs read from files; None where a job is off or reads no file (the
    canary without ``judge_canary.file`` takes the store's labelled turns)."""

    rubrics: RubricSet | None = None
    probes: tuple[Probe, ...] | None = None
    canary_turns: tuple[CanaryTurn, ...] | None = None
    # The redaction of the canary's turns, file and stored: the chain's
    # (``TurnDecisions.redaction``; None: no turn is redacted, the judges see raw turns).
    canary_redaction: JudgingRedaction | None = None


class _FromSettings:
    """``read_job_inputs``' default redaction: built from the settings, for a caller that builds
    no chain (a test, a benchmark); the daemon hands its chain's."""


FROM_SETTINGS = _FromSettings()


def read_job_inputs(
    settings: Settings, redaction: JudgingRedaction | _FromSettings | None = FROM_SETTINGS
) -> JobInputs:
    """The files of the enabled jobs, parsed; ConfigError naming the setting on the first that
    cannot be used. ``redaction``: the chain's (``TurnDecisions.redaction``, which ``prepare``
    builds once and hands here), by which the canary's turns are redacted; by default built
    from ``settings.redaction`` as the chain builds it (``JudgingRedaction.from_config``)."""
    if isinstance(redaction, _FromSettings):
        redaction = JudgingRedaction.from_config(settings.redaction)
    canary = settings.judge_canary
    return JobInputs(
        rubrics=rubric_set(settings.rubric) if settings.rubric.enabled else None,
        probes=probe_set(settings.baseline) if settings.baseline.enabled else None,
        canary_turns=(
            canary_file_turns(canary, redaction)
            if canary.enabled and canary.file is not None
            else None
        ),
        canary_redaction=redaction,
    )


def rubric_set(config: RubricConfig) -> RubricSet:
    if config.rubric_file is None:
        raise ConfigError("rubric.enabled needs rubric.rubric_file")
    try:
        return load_rubric_set(config.rubric_file)
    except RubricSetError as exc:
        raise ConfigError(f"rubric.rubric_file: {exc.detail}") from None


def probe_set(config: BaselineConfig) -> tuple[Probe, ...]:
    if config.probes is None:
        raise ConfigError("baseline.probes: the probe set file is required")
    try:
        return tuple(load_probes(config.probes))
    except ConfigError as exc:
        raise ConfigError(f"baseline.probes: {exc}") from None


def canary_file_turns(
    config: JudgeCanaryConfig, redaction: JudgingRedaction | None
) -> tuple[CanaryTurn, ...]:
    """The first ``max_turns`` turns of ``config.file`` as the judges may see them: redacted by
    ``redaction``, the chain's (None: not redacted), as live turns are for the judges. A turn
    that cannot be redacted refuses the file (its raw text must not reach a judge)."""
    if config.file is None:
        raise ConfigError("judge_canary.file is not set")
    try:
        turns = load_canary_file(config.file, min_turns=config.min_turns)
    except CanarySetError as exc:
        raise ConfigError(f"judge_canary.file: {exc.detail}") from None
    redacted, refused = redact_canary_turns(redaction, turns[: config.max_turns])
    if refused:
        raise ConfigError(f"judge_canary.file: {config.file}: {refused[0]}")
    return tuple(redacted)


def redact_canary_turns(
    redaction: JudgingRedaction | None, turns: Sequence[CanaryTurn]
) -> tuple[list[CanaryTurn], list[str]]:
    """The turns as the judges may see them (what the stream's redact step forwards), and why
    any other could not be redacted or would not be judged live (too large to redact)."""
    if redaction is None:
        return list(turns), []
    out, refused = [], []
    for turn in turns:
        outcome = redaction.redact(turn.event)
        if isinstance(outcome, Unredactable):
            event_id = turn.event.event_id
            if outcome.decision == TOO_LARGE:
                refused.append(f"event {event_id!r} is too large to redact ({outcome.detail})")
            else:
                refused.append(f"event {event_id!r}: {outcome.detail}")
            continue
        out.append(CanaryTurn(outcome.turn, turn.human))
    return out, refused


__all__ = [
    "FROM_SETTINGS",
    "JobInputs",
    "canary_file_turns",
    "probe_set",
    "read_job_inputs",
    "redact_canary_turns",
    "rubric_set",
]
