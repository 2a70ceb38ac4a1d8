"""What ``casewatch run`` says about itself: one line as it starts (what it reads, how much of it
it judges, where verdicts and dead letters go), a summary line every
``daemon.summary_interval_seconds`` and one as it ends (records read, turns sampled, judged,
skipped and dead-lettered, by reason; under the cascade the turns its cheap look saw and
drew), and a warning when it judged nothing because of the
sampling rate or the budget, naming the setting to change.

A run that judges nothing must not look like a run that had nothing to judge: the shipped
sampling rate judges a tenth of the conversations, so the three turns of a first try on one's
own file are most likely all skipped, and only a scrape of ``/metrics`` would say so.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from consumers.file_source import FILE_TOPIC
from monitor.config.sampling import SamplingConfig
from monitor.config.settings import Settings
from monitor.runtime.clock import Clock
from monitor.sampling.budget import OVER_REQUESTS, OVER_USD
from monitor.sampling.sampler import NOT_SAMPLED
from monitor.storage.engine import redact_url
from monitor.stream.file_state import STDIN, STDIN_DLQ, file_sidecars
from monitor.stream.recorder import RunTally

log = structlog.get_logger(__name__)

# The skip reasons a setting can change (the sampler's and the budget's own values).
NOT_SAMPLED_REASON = NOT_SAMPLED.reason


def source_text(settings: Settings, file_path: Path | None, follow: bool) -> str:
    """Where the run reads its turns, in words."""
    formats = settings.kafka.topic_formats
    if file_path is not None:
        fmt = formats.get(FILE_TOPIC, "casewatch")
        name = "standard input" if file_path == STDIN else f"file {file_path}"
        return f"{name} ({fmt}{', followed' if follow else ''})"
    topics = ", ".join(
        name if fmt == "casewatch" else f"{name} ({fmt})" for name, fmt in formats.items()
    )
    servers = ",".join(settings.kafka.bootstrap_servers)
    return f"Kafka {servers}, group {settings.kafka.group_id}, topics {topics}"


def dead_letters_text(settings: Settings, file_path: Path | None) -> str:
    """Where the run's dead letters go: the file kept with the store, or the topics."""
    if file_path == STDIN:
        return str(STDIN_DLQ.resolve())
    if file_path is not None:
        return str(file_sidecars(file_path, settings.storage.url)[0])
    suffix = settings.kafka.dlq_suffix
    return "topics " + ", ".join(f"{name}{suffix}" for name in settings.kafka.topic_formats)


def _number(value: float) -> str:
    """1000.0 as ``1000`` (not ``1e+03``), 0.25 as ``0.25``."""
    return str(int(value)) if value.is_integer() else f"{value:g}"


def rerun_text(settings: Settings, file_path: Path | None) -> str | None:
    """How to read a file again into the same store once its position is committed (a run on
    a whole file that judged nothing, run again with another rate, would read nothing)."""
    if file_path is None or file_path == STDIN:
        return None
    offsets = file_sidecars(file_path, settings.storage.url)[1]
    return f"the file's position is kept: delete {offsets} (or use another --db) to read it again"


def budget_text(sampling: SamplingConfig) -> str:
    limits = []
    if sampling.budget_calls_per_hour is not None:
        limits.append(f"{_number(sampling.budget_calls_per_hour)} judge calls/h")
    if sampling.budget_usd_per_hour is not None:
        limits.append(f"{_number(sampling.budget_usd_per_hour)} USD/h")
    return ", ".join(limits) if limits else "none"


def sampling_fields(sampling: SamplingConfig) -> dict[str, Any]:
    """How the run draws the turns it judges: the strategy, and its rates (uniform) or the
    cascade's floor, look share and target calls per hour (the uniform rates play no part
    under the cascade, so they are not printed then)."""
    if sampling.strategy == "cascade":
        return {
            "sampling_strategy": "cascade",
            "cascade_floor": sampling.cascade_floor,
            "cascade_look_share": sampling.cascade_look_share,
            "cascade_target_calls_per_hour": sampling.cascade_target(),
        }
    fields: dict[str, Any] = {
        "sampling_strategy": sampling.strategy,
        "sampling_rate": sampling.default_rate,
    }
    if sampling.rates:
        fields["sampling_rates"] = dict(sampling.rates)
    return fields


def start_fields(settings: Settings, *, source: str, dead_letters_to: str) -> dict[str, Any]:
    """The start line's fields: the database's password masked."""
    sampling = settings.sampling
    fields: dict[str, Any] = {"source": source, **sampling_fields(sampling)}
    if sampling.always_judge:
        fields["always_judge"] = [rule.name for rule in sampling.always_judge]
    fields["budget"] = budget_text(sampling)
    fields["database"] = redact_url(settings.storage.url)
    fields["dead_letters_to"] = dead_letters_to
    return fields


def nothing_judged(
    tally: RunTally, sampling: SamplingConfig | None, rerun: str | None = None
) -> str | None:
    """The warning for a run that read turns and judged none of them because of the sampling
    rate or the budget, naming the setting to change (and, with ``rerun``, how to read the
    same input again); None when it judged some (or skipped them for other reasons, which
    the summary's reasons name)."""
    if tally.judged or tally.judge_failed.total():
        return None
    parts = []
    skipped = tally.skipped
    if skipped[NOT_SAMPLED_REASON] and sampling is not None and sampling.strategy == "cascade":
        # Under the cascade the uniform rate plays no part: the draw follows the floor and the
        # target, and a conversation outside the look share is drawn only by a rule.
        target = sampling.cascade_target_calls_per_hour
        aim = "90 % of budget_calls_per_hour" if target is None else f"{_number(target)} calls/h"
        parts.append(
            f"{skipped[NOT_SAMPLED_REASON]} turn(s) not drawn by the cascade "
            f"(sampling.cascade_floor is {_number(sampling.cascade_floor)}, "
            f"sampling.cascade_look_share is {_number(sampling.cascade_look_share)}, target "
            f"{aim}): raise sampling.cascade_floor (at most cascade_look_share; both 1.0 "
            "draw every turn), or set sampling.strategy to uniform"
        )
    elif skipped[NOT_SAMPLED_REASON]:
        if sampling is None:
            rate = "sampling.default_rate"
        else:
            rate = f"sampling.default_rate is {_number(sampling.default_rate)}"
            if sampling.rates:
                per = ", ".join(f"{a} {_number(r)}" for a, r in sorted(sampling.rates.items()))
                rate += f", sampling.rates: {per}"
        parts.append(
            f"{skipped[NOT_SAMPLED_REASON]} turn(s) not sampled ({rate}): set "
            "sampling.default_rate to 1.0 to judge every conversation (in the settings file, or "
            "CASEWATCH_SAMPLING__DEFAULT_RATE=1.0)"
        )
    for reason, setting in (
        (OVER_REQUESTS, "budget_calls_per_hour"),
        (OVER_USD, "budget_usd_per_hour"),
    ):
        if skipped[reason]:
            value = None if sampling is None else getattr(sampling, setting)
            now = "" if value is None else f" is {_number(value)}"
            parts.append(
                f"{skipped[reason]} turn(s) over the hourly judge budget "
                f"(sampling.{setting}{now}): raise it, or set it to null for no limit"
            )
    if not parts:
        return None
    if rerun is not None:
        parts.append(rerun)
    return "nothing was judged: " + "; ".join(parts)


def _by_reason(counts: Counter[str]) -> dict[str, int]:
    return {reason: n for reason, n in counts.most_common() if n}


class RunSummary:
    """The daemon's summary lines, over its recorder's tally. ``tick`` on every turn of the
    loop (logs when the interval has passed), ``finish`` once as the run ends."""

    def __init__(
        self,
        tally: RunTally,
        clock: Clock,
        interval_s: float,
        *,
        sampling: SamplingConfig | None = None,
        dead_letters_to: str | None = None,
        rerun: str | None = None,
        in_progress: Callable[[], int] = lambda: 0,
    ) -> None:
        self._tally = tally
        self._clock = clock
        self._interval_s = interval_s
        self._sampling = sampling
        self._dead_letters_to = dead_letters_to
        self._rerun = rerun
        self._in_progress = in_progress
        self._next = clock.monotonic() + interval_s
        self._warned = False

    def fields(self) -> dict[str, Any]:
        t = self._tally
        fields: dict[str, Any] = {
            "read": t.read,
            "sampled": t.sampled,
            "judged": t.judged,
            "judge_failed": t.judge_failed.total(),
            "skipped": t.skipped.total(),
            "dead_lettered": t.dead_lettered.total(),
            "in_progress": self._in_progress(),
        }
        if self._sampling is not None and self._sampling.strategy == "cascade":
            fields["cheap_look_saw"] = t.looked
            fields["cascade_drew"] = t.drawn
        for name, counts in (
            ("judge_failed", t.judge_failed),
            ("skipped", t.skipped),
            ("dead_lettered", t.dead_lettered),
        ):
            if counts.total():
                fields[f"{name}_by_reason"] = _by_reason(counts)
        if self._dead_letters_to is not None:
            fields["dead_letters_to"] = self._dead_letters_to
        return fields

    def tick(self) -> None:
        now = self._clock.monotonic()
        if now < self._next:
            return
        self._next = now + self._interval_s
        log.info("run summary", **self.fields())
        if not self._warned:  # once while running; again at the end if it still holds
            warning = nothing_judged(self._tally, self._sampling, self._rerun)
            if warning is not None:
                self._warned = True
                log.warning(warning)

    def finish(self) -> None:
        log.info("run finished", **self.fields())
        warning = nothing_judged(self._tally, self._sampling, self._rerun)
        if warning is not None:
            log.warning(warning)


__all__ = [
    "RunSummary",
    "budget_text",
    "dead_letters_text",
    "nothing_judged",
    "rerun_text",
    "sampling_fields",
    "source_text",
    "start_fields",
]
