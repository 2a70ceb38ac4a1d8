"""SQL for drift detection: the samples of a time window, and the results table.

The turn's input fields (case.product, case.environment, labels, contexts, answer) are not
columns of their own: they are read from the stored event document with the database's JSON
functions, so only a few scalars per turn leave the database (never the contexts' text). Each
turn is paired with its newest verdict (the current judge configuration's, after a change).
Windows are on the event's own timestamp (``turns.event_timestamp``, indexed with the
assistant's name), so a replayed backlog lands in the hour it happened, not the hour it was read.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from monitor.schema.turn import METRICS, TurnSample
from monitor.storage.retained_turns import judged_for_feedback
from monitor.storage.store import Store
from monitor.storage.tables import drift_results, turns, verdicts

_STREAM_ROWS = 2_000

# Highest context score of a turn (NULL when no context carries a score).
_TOP_SCORE_SQL = {
    "sqlite": (
        "(SELECT max(CAST(json_extract(c.value, '$.score') AS REAL)) "
        "FROM json_each(turns.event, '$.contexts') AS c)"
    ),
    "postgresql": (
        "(SELECT max((c.value ->> 'score')::float8) "
        "FROM jsonb_array_elements(turns.event -> 'contexts') AS c(value))"
    ),
}


def _contexts_count(dialect: str) -> sa.ColumnElement[Any]:
    if dialect == "postgresql":
        return sa.func.jsonb_array_length(turns.c.event["contexts"])
    return sa.func.json_array_length(turns.c.event, "$.contexts")


def _sample_query(dialect: str, labels: Sequence[str]) -> sa.Select[Any]:
    # The newest verdict of the turn: no verdict of the same event with a higher id. An
    # anti-join, not "id = (SELECT max(id) ...)": PostgreSQL may plan that max as a backward scan
    # of the primary key per turn, quadratic in the table size.
    newer = sa.alias(verdicts, "newer")
    superseded = (
        sa.select(newer.c.id)
        .where(newer.c.event_id == verdicts.c.event_id, newer.c.id > verdicts.c.id)
        .exists()
    )
    event = turns.c.event
    columns: list[sa.ColumnElement[Any]] = [
        verdicts.c.status,
        verdicts.c.s_final,
        verdicts.c.turn_band,
        *(verdicts.c.metric_bands[m].as_string().label(f"band_{m}") for m in METRICS),
        event[("case", "product")].as_string().label("product"),
        event[("case", "environment")].as_string().label("environment"),
        *(event[("labels", key)].as_string().label(f"label_{i}") for i, key in enumerate(labels)),
        sa.func.coalesce(_contexts_count(dialect), 0).label("contexts_count"),
        sa.literal_column(_TOP_SCORE_SQL[dialect], sa.Float).label("retrieval_score"),
        sa.func.coalesce(sa.func.length(event["answer"].as_string()), 0).label("answer_length"),
        turns.c.inclusion_probability,
    ]
    return sa.select(*columns).select_from(
        turns.outerjoin(verdicts, sa.and_(verdicts.c.event_id == turns.c.event_id, ~superseded))
    )


def _weight(probability: float | None) -> float:
    # A cascade draw stands for 1/π turns; a uniform draw or a rule's turn (NULL) for one.
    return 1.0 if probability is None else 1.0 / float(probability)


def window_samples(
    store: Store,
    assistant: str,
    start: datetime,
    end: datetime,
    labels: Sequence[str] = (),
) -> Iterator[TurnSample]:
    """The turns of ``assistant`` whose event timestamp is in [start, end), streamed, each with
    its weight 1/π (1 when drawn uniformly or by a rule); turns judged because a user
    complained are not of the sample and left out."""
    query = _sample_query(store.dialect, labels).where(
        turns.c.assistant_name == assistant,
        turns.c.event_timestamp >= start,
        turns.c.event_timestamp < end,
        ~judged_for_feedback(turns.c.event_id),
    )
    with store.transaction(write=False) as conn:
        result = conn.execution_options(stream_results=True, yield_per=_STREAM_ROWS).execute(query)
        for row in result:
            m = row._mapping
            yield TurnSample(
                status=m["status"],
                s_final=m["s_final"],
                turn_band=m["turn_band"],
                metric_bands={
                    metric: m[f"band_{metric}"]
                    for metric in METRICS
                    if m[f"band_{metric}"] is not None
                },
                product=m["product"],
                environment=m["environment"],
                labels={key: m[f"label_{i}"] for i, key in enumerate(labels)},
                contexts_count=int(m["contexts_count"]),
                retrieval_score=m["retrieval_score"],
                answer_length=int(m["answer_length"]),
                weight=_weight(m["inclusion_probability"]),
            )


def assistants_between(store: Store, start: datetime, end: datetime) -> list[str]:
    """Assistant names with at least one turn whose event timestamp is in [start, end)."""
    query = (
        sa.select(turns.c.assistant_name)
        .where(turns.c.event_timestamp >= start, turns.c.event_timestamp < end)
        .distinct()
        .order_by(turns.c.assistant_name)
    )
    with store.transaction(write=False) as conn:
        return [str(name) for name in conn.scalars(query)]


def save_results(
    store: Store, rows: Iterable[Mapping[str, Any]], *, prune_before: datetime | None = None
) -> int:
    """Insert one run's result rows (columns of ``drift_results``) in one transaction, and
    delete rows of runs before ``prune_before``. Returns the rows inserted."""
    batch = [dict(r) for r in rows]
    with store.transaction(write=True) as conn:
        if batch:
            conn.execute(sa.insert(drift_results), batch)
        if prune_before is not None:
            conn.execute(sa.delete(drift_results).where(drift_results.c.run_at < prune_before))
    return len(batch)


def latest_results(store: Store, assistant: str | None = None) -> list[dict[str, Any]]:
    """The rows of the newest stored run (of ``assistant``, if given), in insertion order."""
    with store.transaction(write=False) as conn:
        return _latest(conn, assistant)


def _latest(conn: Connection, assistant: str | None) -> list[dict[str, Any]]:
    last = sa.select(sa.func.max(drift_results.c.run_at))
    if assistant is not None:
        last = last.where(drift_results.c.assistant == assistant)
    run_at = conn.scalar(last)
    if run_at is None:
        return []
    query = sa.select(drift_results).where(drift_results.c.run_at == run_at)
    if assistant is not None:
        query = query.where(drift_results.c.assistant == assistant)
    return [dict(r._mapping) for r in conn.execute(query.order_by(drift_results.c.id))]
