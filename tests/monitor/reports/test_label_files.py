"""Drawing a labelling batch and reading labels back (pure)."""

from __future__ import annotations

from collections import Counter

from scipy import stats

from monitor.reports.label_files import consensus, draw
from monitor.schema.turn import Band


def test_draw_is_reproducible_without_repeats_and_capped() -> None:
    assert draw(50, 10, seed=4) == draw(50, 10, seed=4)
    assert len(set(draw(50, 10, seed=4))) == 10
    assert sorted(draw(5, 10, seed=4)) == [0, 1, 2, 3, 4]


def test_draw_is_uniform_over_the_frame() -> None:
    counts: Counter[int] = Counter()
    for seed in range(2_000):
        counts.update(draw(20, 5, seed))
    observed = [counts[i] for i in range(20)]
    # Fixed seeds: deterministic; a biased draw (e.g. favouring the newest) fails chi-square.
    assert stats.chisquare(observed).pvalue > 0.01


def test_consensus_takes_the_majority_and_ties_go_to_the_worse_band() -> None:
    rows = [
        {"event_id": "e", "metric": "hallucination", "band": "none"},
        {"event_id": "e", "metric": "hallucination", "band": "none"},
        {"event_id": "e", "metric": "hallucination", "band": "severe"},
        {"event_id": "e", "metric": "turn_band", "band": "minor"},
        {"event_id": "e", "metric": "turn_band", "band": "moderate"},
    ]
    assert consensus(rows) == {"e": {"hallucination": Band.NONE, "turn_band": Band.MODERATE}}
