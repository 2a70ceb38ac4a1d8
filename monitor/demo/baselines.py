"""The demo's pinned detector baselines: each assistant's severe rates on the healthy replay.

A fresh demo database has no reference window, so the sequential detectors would not arm for a
week. The demo knows what it replays: before the daemon starts it judges one loop of the healthy
turns with the configured judges (only when every judge is the offline heuristic one: free,
deterministic, a second or two) and pins, per assistant and signal, the severe rate it found
(``detection.baselines``), as an operator pins a known-good rate. The detectors then arm on the
job's first run, and the regression the demo injects is what they page on.

The rate pinned is (severe + 1/2) / (turns + 1), as the job estimates a reference rate: never
zero. Pure but for the judging, which the caller passes in.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from monitor.config.settings import Settings
from monitor.schema.turn import Band, TurnEvent, Verdict
from monitor.stats.detection_signals import signals


def severe_rates(
    verdicts: Iterable[Verdict], critical_metrics: Iterable[str]
) -> dict[str, dict[str, float]]:
    """{assistant: {signal: rate}} over the judged (not failed) verdicts."""
    watched = signals(critical_metrics)
    turns: Counter[str] = Counter()
    severe: Counter[tuple[str, str]] = Counter()
    for v in verdicts:
        if v.status != "ok":
            continue
        assistant = v.assistant.name
        turns[assistant] += 1
        bad = frozenset(m for m, band in v.metric_bands.items() if band == Band.SEVERE)
        for s in watched:
            if s.severe(v.turn_band == Band.SEVERE, bad):
                severe[(assistant, s.name)] += 1
    return {
        a: {s.name: (severe[(a, s.name)] + 0.5) / (n + 1) for s in watched}
        for a, n in sorted(turns.items())
    }


def offline_judges(settings: Settings) -> bool:
    """Whether every judge the daemon would call is the heuristic one (so judging a loop of
    the examples up front costs nothing and predicts the daemon's verdicts exactly)."""
    panel = settings.effective_panel()
    names = [*panel.primaries, *([panel.arbiter] if panel.arbiter else [])]
    return all(settings.judge_config(n).kind == "heuristic" for n in names)


def pin_baselines(settings: Settings, docs: Iterable[Mapping[str, Any]]) -> Settings:
    """``settings`` with ``detection.baselines`` pinned from ``docs`` judged by its judges;
    unchanged when a judge is not offline or the configuration pins baselines already."""
    if not offline_judges(settings) or settings.detection.baselines:
        return settings
    from monitor.judging.evaluator import build_evaluator

    evaluator = build_evaluator(settings, concurrency=1)  # one turn at a time, below
    try:
        verdicts = [evaluator.evaluate(TurnEvent.model_validate(d)) for d in docs]
    finally:
        evaluator.close()
    rates = severe_rates(verdicts, settings.critical_metrics)
    detection = settings.detection.model_copy(update={"baselines": rates})
    return settings.model_copy(update={"detection": detection})
