"""TREC qrels and run files, trec_eval measures (pytrec_eval) and leaderboard correlation.

File formats (whitespace-separated, one line per judgment / retrieved document):

- qrels: ``query 0 doc relevance`` (relevance an integer; Pencils Down's RUBRIC label 0–5);
- run: ``query Q0 doc rank score system``.

Writers refuse ids holding whitespace (trec_eval would split them) and write documents in
rank order; readers are pytrec_eval's own ``parse_qrel`` / ``parse_run``, so what casewatch
evaluates is exactly what trec_eval reads from the same files.

Measures are means over the queries of the qrels that the run retrieved for (trec_eval's
default; ``-c`` would average over all qrels queries). The leaderboard of a measure ranks the
systems by it; its agreement with a reference (a ranking, or the same measure under reference
qrels) is Spearman's ρ and Kendall's τ-b (``monitor.stats.paired.rank_correlation``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytrec_eval

from monitor.errors import TrecFormatError
from monitor.stats.paired import Correlation, rank_correlation

# Measure names as pytrec_eval reports them, with the trec_eval request that produces them.
DEFAULT_MEASURES: dict[str, str] = {"ndcg_cut_10": "ndcg_cut.10", "P_10": "P.10", "map": "map"}

Qrels = dict[str, dict[str, int]]
Run = dict[str, dict[str, float]]


def _check_id(kind: str, value: str) -> str:
    if not value or any(c.isspace() for c in value):
        raise TrecFormatError(f"{kind} id {value!r} is empty or holds whitespace")
    return value


def format_qrels(qrels: Mapping[str, Mapping[str, int]]) -> str:
    """``query 0 doc relevance`` lines, queries and documents sorted."""
    lines = []
    for query in sorted(qrels):
        for doc in sorted(qrels[query]):
            rel = qrels[query][doc]
            lines.append(f"{_check_id('query', query)} 0 {_check_id('doc', doc)} {int(rel)}\n")
    return "".join(lines)


def format_run(run: Mapping[str, Sequence[tuple[str, float]]], system: str) -> str:
    """``query Q0 doc rank score system`` lines; each ranking as given (best first).

    trec_eval orders by score, not rank, so scores must fall with the rank: given scores that
    do not are replaced by ``n - rank`` for the whole query, keeping the given order."""
    _check_id("system", system)
    lines = []
    for query in sorted(run):
        ranking = list(run[query])
        scores = [s for _, s in ranking]
        if any(b >= a for a, b in itertools.pairwise(scores)):
            scores = [float(len(ranking) - i) for i in range(len(ranking))]
        seen: set[str] = set()
        for rank, ((doc, _), score) in enumerate(zip(ranking, scores, strict=True), start=1):
            if doc in seen:
                raise TrecFormatError(f"document {doc!r} ranked twice for query {query!r}")
            seen.add(doc)
            lines.append(
                f"{_check_id('query', query)} Q0 {_check_id('doc', doc)} {rank} {score:.6f} "
                f"{system}\n"
            )
    return "".join(lines)


def read_qrels(path: Path) -> Qrels:
    try:
        _check_lines(path, "qrels", QRELS_FIELDS)
    except (OSError, UnicodeDecodeError) as exc:
        raise TrecFormatError(f"{path}: cannot read: {exc}") from exc
    try:
        with path.open(encoding="utf-8") as f:
            parsed = pytrec_eval.parse_qrel(f)
    except (OSError, ValueError, AssertionError) as exc:
        raise TrecFormatError(f"{path}: not a qrels file ({exc or 'a document twice'})") from exc
    return {q: dict(docs) for q, docs in parsed.items()}


RUN_FIELDS = "query Q0 doc rank score system"
QRELS_FIELDS = "query 0 doc relevance"


def _check_lines(path: Path, kind: str, fields: str) -> None:
    """Name the first line that does not have the format's fields (pytrec_eval's own error
    is a bare unpacking message)."""
    expected = len(fields.split())
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            parts = line.split()
            if not parts:
                continue
            problem = None
            if len(parts) != expected:
                problem = f"{len(parts)} field(s)"
            elif kind == "run":
                try:
                    int(parts[3])
                    float(parts[4])
                except ValueError:
                    problem = "a rank that is not an integer or a score that is not a number"
            if problem is not None:
                raise TrecFormatError(
                    f"{path}: line {number}: not a {kind} file line: expected the {expected} "
                    f"fields `{fields}`, got {problem}"
                )


def read_run(path: Path) -> Run:
    try:
        _check_lines(path, "run", RUN_FIELDS)
    except (OSError, UnicodeDecodeError) as exc:
        raise TrecFormatError(f"{path}: cannot read: {exc}") from exc
    try:
        with path.open(encoding="utf-8") as f:
            parsed = pytrec_eval.parse_run(f)
    except (OSError, ValueError, AssertionError) as exc:
        raise TrecFormatError(f"{path}: not a run file ({exc or 'a document twice'})") from exc
    return {q: dict(docs) for q, docs in parsed.items()}


def evaluate(
    qrels: Qrels,
    run: Run,
    measures: Mapping[str, str] = DEFAULT_MEASURES,
    relevance_level: int = 1,
) -> dict[str, float]:
    """Mean of each measure over the evaluated queries (relevance_level: trec_eval -l)."""
    evaluator = pytrec_eval.RelevanceEvaluator(
        qrels, set(measures.values()), relevance_level=relevance_level
    )
    per_query = evaluator.evaluate(run)
    if not per_query:
        return {name: 0.0 for name in measures}
    return {name: sum(q[name] for q in per_query.values()) / len(per_query) for name in measures}


@dataclass(frozen=True)
class Leaderboard:
    systems: tuple[str, ...]
    scores: dict[str, dict[str, float]]  # system -> measure -> mean
    reference: dict[str, dict[str, float]] | None  # same under reference qrels
    correlations: dict[str, Correlation]  # measure -> agreement with the reference


def leaderboard(
    qrels: Qrels,
    runs: Mapping[str, Run],
    *,
    measures: Mapping[str, str] = DEFAULT_MEASURES,
    relevance_level: int = 1,
    reference_qrels: Qrels | None = None,
    reference_ranking: Sequence[str] | None = None,
    reference_relevance_level: int = 1,
) -> Leaderboard:
    """Every run scored under ``qrels``, and per measure the rank correlation of that
    leaderboard with the reference (reference qrels, else a ranking best first)."""
    systems = tuple(runs)
    scores = {s: evaluate(qrels, runs[s], measures, relevance_level) for s in systems}
    reference = None
    correlations: dict[str, Correlation] = {}
    if reference_qrels is not None:
        reference = {
            s: evaluate(reference_qrels, runs[s], measures, reference_relevance_level)
            for s in systems
        }
        for m in measures:
            correlations[m] = rank_correlation(
                [scores[s][m] for s in systems], [reference[s][m] for s in systems]
            )
    elif reference_ranking is not None:
        missing = [s for s in systems if s not in reference_ranking]
        if missing:
            raise TrecFormatError(f"systems missing from the reference ranking: {missing}")
        # Best first: a higher reference score for an earlier position.
        position = {s: len(reference_ranking) - i for i, s in enumerate(reference_ranking)}
        for m in measures:
            correlations[m] = rank_correlation(
                [scores[s][m] for s in systems], [float(position[s]) for s in systems]
            )
    return Leaderboard(systems, scores, reference, correlations)


def read_ranking(lines: Iterable[str]) -> list[str]:
    """A reference ranking: one system name per line, best first (# comments, blanks skipped)."""
    ranking = []
    for line in lines:
        name = line.split("#", 1)[0].strip()
        if name:
            ranking.append(name)
    if len(set(ranking)) != len(ranking):
        raise TrecFormatError("a system appears twice in the reference ranking")
    return ranking


__all__ = [
    "DEFAULT_MEASURES",
    "Leaderboard",
    "Qrels",
    "Run",
    "TrecFormatError",
    "evaluate",
    "format_qrels",
    "format_run",
    "leaderboard",
    "read_qrels",
    "read_ranking",
    "read_run",
]
