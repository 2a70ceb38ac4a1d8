"""The cascade's cheap look decides as it always did: on every turn event of examples/ (the
bench's turns among them) its cell and the offline judge's eight scores equal those recorded
in cheap_cells_expected.json, written by the judge before its readings were made cheap
(patterns skipped when the text lacks what they need, readings of repeated texts remembered,
a history read message by message). A deliberate change of the judge's rules rewrites the file
(and bumps ``ALGORITHM_VERSION``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from monitor.judging.heuristic.judge import score_turn
from monitor.judging.heuristic.tokens import forget_readings
from monitor.schema.turn import TurnEvent
from monitor.stream.steps.decisions import cheap_cell

ROOT = Path(__file__).resolve().parents[4]
EXPECTED = json.loads((Path(__file__).with_name("cheap_cells_expected.json")).read_text())


def _corpus() -> dict[str, TurnEvent]:
    turns: dict[str, TurnEvent] = {}
    for key in EXPECTED:
        name, _, _ = key.partition(":")
        path = ROOT / "examples" / name
        for index, line in enumerate(path.read_text().splitlines()):
            if line.strip() and f"{name}:{index}" in EXPECTED:
                record = json.loads(line)  # judge_canary.jsonl holds {"turn": ..., ...}
                turns[f"{name}:{index}"] = TurnEvent.model_validate(record.get("turn", record))
    return turns


@pytest.mark.parametrize("remembered", [False, True], ids=["cold", "remembered"])
def test_cells_and_scores_are_unchanged_on_the_examples(remembered: bool) -> None:
    """Remembered: in file order, as a daemon meets them. Cold: every third turn, each read
    with nothing remembered."""
    turns = _corpus()
    assert turns.keys() == EXPECTED.keys()
    if not remembered:
        turns = {k: t for n, (k, t) in enumerate(turns.items()) if n % 3 == 0}
    forget_readings()
    cells, scores = {}, {}
    for key, turn in turns.items():
        if not remembered:
            forget_readings()
        cells[key] = cheap_cell(turn)
        scores[key] = score_turn(turn).score_map()
    assert cells == {k: EXPECTED[k]["cell"] for k in turns}
    assert scores == {k: EXPECTED[k]["scores"] for k in turns}
