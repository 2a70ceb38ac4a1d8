"""The judge canary's logic (pure; reads a file, nothing else): the canary set, one run's
figures, and the sequential test on the canary's severe calls.

A canary set is a small fixed list of turns with the bands people gave them. Re-judged on a
schedule by the live judge configuration, it answers "is it the assistant or the judge?": the
turns do not change, so any move in the judge's calls on them is the judge's. Per run and judge:

- agreement: the share of (turn, labelled key) pairs where the judge's band equals the human
  band (keys are metrics or ``turn_band``);
- mean score: the mean S_final over the canary turns; its shift is against the mean of the first
  ``baseline_runs`` successful runs of this judge configuration;
- severe calls: how many canary turns the judge's turn band calls severe. The run's count is one
  observation of a grid of CUSUMs over shifts of the severe rate
  (``monitor.stats.run_cusum.RunDetector``), armed with the severe rate of the baseline runs and
  calibrated for a false-alarm budget in days (``run_cusum.calibrate_runs``), so a judge that
  starts calling more turns severe is flagged within a bounded number of runs
  (bench/judge_trust.py canary). One observation per run, not one per call: a run's outcome
  then never depends on the order of the canary's turns (fed call by call, a file with its
  severe turns first raised the alarm and cleared it again within every run).

A run in which the judge failed on any canary turn is a failed run: it has no agreement, no
shift and feeds no detector (a failure is not an opinion about the turns).

File format (JSONL, one canary turn a line): ``{"turn": <turn event>, "labels": {key: band}}``,
the turn in the turn-event schema, ``labels`` naming metrics or ``turn_band`` with a band each.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from monitor.errors import CanarySetError
from monitor.reports.label_files import BANDS, LABEL_KEYS, TURN_BAND
from monitor.schema.turn import Band, Judgment, TurnEvent
from monitor.scoring.turn import metric_bands, s_final, turn_band
from monitor.stats.cusum_calibration import Calibration
from monitor.stats.run_cusum import RunDetector, calibrate_runs

DEFAULT_SHIFTS: tuple[float, ...] = (1.5, 2.0, 3.0)


@dataclass(frozen=True)
class CanaryTurn:
    event: TurnEvent
    human: Mapping[str, Band]  # metric or turn_band -> the band people gave


def parse_canary(text: str, source: str, *, min_turns: int) -> list[CanaryTurn]:
    """Every line a canary turn; the first bad line raises ``CanarySetError`` naming it."""
    out: list[CanaryTurn] = []
    seen: set[str] = set()
    last = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        last = number
        where = f"line {number}"
        try:
            doc = json.loads(raw)
        except ValueError as exc:
            raise CanarySetError(source, f"{where}: not JSON ({exc})") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("labels"), dict):
            raise CanarySetError(source, f"{where}: expected {{'turn': ..., 'labels': {{...}}}}")
        try:
            event = TurnEvent.model_validate(doc.get("turn"))
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or "turn"
            raise CanarySetError(source, f"{where}: turn.{field}: {first['msg']}") from None
        labels: dict[str, Band] = {}
        for key, band in doc["labels"].items():
            if key not in LABEL_KEYS:
                raise CanarySetError(
                    source, f"{where}: unknown metric {key!r}; known: {', '.join(LABEL_KEYS)}"
                )
            if band not in BANDS:
                raise CanarySetError(
                    source, f"{where}: {key}: band {band!r} is not one of {', '.join(BANDS)}"
                )
            labels[key] = Band(band)
        if not labels:
            raise CanarySetError(source, f"{where}: no label given")
        if event.event_id in seen:
            raise CanarySetError(source, f"{where}: event {event.event_id!r} appears twice")
        seen.add(event.event_id)
        out.append(CanaryTurn(event, labels))
    if len(out) < min_turns:
        raise CanarySetError(
            source,
            f"line {last}: the file ends after {len(out)} canary turn(s); the canary needs at "
            f"least {min_turns} (judge_canary.min_turns) for its test to mean anything",
        )
    return out


def load_canary_file(path: Path, *, min_turns: int) -> list[CanaryTurn]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CanarySetError(path, f"cannot read: {exc}") from None
    return parse_canary(text, str(path), min_turns=min_turns)


@dataclass(frozen=True)
class CanaryRun:
    """One judge's run over the canary set."""

    status: str  # ok | failed
    failure_reason: str | None
    turns: int
    agreement: float | None
    mean_score: float | None
    severe: tuple[bool, ...]

    @property
    def severe_calls(self) -> int:
        return sum(self.severe)


def score_run(
    turns: Sequence[CanaryTurn],
    judgments: Sequence[Judgment],
    *,
    weights: Mapping[str, float],
    critical: Sequence[str],
) -> CanaryRun:
    """The run's figures; a failure on any turn makes the whole run failed."""
    if len(turns) != len(judgments):
        raise ValueError("one judgment per canary turn")
    for j in judgments:
        if not j.ok:
            return CanaryRun("failed", j.failure_reason or "internal", len(turns), None, None, ())
    agree = pairs = 0
    finals: list[float] = []
    severe: list[bool] = []
    for turn, j in zip(turns, judgments, strict=True):
        if j.scores is None:  # cannot happen after the ok check above; keeps mypy honest
            raise ValueError("an ok judgment without scores")
        scores = j.scores.score_map()
        bands: dict[str, Band] = dict(metric_bands(scores))
        bands[TURN_BAND] = turn_band(scores, weights, critical)
        finals.append(s_final(scores, weights))
        severe.append(bands[TURN_BAND] is Band.SEVERE)
        for key, human in turn.human.items():
            pairs += 1
            agree += bands[key] is human
    return CanaryRun(
        "ok",
        None,
        len(turns),
        agree / pairs if pairs else None,
        math.fsum(finals) / len(finals) if finals else None,
        tuple(severe),
    )


@dataclass(frozen=True)
class Baseline:
    """The first successful runs of a judge configuration."""

    runs: int
    mean_score: float
    severe_calls: int
    observations: int

    @property
    def severe_rate(self) -> float:
        # Half a severe call added, as the assistant detectors do: a judge that called nothing
        # severe on its first runs still has a positive rate to test against.
        return (self.severe_calls + 0.5) / (self.observations + 1)


def baseline_of(runs: Sequence[CanaryRun]) -> Baseline | None:
    ok = [r for r in runs if r.status == "ok" and r.mean_score is not None]
    if not ok:
        return None
    return Baseline(
        len(ok),
        math.fsum(r.mean_score for r in ok if r.mean_score is not None) / len(ok),
        sum(r.severe_calls for r in ok),
        sum(len(r.severe) for r in ok),
    )


def arm(
    baseline: Baseline,
    shifts: Sequence[float],
    *,
    false_alarm_days: float,
    turns_per_run: int,
    interval_seconds: float,
    judges: int,
) -> Calibration:
    """Thresholds for a canary detector: one false alarm per ``false_alarm_days`` over every
    judge's canary (union bound), one observation (a run of ``turns_per_run``) per interval."""
    return calibrate_runs(
        baseline.severe_rate,
        tuple(shifts),
        turns=turns_per_run,
        false_alarm_days=false_alarm_days,
        interval_seconds=interval_seconds,
        detectors=max(1, judges) * len(shifts),
    )


def calibration_doc(cal: Calibration, turns_per_run: int) -> dict[str, Any]:
    return {
        "per": "run",
        "turns": turns_per_run,
        "p0": cal.p0,
        "rates": list(cal.rates),
        "thresholds": list(cal.thresholds),
    }


def calibration_from(doc: Mapping[str, Any] | None, turns_per_run: int) -> Calibration | None:
    """The stored calibration, if it was made for runs of this size (a per-call calibration
    stored before, or one for another number of turns, is made again)."""
    if not doc or doc.get("per") != "run" or doc.get("turns") != turns_per_run:
        return None
    return Calibration(float(doc["p0"]), tuple(doc["rates"]), tuple(doc["thresholds"]))


def observe(detector: RunDetector, cal: Calibration, run: CanaryRun, at: float) -> bool:
    """Feed one ok run's count of severe calls; True when this run raised the alarm."""
    return detector.update(run.severe_calls, run.turns, at, cal)
