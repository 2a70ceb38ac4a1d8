"""Text features of failed turns, for grouping them into failure modes (pure: no I/O).

A failed turn (severe or moderate) is read as three blocks:

- the judges' reasons for its failing metrics, each cut to ``reason_chars`` (a judge that
  writes a page says what matters in its first lines; the cut bounds time and memory);
- the customer's query, cut to ``query_chars``;
- the failing metrics themselves, one column each.

The text blocks are TF-IDF over character n-grams inside word boundaries (``char_wb``, 3-5):
they need neither a tokenizer nor a stop-word list of any language, so reasons written in
German, French or Japanese (no spaces between words) group as well as English ones, and a
misspelt word still shares most of its n-grams with the right one. Each block is L2-normalised
and scaled by the square root of its weight, so the cosine similarity of two turns is the
weighted sum of their blocks' similarities: the reasons dominate, the metrics keep apart two
causes worded alike, the query adds the product or topic.

With an embeddings endpoint configured (``failure_modes.embeddings``), the two text blocks are
one instead: the embedding of the reasons and the query together (``embed_text``), L2-normalised
and scaled by the square root of their two weights added. The embedder is handed in as a
function (texts in, one row per text out), so this module stays pure; each distinct text is
asked for once per transform. The metrics block, the labels and the signatures stay as below.

A mode's label and the signature that recognises it in the next run are words (runs of two or
more letters, and pairs of them): a person reads words, and a word means the same thing in the
next run's vocabulary, where a column of n-grams does not. Terms are distinctive when a mode
uses them more than the failed turns around it do (mean TF-IDF in the mode minus the mean of
all), so words every reason uses ("answer", "the") never name a mode.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    # scikit-learn and scipy load with the first grouping (lazily, in the functions below):
    # the daemon imports this module's types at start, and the libraries are ~80 MB resident.
    from scipy import sparse
    from sklearn.feature_extraction.text import TfidfVectorizer

TRUNCATED = "…"
# Texts in, one vector per text out (any width, the same in one run): an embeddings endpoint.
TextEmbedder = Callable[[Sequence[str]], "np.ndarray[Any, Any]"]
# Columns per text block: enough for many modes' vocabularies, bounded whatever the window.
MAX_FEATURES = 30_000
# Words of two or more letters (any script); digits and identifiers never name a mode.
WORD_PATTERN = r"(?u)\b[^\W\d_]{2,}\b"
MAX_TERM_CHARS = 40  # a run of CJK letters is one "word": shown cut


@dataclass(frozen=True)
class FailedTurn:
    """What grouping reads of a severe or moderate turn."""

    event_id: str
    at: datetime  # the event's own timestamp
    query: str
    failing: tuple[str, ...]  # metrics in the severe or moderate band
    reasons: Mapping[str, str] = field(default_factory=dict)  # metric -> justification
    band: str = "severe"


@dataclass(frozen=True)
class FeatureWeights:
    """Shares of the three blocks in the similarity of two turns (they need not sum to 1)."""

    reasons: float = 0.6
    query: float = 0.15
    metrics: float = 0.25


def clip(text: str, limit: int) -> str:
    """``text`` with runs of whitespace made one space, cut to ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + TRUNCATED


def reasons_text(turn: FailedTurn, limit: int) -> str:
    """The reasons for the turn's failing metrics, each cut to ``limit``, in metric order."""
    return " ".join(
        clip(turn.reasons[m], limit) for m in sorted(turn.failing) if turn.reasons.get(m)
    )


_DIGITS = re.compile(r"\d")


def embed_text(turn: FailedTurn, reason_chars: int, query_chars: int) -> str:
    """What an embedding is asked for: the reasons, then the query; the failing metrics' names
    when both are empty (an endpoint refuses an empty input)."""
    text = " ".join(
        part for part in (reasons_text(turn, reason_chars), clip(turn.query, query_chars)) if part
    )
    return text or ", ".join(sorted(turn.failing)) or "-"


def _shape(text: str) -> str:
    """Lower case, every digit a 0: "E-4012" and "E-7731" are the same kind of identifier, and
    a number seen once would otherwise weigh most in its turn's features."""
    return _DIGITS.sub("0", text.lower())


def _char_vectorizer(min_df: int) -> TfidfVectorizer:
    from sklearn.feature_extraction.text import TfidfVectorizer

    return TfidfVectorizer(
        analyzer="char_wb",
        preprocessor=_shape,
        ngram_range=(3, 4),
        sublinear_tf=True,
        min_df=min_df,
        max_features=MAX_FEATURES,
        dtype=np.float32,
    )


def _fit(texts: Sequence[str]) -> TfidfVectorizer | None:
    """A vectorizer fitted on ``texts``, or None when they hold no n-gram at all. N-grams of
    one turn only are left out (they add to its length, never to a likeness), unless that is
    all there is."""
    if not any(t.strip() for t in texts):
        return None
    for min_df in (2, 1):
        vectorizer = _char_vectorizer(min_df)
        try:
            vectorizer.fit(texts)
        except ValueError:  # "empty vocabulary" or none left: every text shorter than an n-gram
            continue
        return vectorizer
    return None


def _transform_once(vectorizer: TfidfVectorizer, texts: Sequence[str]) -> sparse.csr_matrix:
    """``vectorizer.transform(texts)``, each distinct text analysed once: templated reasons
    (a heuristic judge's) and frequent queries repeat, and the n-gram analysis is the cost."""
    index: dict[str, int] = {}
    rows = [index.setdefault(t, len(index)) for t in texts]
    return vectorizer.transform(list(index))[rows]


class TurnFeatures:
    """Fitted on a sample of failed turns; turns any failed turns into rows of unit length."""

    def __init__(
        self,
        sample: Sequence[FailedTurn],
        metrics: Sequence[str],
        *,
        weights: FeatureWeights,
        reason_chars: int,
        query_chars: int,
        embed: TextEmbedder | None = None,
    ) -> None:
        self._metrics = {m: i for i, m in enumerate(metrics)}
        self._weights = weights
        self._reason_chars = reason_chars
        self._query_chars = query_chars
        self._embed = embed
        self._reasons = None if embed else _fit([self._reason(t) for t in sample])
        self._query = None if embed else _fit([self._query_text(t) for t in sample])

    def _reason(self, turn: FailedTurn) -> str:
        return reasons_text(turn, self._reason_chars)

    def _query_text(self, turn: FailedTurn) -> str:
        return clip(turn.query, self._query_chars)

    def transform(self, turns: Sequence[FailedTurn]) -> sparse.csr_matrix:
        from scipy import sparse
        from sklearn.preprocessing import normalize

        blocks: list[Any] = []
        w = self._weights
        if self._embed is not None and w.reasons + w.query > 0:
            texts = [embed_text(t, self._reason_chars, self._query_chars) for t in turns]
            index: dict[str, int] = {}
            rows = [index.setdefault(t, len(index)) for t in texts]
            vectors = np.asarray(self._embed(list(index)), dtype=np.float32)
            if vectors.ndim != 2 or vectors.shape[0] != len(index):
                raise ValueError(
                    f"the embedder gave {vectors.shape} for {len(index)} texts: one row each"
                )
            dense = normalize(vectors)[rows] * np.float32(np.sqrt(w.reasons + w.query))
            blocks.append(sparse.csr_matrix(dense))
        if self._reasons is not None and w.reasons > 0:
            x = _transform_once(self._reasons, [self._reason(t) for t in turns])
            blocks.append(normalize(x) * np.float32(np.sqrt(w.reasons)))
        if self._query is not None and w.query > 0:
            x = _transform_once(self._query, [self._query_text(t) for t in turns])
            blocks.append(normalize(x) * np.float32(np.sqrt(w.query)))
        if w.metrics > 0:
            blocks.append(normalize(self._metric_block(turns)) * np.float32(np.sqrt(w.metrics)))
        return normalize(sparse.hstack(blocks, format="csr", dtype=np.float32))

    def _metric_block(self, turns: Sequence[FailedTurn]) -> sparse.csr_matrix:
        from scipy import sparse

        rows, cols = [], []
        for i, t in enumerate(turns):
            for m in t.failing:
                if m in self._metrics:
                    rows.append(i)
                    cols.append(self._metrics[m])
        data = np.ones(len(rows), dtype=np.float32)
        return sparse.csr_matrix((data, (rows, cols)), shape=(len(turns), len(self._metrics)))


def word_text(turn: FailedTurn, reason_chars: int, query_chars: int) -> str:
    return reasons_text(turn, reason_chars) + " " + clip(turn.query, query_chars)


class Terms:
    """Words and word pairs of a set of failed turns, and which of them set a group apart."""

    def __init__(self, texts: Sequence[str]) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer

        self._vectorizer: TfidfVectorizer | None = None
        self._matrix: sparse.csr_matrix | None = None
        for min_df in (2, 1):  # words seen once are noise, unless that is all there is
            vectorizer = TfidfVectorizer(
                analyzer="word",
                token_pattern=WORD_PATTERN,
                ngram_range=(1, 2),
                sublinear_tf=True,
                min_df=min_df,
                max_features=MAX_FEATURES,
                dtype=np.float32,
            )
            try:
                self._matrix = vectorizer.fit_transform(texts)
            except ValueError:  # no word at all, or none left at this min_df
                continue
            self._vectorizer = vectorizer
            break
        if self._matrix is not None:
            self._mean = np.asarray(self._matrix.mean(axis=0)).ravel()
            self._names = self._vectorizer.get_feature_names_out() if self._vectorizer else None

    def distinctive(self, members: Iterable[int], top: int) -> list[tuple[str, float]]:
        """The ``top`` terms the rows ``members`` use more than all rows do, with their mean
        weight in the group, most distinctive first."""
        if self._matrix is None or self._names is None:
            return []
        idx = np.fromiter(members, dtype=np.int64)
        if idx.size == 0:
            return []
        mean = np.asarray(self._matrix[idx].mean(axis=0)).ravel()
        lift = mean - self._mean
        order = np.argsort(-lift, kind="stable")[: top * 3]
        out = [(str(self._names[j]), float(mean[j])) for j in order if lift[j] > 0]
        return out[:top]


def label(terms: Sequence[tuple[str, float]], count: int) -> str:
    """A readable label from distinctive terms: a word already inside a chosen pair is not
    repeated, a pair of words both chosen is not added, and terms made only of short Latin
    fragments (pieces of ids, paths and codes) or of one word twice are passed over."""
    chosen: list[str] = []
    for term, _ in terms:
        words = term.split()
        covered = {w for c in chosen for w in c.split()}
        if all(len(w) <= 3 and w.isascii() for w in words) or len(set(words)) < len(words):
            continue  # "kb kb", "has lic": short fragments of ids and paths, not words to read
        if len(words) == 1 and term in covered:
            continue
        if len(words) > 1 and all(w in covered for w in words):
            continue
        chosen = [c for c in chosen if not (len(words) > 1 and c in words)]
        chosen.append(term)
        if len(chosen) >= count:
            break
    return ", ".join(clip(c, MAX_TERM_CHARS) for c in chosen)


def signature_similarity(
    a_terms: Mapping[str, float],
    a_metrics: Sequence[str],
    b_terms: Mapping[str, float],
    b_metrics: Sequence[str],
) -> float:
    """How alike two modes are, from their signatures: the cosine of their term weights (0.8)
    and the overlap of their failing metrics (0.2). 1 for the same mode, 0 for unrelated."""
    dot = sum(w * b_terms[t] for t, w in a_terms.items() if t in b_terms)
    na = float(np.sqrt(sum(w * w for w in a_terms.values())))
    nb = float(np.sqrt(sum(w * w for w in b_terms.values())))
    cosine = dot / (na * nb) if na > 0 and nb > 0 else 0.0
    sa, sb = set(a_metrics), set(b_metrics)
    jaccard = len(sa & sb) / len(sa | sb) if sa | sb else 0.0
    return 0.8 * cosine + 0.2 * jaccard
