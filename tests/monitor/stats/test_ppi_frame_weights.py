"""Prediction-powered estimates over a frame the cascade drew: each frame turn weighs 1 / the
probability it reached the judge, so the estimate is of the traffic, not of the judged frame."""

from __future__ import annotations

import numpy as np
import pytest

from monitor.stats.ppi import weighted_interval, weighted_terms


def test_frame_weights_make_the_estimate_one_of_traffic() -> None:
    rng = np.random.default_rng(11)
    weighted, plain, truths = [], [], []
    for _ in range(300):
        n = 6000
        risky = rng.random(n) < 0.1
        y = rng.random(n) < np.where(risky, 0.4, 0.02)  # the human call, severe
        f = np.where(rng.random(n) < 0.85, y, ~y)  # the judge agrees 85 % of the time
        pi_judge = np.where(risky, 0.8, 0.1)  # the cascade draws the risky cell more
        judged = rng.random(n) < pi_judge
        fj, yj, wj = f[judged], y[judged], 1.0 / pi_judge[judged]
        labelled = rng.random(fj.size) < 0.2  # a uniform label batch of the frame
        pi_label = np.full(fj.size, 0.2)
        terms = weighted_terms(fj, labelled, yj, pi_label, frame_weights=wj)
        weighted.append(weighted_interval(terms, lam=1.0)[0].point)
        frame_only = weighted_terms(fj, labelled, yj, pi_label)
        plain.append(weighted_interval(frame_only, lam=1.0)[0].point)
        truths.append(y.mean())
    bias = np.mean(np.array(weighted) - np.array(truths))
    assert abs(bias) < 0.003
    assert np.mean(np.array(plain) - np.array(truths)) > 0.05  # the frame over-states it


def test_bad_frame_weights_are_refused() -> None:
    with pytest.raises(ValueError, match="frame weight"):
        weighted_terms([1.0, 0.0], [True, False], [1.0, 0.0], [0.5, 1.0], frame_weights=[1.0])
    with pytest.raises(ValueError, match="frame weight"):
        weighted_terms([1.0], [True], [1.0], [0.5], frame_weights=[0.0])
