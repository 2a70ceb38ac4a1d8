"""Screening under ``sampling.strategy: cascade`` (a real forkserver screening process): the
process takes the cheap look (the cell and the tripwire's result) and hands it on with the
record; the sample step draws with it against the live probabilities. Every turn of examples/
(the cheap-cell corpus: 376 turns) decides and counts exactly as without screening: the same
cells, the same draws and probabilities, the same rules, tripwire hits, budget refusals and
counters, while the consumer's process computes no cell at all."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from consumers.dlq import FileDeadLetterSink
from consumers.records import RawMessage
from monitor.config.sampling import AlwaysJudgeRule, SamplingConfig
from monitor.errors import MessageRejected
from monitor.metrics.exporter import Metrics
from monitor.redaction.config import RedactionConfig
from monitor.runtime.clock import ManualClock
from monitor.sampling.sampler import SampleDecision, Sampler
from monitor.schema.turn import TurnEvent
from monitor.stream.recorder import StreamRecorder
from monitor.stream.steps.base import Envelope, Look, ProcessingStep
from monitor.stream.steps.decisions import TurnDecisions, cheap_cell
from monitor.stream.steps.decode import DecodeStep
from monitor.stream.steps.redact import RedactStep
from monitor.stream.steps.sample import SampleStep
from monitor.stream.steps.screen import ScreenStep
from tests.monitor.stream.steps.helpers import TP, Recorder, chain_decisions, env, raw
from tests.support.waiting import DEADLINE_S

ROOT = Path(__file__).resolve().parents[4]
EXPECTED: dict[str, dict[str, Any]] = json.loads(
    Path(__file__).with_name("cheap_cells_expected.json").read_text()
)
MAX_BYTES = 1 << 20
NEGATIVE = AlwaysJudgeRule(name="negative", field="feedback", equals="negative")
# Pairs of the LLM judge per cell (judged, called severe): the cells' probabilities differ.
PAIRS = {"severe": (30, 27), "moderate": (40, 8), "minor": (40, 2), "none": (80, 1)}


def _example_values() -> list[tuple[str, bytes]]:
    """(corpus key, the turn as its record's value) for every turn of the cheap-cell corpus,
    in file order."""
    values: list[tuple[str, bytes]] = []
    for key in EXPECTED:
        name, _, index = key.partition(":")
        record = json.loads((ROOT / "examples" / name).read_text().splitlines()[int(index)])
        turn = TurnEvent.model_validate(record.get("turn", record))  # judge_canary's wrapping
        values.append((key, turn.model_dump_json().encode()))
    return values


class DrawLog(Sampler):
    """The daemon's sampler, noting each cascade decision it makes (turn, cell, decision)."""

    def __init__(self, config: SamplingConfig, clock: ManualClock) -> None:
        super().__init__(config, clock)
        self.decided: list[tuple[str, str, str | None, SampleDecision]] = []

    def decide_cascade(
        self, turn: TurnEvent, cell: str, *, rule: str | None = None
    ) -> SampleDecision:
        decision = super().decide_cascade(turn, cell, rule=rule)
        self.decided.append((turn.event_id, cell, rule, decision))
        return decision


class Counting:
    """Passes records on, counting them: how many reach the consumer's own decode step."""

    def __init__(self, next_step: ProcessingStep[RawMessage]) -> None:
        self.next = next_step
        self.records = 0

    def submit(self, message: Envelope[RawMessage]) -> None:
        self.next.submit(message)
        self.records += 1

    def poll(self) -> None:
        self.next.poll()

    def join(self, timeout: float | None = None) -> None:
        self.next.join(timeout)

    def close(self) -> None:
        self.next.close()


def _sampling(look_share: float) -> SamplingConfig:
    return SamplingConfig(
        strategy="cascade",
        always_judge=[NEGATIVE],
        cascade_target_calls_per_hour=3000.0,  # some of every cell drawn, not all
        cascade_floor=0.01,
        cascade_look_share=look_share,
        budget_calls_per_hour=130.0,  # the last draws are refused by the budget
        budget_usd_per_hour=None,
    )


@pytest.fixture
def screens() -> Iterator[list[ScreenStep]]:
    made: list[ScreenStep] = []
    yield made
    for step in made:
        step.close()


def _run(
    values: list[tuple[str, bytes]],
    decisions: TurnDecisions,
    sink: FileDeadLetterSink,
    *,
    screen: list[ScreenStep] | None,
) -> dict[str, Any]:
    """The examples through [screen →] decode → [redact →] sample, on a clock that stands
    still (the probabilities move only with the traffic, the same in both runs)."""
    assert decisions.sampling is not None
    registry = CollectorRegistry()
    metrics = StreamRecorder(Metrics(registry))
    sampler = DrawLog(decisions.sampling, ManualClock())
    assert sampler.cascade is not None
    for cell, (judged, severe) in PAIRS.items():
        for k in range(judged):
            sampler.cascade.observe(cell, k < severe)
    looked_here: list[str] = []

    def look(turn: TurnEvent) -> str:
        looked_here.append(turn.event_id)
        return cheap_cell(turn)

    nxt, done = Recorder(), Recorder()
    sample = SampleStep(
        nxt, done, sampler, metrics, tripwire=decisions.tripwire, cascade=(sampler, look)
    )
    after_decode: ProcessingStep[TurnEvent] = sample
    if decisions.redaction is not None:
        after_decode = RedactStep(sample, done, decisions, metrics)
    decode = Counting(DecodeStep(after_decode, done, sink, metrics, MAX_BYTES, decisions=decisions))
    first: ProcessingStep[RawMessage] = decode
    step: ScreenStep | None = None
    if screen is not None:
        step = ScreenStep(decode, done, metrics, processes=1, decisions=decisions)
        screen.append(step)
        first = step
    deadline = time.monotonic() + DEADLINE_S
    for offset, (_, value) in enumerate(values):
        while True:
            try:
                first.submit(env(raw(value, offset=offset), offset=offset))
                break
            except MessageRejected:  # as the daemon does: poll, offer again
                assert time.monotonic() < deadline, "the chain never took the record"
                first.poll()
                time.sleep(0.01)
    first.join(DEADLINE_S)
    assert step is None or (step.in_flight == 0 and step.fallbacks == 0)
    assert len(nxt.items) + len(done.items) == len(values)  # every record decided once
    counters = {
        (metric.name, tuple(sorted(s.labels.items()))): s.value
        for metric in registry.collect()
        if metric.name.startswith("casewatch_")
        for s in metric.samples
        if s.name.endswith("_total") and s.value
    }
    return {
        "drawn": [(m.offset, m.payload.event_id, m.payload.answer) for m in nxt.items],
        "finished": sorted(m.offset for m in done.items),
        "decided": [
            (eid, cell, rule, d.sampled, d.reason, d.inclusion, d.cell)
            for eid, cell, rule, d in sampler.decided
        ],
        "ledger": [sampler.draws.of(eid) for eid, *_ in sampler.decided if sampler.draws],
        "counters": counters,
        "looked_here": looked_here,
        "decoded_here": decode.records,
    }


@pytest.mark.parametrize(
    ("look_share", "redaction"),
    [
        (1.0, RedactionConfig()),
        (0.5, RedactionConfig()),
        (0.5, RedactionConfig(enabled=False)),
    ],
    ids=["every-turn-redacted", "half-the-conversations-redacted", "half-unredacted"],
)
def test_screening_takes_the_cheap_look_and_decides_nothing_otherwise(
    look_share: float,
    redaction: RedactionConfig,
    sink: FileDeadLetterSink,
    screens: list[ScreenStep],
) -> None:
    values = _example_values()
    decisions = chain_decisions(_sampling(look_share), redaction, max_bytes=MAX_BYTES)
    assert decisions.tripwire is not None and decisions.cascading
    inline = _run(values, decisions, sink, screen=None)
    screened = _run(values, decisions, sink, screen=screens)

    # The consumer's process looked at every looked-at turn itself without screening, and at
    # none with it: each came with its cell.
    assert screened.pop("looked_here") == []
    looked = inline.pop("looked_here")
    assert looked == [eid for eid, *_ in inline["decided"]]
    decoded_inline, decoded_screened = inline.pop("decoded_here"), screened.pop("decoded_here")
    assert screened == inline

    # Not a vacuous comparison: the draw by the cell's probability (drawn and not), the rule,
    # the tripwire and the budget all decided turns, and every cell was looked at.
    reasons = {(sampled, reason) for *_, sampled, reason, _, _ in inline["decided"]}
    assert {
        (True, "cascade"),
        (False, "not_sampled"),
        (True, "rule:negative"),
        (True, "rule:identifier_tripwire"),
        (False, "budget_calls"),
    } <= reasons
    # Drawn by the cell's probability: below 1 in the cells the cheap look calls safer.
    by_cell = {(cell, p) for _, cell, _, _, why, p, _ in inline["decided"] if why == "cascade"}
    assert any(p < 1.0 for _, p in by_cell) and len({c for c, _ in by_cell}) > 1
    assert {cell for _, cell, *_ in inline["decided"]} == {"severe", "moderate", "minor", "none"}
    cheap_looks = {
        labels: n
        for (name, labels), n in inline["counters"].items()
        if name == "casewatch_cheap_look_turns"
    }
    assert sum(cheap_looks.values()) == len(looked)
    if look_share == 1.0:
        assert decoded_screened == decoded_inline == len(values)
    else:
        # Beyond the look share, clean turns no rule picks are finished in the process.
        assert len(set(looked)) < len({_event_id(v) for _, v in values})
        assert decoded_screened < decoded_inline == len(values)
    if redaction.enabled:
        # Counted for the turns finished in the process too, as the redact step counts them.
        assert any(name == "casewatch_redactions" for name, _ in inline["counters"])
    else:
        # The cells are the offline judge's, as recorded for each example turn.
        expected = {_event_id(v): EXPECTED[k]["cell"] for k, v in values}
        assert {eid: cell for eid, cell, *_ in inline["decided"]} == {
            eid: expected[eid] for eid in looked
        }


def _event_id(value: bytes) -> str:
    event_id: str = json.loads(value)["event_id"]
    return event_id


def test_a_screening_process_hands_back_a_cell_string_and_the_tripwire_result() -> None:
    """What crosses between the processes is small: a ``Look`` of plain strings and a flag."""
    decisions = chain_decisions(_sampling(1.0), RedactionConfig(enabled=False))
    (key, value), *_ = _example_values()
    look = decisions.cascade_look(TP.topic, value)
    assert look == Look(EXPECTED[key]["cell"], (), False)
    assert decisions.cascade_look(TP.topic, b"{not json") is None  # decided by the steps
