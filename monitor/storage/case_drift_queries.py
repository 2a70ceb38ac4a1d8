"""SQL for case drift: an assistant's ok case verdicts judged in a window, streamed into
``monitor.stats.case_drift.CaseWindowSamples``."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa

from monitor.stats.case_drift import CaseWindowSamples
from monitor.storage.store import Store
from monitor.storage.tables import case_verdicts

_STREAM_ROWS = 2_000


def case_window(store: Store, assistant: str, start: datetime, end: datetime) -> CaseWindowSamples:
    """The ok case verdicts of ``assistant`` judged in [start, end)."""
    samples = CaseWindowSamples()
    if not start < end:
        return samples
    query = sa.select(
        case_verdicts.c.case_score,
        case_verdicts.c.case_band,
        case_verdicts.c.resolution_outcome,
        case_verdicts.c.metric_bands,
    ).where(
        case_verdicts.c.assistant_name == assistant,
        case_verdicts.c.status == "ok",
        case_verdicts.c.judged_at >= start,
        case_verdicts.c.judged_at < end,
    )
    with store.transaction(write=False, action="reading a case drift window") as conn:
        result = conn.execution_options(stream_results=True, yield_per=_STREAM_ROWS).execute(query)
        for score, band, outcome, bands in result:
            samples.add(
                None if score is None else float(score),
                None if band is None else str(band),
                None if outcome is None else str(outcome),
                {str(m): str(b) for m, b in (bands or {}).items()},
            )
    return samples
