"""Statistics primitives shared by ``comparison`` and ``agreement`` (pure; no I/O).

scipy does the tests (Wilcoxon signed-rank, paired t, bootstrap, Spearman, Kendall); this
module only guards them. Degenerate inputs (too few pairs, all differences zero, a constant
series) give ``None`` plus a note saying why, never a crash, a NaN or a stray warning.

Aggregation follows the Case-Aware paper's §8.3: the unit of analysis is the conversation,
whose score is the mean over its scored turns; ``judge_failed`` turns are excluded and counted.
"""

from __future__ import annotations

import math
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from monitor.schema.turn import METRICS, Verdict
from monitor.scoring import turn as scoring
from monitor.stats.lazy import LazyModule

st = LazyModule("scipy.stats")  # imported on first use: see monitor.stats.lazy

T = TypeVar("T")

BOOTSTRAP_RESAMPLES = 9999
BOOTSTRAP_SEED = 0  # fixed so a report is reproducible
# Scores are floats in [0, 1]; differences below this are rounding noise, not a difference.
_DECIMALS = 12


def quiet(what: str, fn: Callable[[], T], notes: list[str]) -> T | None:
    """Run a scipy call; its warnings and ValueErrors become notes instead of escaping."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = fn()
        except (ValueError, FloatingPointError, ZeroDivisionError) as exc:
            notes.append(f"{what}: {exc}")
            return None
    for w in caught:
        notes.append(f"{what}: {w.message}")
    return result


def finite(x: Any) -> float | None:
    """A plain float, or None for NaN/inf/None (JSON has no NaN)."""
    if x is None:
        return None
    value = float(x)
    return value if math.isfinite(value) else None


def mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


# ---------------------------------------------------------------- conversation aggregation


@dataclass
class ConversationScores:
    """Per-conversation means over scored turns: ``s_final[conv]``, ``metrics[metric][conv]``."""

    s_final: dict[str, float] = field(default_factory=dict)
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)
    turns_scored: int = 0
    turns_failed: int = 0
    assistants: tuple[str, ...] = ()
    config_hashes: tuple[str, ...] = ()


def verdict_s_final(verdict: Verdict, weights: Mapping[str, float] | None) -> float | None:
    """The verdict's S_final, or one recomputed from its metric scores under ``weights``."""
    if verdict.status != "ok" or verdict.s_final is None:
        return None
    if weights is None:
        return verdict.s_final
    return scoring.s_final(verdict.metric_scores, weights)


def by_conversation(
    verdicts: Iterable[Verdict], weights: Mapping[str, float] | None = None
) -> ConversationScores:
    s_lists: dict[str, list[float]] = defaultdict(list)
    m_lists: dict[str, dict[str, list[float]]] = {m: defaultdict(list) for m in METRICS}
    out = ConversationScores()
    assistants: set[str] = set()
    hashes: set[str] = set()
    for v in verdicts:
        assistants.add(f"{v.assistant.name}@{v.assistant.version}")
        if v.judge_config_hash:
            hashes.add(v.judge_config_hash)
        s = verdict_s_final(v, weights)
        if s is None:
            out.turns_failed += 1
            continue
        out.turns_scored += 1
        s_lists[v.conversation_id].append(s)
        for m in METRICS:
            if m in v.metric_scores:
                m_lists[m][v.conversation_id].append(v.metric_scores[m])
    out.s_final = {c: math.fsum(xs) / len(xs) for c, xs in s_lists.items()}
    out.metrics = {
        m: {c: math.fsum(xs) / len(xs) for c, xs in convs.items()} for m, convs in m_lists.items()
    }
    out.assistants = tuple(sorted(assistants))
    out.config_hashes = tuple(sorted(hashes))
    return out


# ---------------------------------------------------------------- paired two-sample tests


@dataclass(frozen=True)
class PairedTest:
    """Paired comparison of B against A; ``mean_delta`` is mean(B − A)."""

    n: int
    mean_a: float | None
    mean_b: float | None
    mean_delta: float | None
    wilcoxon_statistic: float | None = None
    wilcoxon_p: float | None = None
    t_statistic: float | None = None
    t_p: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    ci_method: str | None = None
    notes: tuple[str, ...] = ()


def _array(values: Sequence[float]) -> NDArray[np.float64]:
    return np.asarray(values, dtype=np.float64)


def paired_test(
    a: Sequence[float],
    b: Sequence[float],
    *,
    with_t: bool = True,
    with_ci: bool = True,
    confidence: float = 0.95,
    seed: int = BOOTSTRAP_SEED,
) -> PairedTest:
    """Two-sided Wilcoxon signed-rank (+ paired t and a bootstrap CI of the mean difference)."""
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length: {len(a)} != {len(b)}")
    n = len(a)
    notes: list[str] = []
    if n == 0:
        return PairedTest(0, None, None, None, notes=("no pairs",))
    xa, xb = _array(a), _array(b)
    d = np.round(xb - xa, _DECIMALS)
    base: dict[str, Any] = {
        "n": n,
        "mean_a": mean(a),
        "mean_b": mean(b),
        "mean_delta": float(np.mean(d)),
    }
    if n < 2:
        return PairedTest(**base, notes=("n < 2: no test",))
    if not np.any(d):
        exact: dict[str, Any] = (
            {"ci_low": 0.0, "ci_high": 0.0, "ci_method": "exact"} if with_ci else {}
        )
        note = "all differences are zero: A and B score identically, no test"
        return PairedTest(**base, **exact, notes=(note,))
    w = quiet("wilcoxon", lambda: st.wilcoxon(d, alternative="two-sided"), notes)
    fields: dict[str, Any] = {}
    if w is not None:
        fields["wilcoxon_statistic"] = finite(w.statistic)
        fields["wilcoxon_p"] = finite(w.pvalue)
    constant = bool(np.all(d == d[0]))
    if constant:
        # Zero variance: t and the bootstrap are undefined; the difference is known exactly.
        notes.append("differences are constant: t-test undefined, CI is the constant shift")
        if with_ci:
            fields.update(ci_low=float(d[0]), ci_high=float(d[0]), ci_method="exact")
    else:
        if with_t:
            t = quiet("t-test", lambda: st.ttest_rel(xb, xa), notes)
            if t is not None:
                fields["t_statistic"] = finite(t.statistic)
                fields["t_p"] = finite(t.pvalue)
        if with_ci:
            fields.update(_bootstrap_ci(d, confidence, seed, notes))
    return PairedTest(**base, **fields, notes=tuple(notes))


def _bootstrap(d: NDArray[np.float64], confidence: float, seed: int, method: str) -> Any:
    return st.bootstrap(
        (d,),
        np.mean,
        confidence_level=confidence,
        n_resamples=BOOTSTRAP_RESAMPLES,
        method=method,
        random_state=np.random.default_rng(seed),
    )


def _bootstrap_ci(
    d: NDArray[np.float64], confidence: float, seed: int, notes: list[str]
) -> dict[str, Any]:
    # BCa is scipy's default and the better interval; on tiny or lumpy samples it can be
    # undefined, and then the percentile interval is reported (and named).
    for method in ("BCa", "percentile"):
        tried: list[str] = []
        res = quiet(
            f"bootstrap ({method})", partial(_bootstrap, d, confidence, seed, method), tried
        )
        if res is not None and not tried:
            low, high = finite(res.confidence_interval.low), finite(res.confidence_interval.high)
            if low is not None and high is not None:
                return {"ci_low": low, "ci_high": high, "ci_method": f"bootstrap-{method}"}
        notes.extend(tried)
    return {}


# ---------------------------------------------------------------- rank correlation


@dataclass(frozen=True)
class Correlation:
    n: int
    spearman: float | None = None
    spearman_p: float | None = None
    kendall: float | None = None
    kendall_p: float | None = None
    notes: tuple[str, ...] = ()


def rank_correlation(x: Sequence[float], y: Sequence[float]) -> Correlation:
    """Spearman ρ and Kendall τ-b, both with two-sided p-values."""
    if len(x) != len(y):
        raise ValueError(f"samples differ in length: {len(x)} != {len(y)}")
    n = len(x)
    if n < 3:
        return Correlation(n, notes=(f"n = {n} < 3: correlation not meaningful",))
    xa, ya = np.round(_array(x), _DECIMALS), np.round(_array(y), _DECIMALS)
    if np.all(xa == xa[0]) or np.all(ya == ya[0]):
        return Correlation(n, notes=("a constant series: correlation undefined",))
    notes: list[str] = []
    rho = quiet("spearman", lambda: st.spearmanr(xa, ya), notes)
    tau = quiet("kendall", lambda: st.kendalltau(xa, ya), notes)
    return Correlation(
        n,
        spearman=finite(rho.statistic) if rho is not None else None,
        spearman_p=finite(rho.pvalue) if rho is not None else None,
        kendall=finite(tau.statistic) if tau is not None else None,
        kendall_p=finite(tau.pvalue) if tau is not None else None,
        notes=tuple(notes),
    )
