"""The demo's summary line, read from a registry the real recorders filled."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from monitor.config.settings import load_settings
from monitor.demo.examples import load_examples
from monitor.demo.summary import Snapshot, format_summary
from monitor.judging.evaluator import build_evaluator
from monitor.metrics.exporter import Metrics
from monitor.schema.turn import TurnEvent
from monitor.stream.recorder import StreamRecorder

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "turns.jsonl"


def test_summary_reads_judged_bands_dead_letters_and_mean_score() -> None:
    registry = CollectorRegistry()
    metrics = StreamRecorder(Metrics(registry))
    evaluator = build_evaluator(load_settings(), concurrency=1)
    turns = [TurnEvent.model_validate(d) for d in load_examples(EXAMPLES)[:6]]
    verdicts = [evaluator.evaluate(t) for t in turns]
    for v in verdicts:
        metrics.record_verdict(v)
    metrics.record_consumed("support.turns", 7)
    metrics.record_dead_letter("not_json")
    snap = Snapshot.of(registry)
    assert snap.consumed == 7 and snap.judged == 6 and snap.dead_lettered == 1
    assert snap.judge_failed == 0
    by_assistant: dict[str, list[float]] = {}
    for v in verdicts:
        assert v.s_final is not None
        by_assistant.setdefault(v.assistant.name, []).append(v.s_final)
    assert snap.mean_s_final == pytest.approx({a: sum(s) / len(s) for a, s in by_assistant.items()})
    line = format_summary(snap, 12.0, 9)
    assert "produced 9 | consumed 7 | judged 6 (" in line
    assert "dead-lettered 1 | judge_failed 0" in line
