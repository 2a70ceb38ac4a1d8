"""The ``storage`` section: the SQL store and how long it keeps rows. Read by
``monitor/storage`` and the retention job.
"""

from __future__ import annotations

from pydantic import Field

from monitor.config.section import Section


class StorageConfig(Section):
    """The SQL store of turns, verdicts and judgments."""

    url: str = Field(
        default="sqlite:///casewatch.db",
        description="SQLAlchemy URL: sqlite:///FILE or postgresql+psycopg://user@host/db.",
    )
    retention_days: float | None = Field(
        default=30, gt=0, description="Rows older than this are purged (null: kept)."
    )
    retention_interval_seconds: float = Field(
        default=3600, gt=0, description="How often the retention job purges old rows."
    )
