"""The two-window tests behind drift detection, with their effect sizes (pure; no I/O).

Each ``*_test`` compares a recent sample with a reference sample and returns a ``SignalResult``
(``insufficient_data`` below ``min_turns`` per window); ``adjust`` applies Benjamini-Hochberg
across one run's results and decides ``detected``. scipy does every test; this module guards
the degenerate cases (a single category, all values tied, no bad turn anywhere) so they give
"no evidence" instead of NaN or a warning. ``monitor.stats.drift`` picks a test per signal.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal, TypeVar

import numpy as np

from monitor.config.drift import DriftConfig
from monitor.stats.lazy import LazyModule

st = LazyModule("scipy.stats")  # imported on first use: see monitor.stats.lazy

T = TypeVar("T")
N = TypeVar("N", int, float)  # turn counts, or weighted totals scaled to n_eff

Status = Literal["ok", "insufficient_data"]
Kind = Literal["outcome", "input"]

OTHER = "__other__"
# A category needs this many turns (both windows together) to keep its own column.
_MIN_CATEGORY_COUNT = 5
# Expected cell count below which the two-proportion z-test gives way to Fisher's exact test.
_MIN_EXPECTED = 5.0
# Additive smoothing for PSI, so a category absent from one window gives a finite index.
_PSI_PSEUDOCOUNT = 0.5


# ---------------------------------------------------------------- results


@dataclass(frozen=True)
class SignalResult:
    signal: str
    kind: Kind
    test: str
    status: Status
    recent_n: int
    reference_n: int
    statistic: float | None = None
    p_value: float | None = None
    q_value: float | None = None
    effect: float | None = None
    effect_name: str = ""
    min_effect: float = 0.0
    shift: float | None = None  # recent minus reference: mean, or rate; None for shares
    detected: bool = False
    details: dict[str, float] = field(default_factory=dict)
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _finite(x: Any) -> float | None:
    if x is None:
        return None
    value = float(x)
    return value if math.isfinite(value) else None


def _quiet(fn: Callable[[], T]) -> T:
    # Degenerate inputs (ties everywhere, identical samples) make scipy warn; the guards below
    # handle those cases, and a warning must not escape into the daemon's logs or the tests.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn()


def _insufficient(
    signal: str, kind: Kind, test: str, effect_name: str, n1: int, n0: int, min_turns: int
) -> SignalResult | None:
    if n1 >= min_turns and n0 >= min_turns:
        return None
    short = "recent" if n1 < min_turns else "reference"
    have = n1 if n1 < min_turns else n0
    return SignalResult(
        signal=signal,
        kind=kind,
        test=test,
        status="insufficient_data",
        recent_n=n1,
        reference_n=n0,
        effect_name=effect_name,
        note=f"{short} window has {have} sample(s), fewer than min_turns={min_turns}",
    )


def cliffs_delta(recent: Sequence[float], reference: Sequence[float]) -> float:
    """P(recent > reference) - P(recent < reference), from the Mann-Whitney U of ``recent``."""
    n1, n0 = len(recent), len(reference)
    u = _quiet(lambda: st.mannwhitneyu(recent, reference, alternative="two-sided")).statistic
    return float(2.0 * u / (n1 * n0) - 1.0)


def continuous_test(
    signal: str, kind: Kind, recent: Sequence[float], reference: Sequence[float], cfg: DriftConfig
) -> SignalResult:
    """Two-sample KS: any change of the distribution; effect = KS D (0..1)."""
    early = _insufficient(
        signal, kind, "ks_2samp", "ks_d", len(recent), len(reference), cfg.min_turns
    )
    if early:
        return early
    res = _quiet(lambda: st.ks_2samp(recent, reference))
    d = float(res.statistic)
    return SignalResult(
        signal=signal,
        kind=kind,
        test="ks_2samp",
        status="ok",
        recent_n=len(recent),
        reference_n=len(reference),
        statistic=d,
        p_value=_finite(res.pvalue),
        effect=d,
        effect_name="ks_d",
        min_effect=cfg.min_effect.ks_d,
        shift=float(np.mean(recent) - np.mean(reference)),
        details={
            **_location_details(recent, reference),
            "cliffs_delta": cliffs_delta(recent, reference),
        },
    )


def rank_test(
    signal: str, kind: Kind, recent: Sequence[float], reference: Sequence[float], cfg: DriftConfig
) -> SignalResult:
    """Mann-Whitney U (tie-corrected, for counts); effect = Cliff's delta (-1..1)."""
    early = _insufficient(
        signal, kind, "mannwhitneyu", "cliffs_delta", len(recent), len(reference), cfg.min_turns
    )
    if early:
        return early
    if len({*recent, *reference}) == 1:  # every value the same: nothing to rank
        u, p = len(recent) * len(reference) / 2.0, 1.0
    else:
        res = _quiet(lambda: st.mannwhitneyu(recent, reference, alternative="two-sided"))
        u, p = float(res.statistic), float(res.pvalue)
    return SignalResult(
        signal=signal,
        kind=kind,
        test="mannwhitneyu",
        status="ok",
        recent_n=len(recent),
        reference_n=len(reference),
        statistic=u,
        p_value=_finite(p),
        effect=2.0 * u / (len(recent) * len(reference)) - 1.0,
        effect_name="cliffs_delta",
        min_effect=cfg.min_effect.cliffs_delta,
        shift=float(np.mean(recent) - np.mean(reference)),
        details=_location_details(recent, reference),
    )


def _location_details(recent: Sequence[float], reference: Sequence[float]) -> dict[str, float]:
    return {
        "recent_mean": float(np.mean(recent)),
        "reference_mean": float(np.mean(reference)),
        "recent_median": float(np.median(recent)),
        "reference_median": float(np.median(reference)),
    }


def pooled_columns(
    recent: Mapping[str, N], reference: Mapping[str, N], max_categories: int
) -> tuple[list[str], list[N], list[N]]:
    """Categories as columns: the most frequent ones with at least 5 turns keep their own
    column (at most ``max_categories`` - 1), the rest are pooled as ``__other__``."""
    totals = Counter(recent) + Counter(reference)
    ranked = sorted(totals, key=lambda c: (-totals[c], c))
    keep: list[str] = [c for c in ranked if totals[c] >= _MIN_CATEGORY_COUNT][: max_categories - 1]
    if len(keep) == len(ranked) - 1:  # one category left over: it keeps its own name
        keep = ranked
    rest: list[str] = [c for c in ranked if c not in set(keep)]
    names = [*keep, *([OTHER] if rest else [])]
    r = [recent.get(c, 0) for c in keep] + ([sum(recent.get(c, 0) for c in rest)] if rest else [])
    q = [reference.get(c, 0) for c in keep] + (
        [sum(reference.get(c, 0) for c in rest)] if rest else []
    )
    return names, r, q


def share_columns(
    recent: Mapping[str, N],
    reference: Mapping[str, N],
    order: Sequence[str] | None,
    max_categories: int,
) -> tuple[list[str], list[N], list[N]]:
    """The categories compared and each window's column: in ``order`` (the bands) when
    given, else the frequent ones with the rest pooled (``pooled_columns``)."""
    if order is None:
        return pooled_columns(recent, reference, max_categories)
    names = [c for c in order if recent.get(c, 0) + reference.get(c, 0) > 0]
    return names, [recent.get(c, 0) for c in names], [reference.get(c, 0) for c in names]


def psi(recent: Sequence[float], reference: Sequence[float]) -> float:
    """Population stability index Σ (r_i - q_i) ln(r_i / q_i) over smoothed shares."""
    k = len(recent)
    n1, n0 = sum(recent), sum(reference)
    total = 0.0
    for a, b in zip(recent, reference, strict=True):
        r = (a + _PSI_PSEUDOCOUNT) / (n1 + _PSI_PSEUDOCOUNT * k)
        q = (b + _PSI_PSEUDOCOUNT) / (n0 + _PSI_PSEUDOCOUNT * k)
        total += (r - q) * math.log(r / q)
    return total


def shares_test(
    signal: str,
    kind: Kind,
    recent: Mapping[str, int],
    reference: Mapping[str, int],
    cfg: DriftConfig,
    *,
    effect_name: Literal["cramers_v", "psi"],
    order: Sequence[str] | None = None,
) -> SignalResult:
    """Chi-square test of homogeneity of the two windows' category shares."""
    n1, n0 = sum(recent.values()), sum(reference.values())
    early = _insufficient(signal, kind, "chi2_contingency", effect_name, n1, n0, cfg.min_turns)
    if early:
        return early
    names, r, q = share_columns(recent, reference, order, cfg.max_categories)
    return chi2_shares(signal, kind, (n1, n0), names, (r, q), n1 + n0, effect_name, cfg)


def chi2_shares(
    signal: str,
    kind: Kind,
    counts: tuple[int, int],
    names: Sequence[str],
    table: tuple[Sequence[N], Sequence[N]],
    total: float,
    effect_name: str,
    cfg: DriftConfig,
    *,
    test: str = "chi2_contingency",
    details: Mapping[str, float] | None = None,
) -> SignalResult:
    """The chi-square decision shared by the plain and the weighted shares test: ``table``
    holds the two windows' columns (counts, or weighted shares scaled to Kish's effective
    sizes), ``total`` their sum for Cramér's V."""
    n1, n0 = counts
    r, q = table
    if len(names) < 2:
        chi2, p, v = 0.0, 1.0, 0.0
        note = "a single category in both windows"
    else:
        res = _quiet(lambda: st.chi2_contingency(np.array([r, q]), correction=False))
        chi2, p = float(res.statistic), float(res.pvalue)
        v = math.sqrt(chi2 / total)  # two rows: min(r, c) - 1 = 1
        note = ""
    index = psi(r, q) if len(names) >= 2 else 0.0
    return SignalResult(
        signal=signal,
        kind=kind,
        test=test,
        status="ok",
        recent_n=n1,
        reference_n=n0,
        statistic=chi2,
        p_value=_finite(p),
        effect=v if effect_name == "cramers_v" else index,
        effect_name=effect_name,
        min_effect=cfg.min_effect.cramers_v if effect_name == "cramers_v" else cfg.min_effect.psi,
        details={
            "cramers_v": v,
            "psi": index,
            "categories": float(len(names)),
            **(details or {}),
        },
        note=note,
    )


def cohens_h(p1: float, p0: float) -> float:
    return 2.0 * math.asin(math.sqrt(p1)) - 2.0 * math.asin(math.sqrt(p0))


def proportion_test(
    signal: str, kind: Kind, x1: int, n1: int, x0: int, n0: int, cfg: DriftConfig
) -> SignalResult:
    """Two-proportion z-test (pooled, two-sided); Fisher's exact test when an expected cell
    count is below 5. Effect = Cohen's h (signed: positive when the recent rate is higher)."""
    early = _insufficient(signal, kind, "two_proportion_z", "cohens_h", n1, n0, cfg.min_turns)
    if early:
        return early
    return two_proportions(
        signal,
        kind,
        (n1, n0),
        (x1 / n1, x0 / n0),
        (n1, n0),
        (x1 + x0) / (n1 + n0),
        [[x1, n1 - x1], [x0, n0 - x0]],
        cfg,
    )


def two_proportions(
    signal: str,
    kind: Kind,
    counts: tuple[int, int],
    rates: tuple[float, float],
    sizes: tuple[float, float],
    pooled: float,
    table: list[list[int]],
    cfg: DriftConfig,
    *,
    prefix: str = "",
    details: Mapping[str, float] | None = None,
) -> SignalResult:
    """The two-proportion decision shared by the plain and the weighted test: ``sizes`` are
    the windows' sample sizes (Kish's effective ones when weighted), ``pooled`` the share over
    both, ``table`` the 2x2 counts for Fisher's exact test when an expected cell is below 5;
    ``prefix`` names the weighted variant (``weighted_``)."""
    (n1, n0), (p1, p0), (s1, s0) = counts, rates, sizes
    expected = min(n * share for n in (s1, s0) for share in (pooled, 1.0 - pooled))
    stat: float | None
    if pooled <= 0.0 or pooled >= 1.0:
        test, stat, p = f"{prefix}two_proportion_z", 0.0, 1.0
    elif expected < _MIN_EXPECTED:
        res = _quiet(lambda: st.fisher_exact(table))
        test, stat, p = f"{prefix}fisher_exact", _finite(res.statistic), float(res.pvalue)
    else:
        se = math.sqrt(pooled * (1.0 - pooled) * (1.0 / s1 + 1.0 / s0))
        z = (p1 - p0) / se
        test, stat, p = f"{prefix}two_proportion_z", z, float(2.0 * st.norm.sf(abs(z)))
    return SignalResult(
        signal=signal,
        kind=kind,
        test=test,
        status="ok",
        recent_n=n1,
        reference_n=n0,
        statistic=stat,
        p_value=min(1.0, p),
        effect=cohens_h(p1, p0),
        effect_name="cohens_h",
        min_effect=cfg.min_effect.cohens_h,
        shift=p1 - p0,
        details={"recent_rate": p1, "reference_rate": p0, **(details or {})},
    )


def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """BH-adjusted p-values (q-values), in the input order."""
    if not p_values:
        return []
    adjusted = st.false_discovery_control(np.asarray(p_values, dtype=float), method="bh")
    return [float(q) for q in adjusted]


def adjust(results: Sequence[SignalResult], cfg: DriftConfig) -> list[SignalResult]:
    """Fill q_value (BH across the tested signals) and detected."""
    tested = [i for i, r in enumerate(results) if r.status == "ok" and r.p_value is not None]
    qs = benjamini_hochberg([results[i].p_value or 0.0 for i in tested])
    out = list(results)
    for i, q in zip(tested, qs, strict=True):
        r = out[i]
        big = r.effect is not None and abs(r.effect) >= r.min_effect
        out[i] = replace(r, q_value=q, detected=bool(q < cfg.alpha and big))
    return [_finite_only(r) for r in out]


def _finite_only(r: SignalResult) -> SignalResult:
    # Gauges, JSON output and the JSONB column have no use for inf/NaN: unknown is None.
    return replace(
        r,
        statistic=_finite(r.statistic),
        p_value=_finite(r.p_value),
        q_value=_finite(r.q_value),
        effect=_finite(r.effect),
        shift=_finite(r.shift),
        details={k: v for k, v in r.details.items() if math.isfinite(v)},
    )
