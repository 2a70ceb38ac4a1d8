"""The stored turns the LLM judge judged, with what the cascade needs to measure the cheap look
against it: the turn event (for a cheap look not stored), the cell and probability it was drawn
with (null under the uniform strategy) and the newest verdict's band. Read-only.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from monitor.storage.store import Store
from monitor.storage.tables import judgments, turns, verdicts

HEURISTIC_KIND = "heuristic"
_IN_CHUNK = 500


@dataclass(frozen=True)
class JudgedTurn:
    event_id: str
    assistant: str
    event: dict[str, Any]
    inclusion_probability: float | None
    cheap_cell: str | None
    llm_band: str


def _newest() -> sa.ColumnElement[bool]:
    newer = sa.alias(verdicts, "newer")
    return ~(
        sa.select(newer.c.id)
        .where(newer.c.event_id == verdicts.c.event_id, newer.c.id > verdicts.c.id)
        .exists()
    )


def llm_judged(store: Store, *, limit: int, assistant: str | None = None) -> list[JudgedTurn]:
    """The ``limit`` newest turns whose newest verdict is ok and came from an LLM judge (a
    verdict of the offline judge alone is the cheap look itself, not a pair)."""
    if limit < 1:
        raise ValueError("limit must be >= 1")
    query = (
        sa.select(
            verdicts.c.id,
            turns.c.event_id,
            turns.c.assistant_name,
            turns.c.event,
            turns.c.inclusion_probability,
            turns.c.cheap_cell,
            verdicts.c.final_band,
        )
        .join(turns, turns.c.event_id == verdicts.c.event_id)
        .where(verdicts.c.status == "ok", verdicts.c.final_band.is_not(None), _newest())
        .order_by(verdicts.c.stored_at.desc(), verdicts.c.id.desc())
    )
    if assistant is not None:
        query = query.where(turns.c.assistant_name == assistant)
    out: list[JudgedTurn] = []
    with store.transaction(write=False, action="reading judged turns") as conn:
        for batch in _batches(conn.execute(query.limit(limit * 4)), limit):
            ids = [row.id for row in batch]
            kinds: dict[int, set[str]] = {}
            for start in range(0, len(ids), _IN_CHUNK):
                chunk = ids[start : start + _IN_CHUNK]
                for vid, kind in conn.execute(
                    sa.select(judgments.c.verdict_id, judgments.c.kind).where(
                        judgments.c.verdict_id.in_(chunk)
                    )
                ):
                    kinds.setdefault(int(vid), set()).add(str(kind))
            for row in batch:
                if not kinds.get(int(row.id), set()) - {HEURISTIC_KIND}:
                    continue
                out.append(
                    JudgedTurn(
                        str(row.event_id),
                        str(row.assistant_name),
                        dict(row.event),
                        None
                        if row.inclusion_probability is None
                        else float(row.inclusion_probability),
                        row.cheap_cell,
                        str(row.final_band),
                    )
                )
                if len(out) >= limit:
                    return out
    return out


def _batches(rows: Any, size: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch
