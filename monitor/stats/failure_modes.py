"""Failure modes: the failed turns of one assistant's window grouped into recurring causes
(pure: turns and the modes known before in, modes out; no I/O).

**Clustering.** Agglomerative clustering, average linkage, on cosine distances between the
turns' features (``failure_features.py``), cut at a distance threshold. Chosen over k-means,
which needs the number of modes in advance, and over HDBSCAN, whose density estimate on
sparse high-dimensional text calls most turns noise unless tuned per corpus: a cosine
threshold means the same in every run and every window, so the same cause groups the same
way tomorrow. Average linkage does not chain (single linkage would merge every cause into one
giant mode through a few in-between turns). Groups smaller than ``min_mode_size`` are not
modes: their turns are counted ``unsorted``, never dropped silently.

**Scale.** Average linkage needs the pairwise distances, quadratic in the turns, so it runs
on a sample of at most ``sample_size`` turns (every turn of the recent part first, up to half
the sample, so a mode that is just starting is in it; then an even draw of the rest, by a
hash of the event id, the same in every run). A mode must have ``min_mode_size`` turns in the
sample; every other turn joins the mode whose centroid is nearest if it is at least as close
as that mode's loosest sampled member, else stays unsorted. Time and memory then grow
linearly with the window; a steady cause needs ``min_mode_size / sample share`` turns in the
window to be found (0.25 % of 100,000 with the defaults), a new one only ``min_mode_size`` in
the recent part.

**Stable ids.** A mode is recognised in the next run by its signature (distinctive words
with their weights, and its failing metrics): the new groups and the known modes are paired
one to one by the best total similarity (the assignment problem, ``linear_sum_assignment``);
a pair at least ``match_threshold`` alike keeps the known id and first-seen time. A group
matching none gets a new id, a hash of its earliest turn's event id (never the id itself),
``fm-`` for modes of turns, ``fc-`` for modes of cases (``id_prefix``).

**Cases.** Failed cases are grouped the same way, each read as a ``FailedTurn`` (its
conversation id, when it was judged, its first query, the case metrics failing and the case
judge's reasons), with ``unit="case"``: their modes never mix with the turns'.

**New and growing.** The window is split at ``recent_start``. A mode is *new* when its first
turn is in the recent part and the earlier part held enough failed turns to have shown it; it
is *growing* when its share of the recent part's failed turns exceeds its earlier share by
``min_growth`` times and a one-sided binomial test rejects the earlier share at
``growth_alpha``. Either makes it *emerging*, which pages.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

from monitor.stats.failure_features import (
    FailedTurn,
    FeatureWeights,
    Terms,
    TextEmbedder,
    TurnFeatures,
    label,
    signature_similarity,
    word_text,
)

if TYPE_CHECKING:
    # scipy and scikit-learn load with the first grouping (in the functions below), not with
    # the daemon, which imports this module's types at start (~80 MB resident).
    from scipy import sparse

GROUPED = "grouped"
TOO_FEW_TURNS = "too_few_turns"
UNSORTED = -1
GIANT_SHARE = 0.8  # one mode holding this share of the grouped turns is named in the note


@dataclass(frozen=True)
class GroupingParams:
    min_turns: int = 30  # fewer failed turns in the window: nothing is grouped
    min_mode_size: int = 5
    distance_threshold: float = 0.6  # cosine distance at which average linkage stops merging
    sample_size: int = 2000
    chunk_size: int = 2000
    reason_chars: int = 400
    query_chars: int = 300
    weights: FeatureWeights = field(default_factory=FeatureWeights)
    match_threshold: float = 0.35
    label_terms: int = 4
    signature_terms: int = 20
    examples: int = 3
    growth_alpha: float = 0.01
    min_growth: float = 2.0
    unit: str = "turn"  # what is grouped (turn | case): the notes' word
    id_prefix: str = "fm-"  # a new mode's id: "fm-" for turns, "fc-" for cases


@dataclass(frozen=True)
class KnownMode:
    """A mode found by an earlier run, as stored."""

    mode_id: str
    terms: Mapping[str, float]
    metrics: tuple[str, ...]
    first_seen: datetime


@dataclass(frozen=True)
class Mode:
    mode_id: str
    label: str
    terms: dict[str, float]  # its signature: distinctive terms and their mean weight
    metrics: tuple[str, ...]  # failing in at least half its turns, most frequent first
    size: int
    share: float  # of the window's failed turns
    recent: int  # its turns in the recent part
    earlier: int
    trend: float | None  # recent share minus earlier share; None when a part has no turn
    first_seen: datetime
    last_seen: datetime
    new: bool
    growing: bool
    examples: tuple[str, ...]  # event ids, newest first
    members: tuple[str, ...]  # every event id, oldest first
    member_times: tuple[datetime, ...]  # their event timestamps

    @property
    def emerging(self) -> bool:
        return self.new or self.growing


@dataclass(frozen=True)
class Grouping:
    status: str  # grouped | too_few_turns
    turns: int
    recent_turns: int
    modes: tuple[Mode, ...]  # largest first
    unsorted: int
    note: str

    @property
    def grouped(self) -> int:
        return sum(m.size for m in self.modes)


def group_failures(
    turns: Sequence[FailedTurn],
    metrics: Sequence[str],
    known: Sequence[KnownMode],
    params: GroupingParams,
    *,
    recent_start: datetime,
    embed: TextEmbedder | None = None,
) -> Grouping:
    """The failure modes of ``turns`` (one assistant's window), recognising ``known`` ones.
    With ``embed``, the text features are its embeddings (``failure_features.py``); an error it
    raises is the caller's to handle (the job falls back to the TF-IDF features)."""
    ordered = sorted(turns, key=lambda t: (t.at, t.event_id))
    n = len(ordered)
    recent_total = sum(1 for t in ordered if t.at >= recent_start)
    if n < params.min_turns:
        note = (
            f"{n} failed {params.unit}s in the window, fewer than the {params.min_turns} "
            "needed to group them: nothing grouped"
        )
        return Grouping(TOO_FEW_TURNS, n, recent_total, (), n, note)
    assignment, terms, position = _cluster(ordered, metrics, params, recent_start, embed)
    groups: dict[int, list[int]] = {}
    for i, g in enumerate(assignment):
        if g != UNSORTED:
            groups.setdefault(int(g), []).append(i)
    kept = {g: ix for g, ix in groups.items() if len(ix) >= params.min_mode_size}
    signatures = {
        g: dict(
            terms.distinctive([position[i] for i in ix if i in position], params.signature_terms)
        )
        for g, ix in kept.items()
    }
    metric_sets = {g: _metrics_of(ordered, ix) for g, ix in kept.items()}
    ids = _match(
        kept, signatures, metric_sets, known, ordered, params.match_threshold, params.id_prefix
    )
    known_by_id = {k.mode_id: k for k in known}
    earlier_total = n - recent_total
    modes = []
    for g, ix in kept.items():
        members = [ordered[i] for i in ix]
        recent = sum(1 for t in members if t.at >= recent_start)
        first = members[0].at
        prior = known_by_id.get(ids[g])
        first_seen = min(first, prior.first_seen) if prior else first
        new = first_seen >= recent_start and earlier_total >= params.min_turns
        sig = signatures[g]
        modes.append(
            Mode(
                mode_id=ids[g],
                label=label(sorted(sig.items(), key=lambda kv: -kv[1]), params.label_terms)
                or ", ".join(metric_sets[g]),
                terms=sig,
                metrics=metric_sets[g],
                size=len(ix),
                share=len(ix) / n,
                recent=recent,
                earlier=len(ix) - recent,
                trend=_trend(recent, recent_total, len(ix) - recent, earlier_total),
                first_seen=first_seen,
                last_seen=members[-1].at,
                new=new,
                growing=not new
                and _growing(recent, recent_total, len(ix) - recent, earlier_total, params),
                examples=tuple(t.event_id for t in reversed(members[-params.examples :])),
                members=tuple(t.event_id for t in members),
                member_times=tuple(t.at for t in members),
            )
        )
    modes.sort(key=lambda m: (-m.size, m.mode_id))
    unsorted = n - sum(m.size for m in modes)
    note = _note(modes, n, unsorted, params.unit)
    return Grouping(GROUPED, n, recent_total, tuple(modes), unsorted, note)


def _note(modes: Sequence[Mode], n: int, unsorted: int, unit: str = "turn") -> str:
    if not modes:
        return f"{n} failed {unit}s, no recurring cause: every group was smaller than a mode"
    note = f"{n} failed {unit}s: {len(modes)} modes, {unsorted} unsorted"
    grouped = n - unsorted
    if len(modes) >= 1 and modes[0].size >= GIANT_SHARE * grouped:
        note += f"; one mode holds {modes[0].size / grouped:.0%} of the grouped {unit}s"
    return note


def _trend(recent: int, recent_total: int, earlier: int, earlier_total: int) -> float | None:
    if recent_total == 0 or earlier_total == 0:
        return None
    return recent / recent_total - earlier / earlier_total


def _growing(
    recent: int, recent_total: int, earlier: int, earlier_total: int, params: GroupingParams
) -> bool:
    if recent_total == 0 or earlier_total == 0 or recent < params.min_mode_size:
        return False
    base = max(earlier / earlier_total, 0.5 / earlier_total)  # no turn before: half a turn
    if recent / recent_total < params.min_growth * base:
        return False
    from scipy.stats import binomtest

    test = binomtest(recent, recent_total, min(base, 1.0), alternative="greater")
    return bool(test.pvalue < params.growth_alpha)


def _metrics_of(turns: Sequence[FailedTurn], ix: Sequence[int]) -> tuple[str, ...]:
    counts = Counter(m for i in ix for m in turns[i].failing)
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    common = tuple(m for m, c in ranked if c * 2 >= len(ix))
    return common or tuple(m for m, _ in ranked[:1])


def _stable_hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def _sample(turns: Sequence[FailedTurn], size: int, recent_start: datetime) -> list[int]:
    """Indices of at most ``size`` turns: the recent part first (up to half), then an even
    draw of the rest; the same turns in every run (a hash of the event id decides)."""
    if len(turns) <= size:
        return list(range(len(turns)))
    recent = [i for i, t in enumerate(turns) if t.at >= recent_start]

    def rank(i: int) -> int:
        return _stable_hash(turns[i].event_id)

    take = sorted(recent, key=rank)[: size // 2]
    taken = set(take)
    others = sorted((i for i in range(len(turns)) if i not in taken), key=rank)
    return sorted(take + others[: size - len(take)])


def _cluster(
    turns: Sequence[FailedTurn],
    metrics: Sequence[str],
    params: GroupingParams,
    recent_start: datetime,
    embed: TextEmbedder | None = None,
) -> tuple[np.ndarray, Terms, dict[int, int]]:
    """Each turn's group (``UNSORTED`` past the threshold), the sample's terms, and where each
    sampled turn sits in the sample."""
    sample_ix = _sample(turns, params.sample_size, recent_start)
    sample = [turns[i] for i in sample_ix]
    features = TurnFeatures(
        sample,
        metrics,
        weights=params.weights,
        reason_chars=params.reason_chars,
        query_chars=params.query_chars,
        embed=embed,
    )
    x = features.transform(sample)
    distances = np.clip(1.0 - (x @ x.T).toarray(), 0.0, 2.0)
    np.fill_diagonal(distances, 0.0)
    from sklearn.cluster import AgglomerativeClustering

    labels = AgglomerativeClustering(
        n_clusters=None,
        metric="precomputed",
        linkage="average",
        distance_threshold=params.distance_threshold,
    ).fit_predict(distances)
    del distances
    terms = Terms([word_text(t, params.reason_chars, params.query_chars) for t in sample])
    position = {turn_i: s for s, turn_i in enumerate(sample_ix)}
    assignment = np.full(len(turns), UNSORTED, dtype=np.int64)
    # A group needs min_mode_size turns in the sample itself: two look-alike one-off turns
    # would otherwise make a centroid that draws in every turn sharing their metric and query.
    floor = params.min_mode_size
    sizes = Counter(int(g) for g in labels)
    big = sorted(g for g, c in sizes.items() if c >= floor)
    for s, g in enumerate(labels):
        if int(g) in sizes and sizes[int(g)] >= floor:
            assignment[sample_ix[s]] = int(g)
    if len(sample) < len(turns) and big:
        _assign_rest(turns, sample_ix, x, labels, big, features, params, assignment)
    return assignment, terms, position


def _assign_rest(
    turns: Sequence[FailedTurn],
    sample_ix: Sequence[int],
    x: sparse.csr_matrix,
    labels: np.ndarray,
    groups: Sequence[int],
    features: TurnFeatures,
    params: GroupingParams,
    assignment: np.ndarray,
) -> None:
    """Every turn outside the sample joins the group whose centroid is nearest, if it is at
    least as close to it as the group's loosest sampled member (and within the threshold);
    read in chunks, so memory stays bounded by the chunk and the centroids."""
    from sklearn.preprocessing import normalize

    centroids = normalize(
        np.vstack([np.asarray(x[labels == g].mean(axis=0)) for g in groups]).astype(np.float32)
    )
    floor = np.array(
        [
            max(1.0 - params.distance_threshold, float(np.min(x[labels == g] @ centroids[k])))
            for k, g in enumerate(groups)
        ]
    )
    group_ids = np.asarray(groups, dtype=np.int64)
    in_sample = np.zeros(len(turns), dtype=bool)
    in_sample[list(sample_ix)] = True
    rest = np.flatnonzero(~in_sample)
    for start in range(0, rest.size, params.chunk_size):
        chunk = rest[start : start + params.chunk_size]
        rows = features.transform([turns[i] for i in chunk])
        similarity = np.asarray(rows @ centroids.T)
        best = similarity.argmax(axis=1)
        near = similarity[np.arange(chunk.size), best] >= floor[best]
        assignment[chunk[near]] = group_ids[best[near]]


def _match(
    groups: Mapping[int, Sequence[int]],
    signatures: Mapping[int, Mapping[str, float]],
    metric_sets: Mapping[int, tuple[str, ...]],
    known: Sequence[KnownMode],
    turns: Sequence[FailedTurn],
    threshold: float,
    prefix: str = "fm-",
) -> dict[int, str]:
    """Each group's mode id: a known mode's, paired one to one by signature, else a new one."""
    order = sorted(groups)
    ids: dict[int, str] = {}
    if known and order:
        sim = np.array(
            [
                [
                    signature_similarity(signatures[g], metric_sets[g], k.terms, k.metrics)
                    for k in known
                ]
                for g in order
            ]
        )
        from scipy.optimize import linear_sum_assignment

        rows, cols = linear_sum_assignment(-sim)
        for r, c in zip(rows, cols, strict=True):
            if sim[r, c] >= threshold:
                ids[order[r]] = known[c].mode_id
    taken = {k.mode_id for k in known} | set(ids.values())
    for g in order:
        if g in ids:
            continue
        seed = turns[groups[g][0]].event_id
        mode_id = _new_id(seed, taken, prefix)
        taken.add(mode_id)
        ids[g] = mode_id
    return ids


def _new_id(seed: str, taken: set[str], prefix: str = "fm-") -> str:
    salt = 0
    while True:
        digest = hashlib.blake2b(f"{seed}\x00{salt}".encode(), digest_size=5).hexdigest()
        mode_id = prefix + digest
        if mode_id not in taken:
            return mode_id
        salt += 1
