"""The anytime-valid sequence: it holds at every look where the fixed-n interval does not
(simulation), and its shape (tightest where asked, wider early, checked inputs)."""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import pytest

from monitor.stats.confidence_sequence import boundary_widths, running_sequence

LOOKS = 100
DEPLOYMENTS = 300


def test_the_sequence_covers_at_every_look_where_repeated_fixed_n_intervals_do_not() -> None:
    rng = np.random.default_rng(11)
    z = NormalDist().inv_cdf(0.975)
    anytime = fixed = 0
    for _ in range(DEPLOYMENTS):
        p = rng.uniform(0.05, 0.3)
        n = 40  # labels per batch: each batch estimate is a labels-only mean
        est = rng.binomial(n, p, LOOKS) / n
        se = np.sqrt(np.maximum(est * (1 - est), 1 / n) / n)
        seq = running_sequence(est, se)
        anytime += all(b.lower <= p <= b.upper for b in seq)
        pooled = np.cumsum(est) / np.arange(1, LOOKS + 1)
        pooled_se = np.sqrt(pooled * (1 - pooled) / (n * np.arange(1, LOOKS + 1)))
        fixed += bool(np.all(np.abs(pooled - p) <= z * pooled_se))
    assert anytime / DEPLOYMENTS >= 0.94
    assert fixed / DEPLOYMENTS < 0.8  # repeated looks at a 95 % interval: far below 95 %


def test_widths_shrink_with_looks_and_are_wider_than_the_fixed_interval() -> None:
    se = np.full(50, 0.02)
    widths = boundary_widths(se, 0.05)
    assert np.all(np.diff(widths) < 0)
    fixed = 1.96 * 0.02 / np.sqrt(np.arange(1, 51))
    assert np.all(widths > fixed)


def test_tightest_at_moves_the_narrowest_ratio_to_the_fixed_interval() -> None:
    se = np.full(200, 0.02)
    fixed = 1.96 * 0.02 / np.sqrt(np.arange(1, 201))
    early = boundary_widths(se, 0.05, tightest_at=5) / fixed
    late = boundary_widths(se, 0.05, tightest_at=150) / fixed
    assert early[4] < late[4]
    assert late[149] < early[149]


def test_bounds_are_clipped_to_a_rate() -> None:
    seq = running_sequence([0.0, 0.01], [0.05, 0.05])
    assert seq[-1].lower == 0.0
    assert seq[-1].looks == 2
    assert 0.0 <= seq[-1].point <= seq[-1].upper <= 1.0


@pytest.mark.parametrize(
    ("se", "alpha", "message"),
    [([], 0.05, "one standard error"), ([0.1], 1.5, "alpha"), ([-0.1], 0.05, ">= 0")],
)
def test_bad_input_is_refused(se: list[float], alpha: float, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        boundary_widths(se, alpha)


def test_no_uncertainty_gives_zero_width() -> None:
    assert boundary_widths([0.0, 0.0], 0.05).tolist() == [0.0, 0.0]
