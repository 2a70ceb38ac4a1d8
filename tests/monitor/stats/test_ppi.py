"""Prediction-powered rate estimates: coverage under a biased judge (simulation) and the
estimator's edge cases."""

from __future__ import annotations

import numpy as np
import pytest

from monitor.stats.ppi import rate_estimates

TRUE_RATE = 0.15
SENSITIVITY = 0.6  # the judge sees 60 % of severe turns...
FALSE_POSITIVE = 0.02  # ... and calls 2 % of the others severe: it reports ~10.7 %, not 15 %
N_LABELLED = 200
N_UNLABELLED = 5_000
SIMULATIONS = 1_000


def _judge(y: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    p = np.where(y == 1, SENSITIVITY, FALSE_POSITIVE)
    return (rng.random(len(y)) < p).astype(float)


def test_ppi_covers_the_true_rate_and_is_narrower_than_labels_while_the_judge_misses() -> None:
    rng = np.random.default_rng(20)
    covered = {"ppi": 0, "labels_only": 0, "judge_only": 0}
    widths: dict[str, list[float]] = {"ppi": [], "labels_only": []}
    for _ in range(SIMULATIONS):
        y = (rng.random(N_LABELLED) < TRUE_RATE).astype(float)
        y_unseen = (rng.random(N_UNLABELLED) < TRUE_RATE).astype(float)
        est = rate_estimates(y, _judge(y, rng), _judge(y_unseen, rng))
        for name in covered:
            interval = getattr(est, name)
            covered[name] += interval.lower <= TRUE_RATE <= interval.upper
        widths["ppi"].append(est.ppi.width)
        widths["labels_only"].append(est.labels_only.width)
    coverage = {k: v / SIMULATIONS for k, v in covered.items()}
    print(
        f"coverage {coverage}, mean width ppi {np.mean(widths['ppi']):.4f} "
        f"labels-only {np.mean(widths['labels_only']):.4f}"
    )
    assert coverage["ppi"] >= 0.93, coverage
    assert coverage["judge_only"] <= 0.05, coverage  # confidently wrong
    assert np.mean(widths["ppi"]) < 0.9 * np.mean(widths["labels_only"]), widths


def test_a_useless_judge_falls_back_to_the_labels() -> None:
    rng = np.random.default_rng(1)
    y = (rng.random(300) < 0.2).astype(float)
    noise = (rng.random(300) < 0.5).astype(float)
    est = rate_estimates(y, noise, (rng.random(3_000) < 0.5).astype(float))
    assert est.lam is not None and est.lam < 0.2
    assert est.ppi.width <= est.labels_only.width * 1.05


def test_a_perfect_judge_gives_the_unlabelled_rate_with_a_tight_interval() -> None:
    y = np.array([1.0] * 20 + [0.0] * 80)
    unlabelled = np.array([1.0] * 200 + [0.0] * 800)
    est = rate_estimates(y, y, unlabelled)
    # PPI++: Cov(Y, f) / ((1 + n/N) Var(f)), the variances estimated from the samples
    assert est.lam == pytest.approx(1 / (1 + 100 / 1000), rel=0.02)
    assert est.ppi.point == pytest.approx(0.2)
    assert est.ppi.width < est.labels_only.width / 2


def test_too_few_labels_give_no_interval_and_mismatched_input_is_refused() -> None:
    est = rate_estimates([1.0], [1.0], [0.0, 1.0])
    assert est.ppi.point is None
    assert est.judge_only.point == pytest.approx(2 / 3)  # over every turn the judge scored
    with pytest.raises(ValueError, match="one value per labelled turn"):
        rate_estimates([1.0, 0.0], [1.0], [0.0])
