"""SQL tables (SQLAlchemy Core) for turns, verdicts and judgments, and the rows models map to.

These describe the schema the Alembic migrations in ``monitor/storage/migrations/versions`` build;
``tests/monitor/storage/test_migrations.py`` runs ``alembic check`` so the two cannot drift apart.
Migrations never import this module: a migration must keep meaning what it meant when written.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Dialect

from monitor.schema.turn import Judgment, TurnEvent, Verdict

# Deterministic constraint names, so later migrations can drop or alter them by name on every
# backend (SQLite batch mode needs names to recreate a table).
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)

# JSONB on PostgreSQL (compact, queryable by operators); JSON text elsewhere.
JSONDoc = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


class UTCDateTime(sa.TypeDecorator[datetime]):
    """A timezone-aware UTC timestamp on every backend.

    PostgreSQL keeps the offset natively; SQLite stores text without one, so values are
    normalised to UTC on the way in and tagged UTC on the way out. Naive input is taken as UTC
    (producers that omit the offset almost always mean UTC).
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        value = value.astimezone(UTC)
        return value if dialect.name == "postgresql" else value.replace(tzinfo=None)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if not isinstance(value, datetime):
            raise TypeError(f"expected a datetime from the database, got {type(value).__name__}")
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


turns = sa.Table(
    "turns",
    metadata,
    sa.Column("event_id", sa.String(256), primary_key=True),
    sa.Column("conversation_id", sa.String(256), nullable=False),
    sa.Column("turn_index", sa.Integer, nullable=False),
    sa.Column("assistant_name", sa.String(256), nullable=False),
    sa.Column("assistant_version", sa.String(128), nullable=False),
    sa.Column("assistant_model", sa.String(256), nullable=False),
    sa.Column("event_timestamp", UTCDateTime, nullable=False),
    # The full event as received, for audit; retention deletes it with the row.
    sa.Column("event", JSONDoc, nullable=False),
    sa.Column("stored_at", UTCDateTime, nullable=False),
    # The evaluated span, for turns read from OpenTelemetry traces (migration 0009).
    sa.Column("trace_id", sa.String(32)),
    sa.Column("span_id", sa.String(16)),
    # The cascade (migration 0014): the probability the turn was drawn for the LLM judge with,
    # and the cheap look's cell it was drawn from (null: drawn uniformly, weight 1).
    sa.Column("inclusion_probability", sa.Float),
    sa.Column("cheap_cell", sa.String(16)),
    sa.Index(None, "assistant_name", "event_timestamp"),
    sa.Index(None, "conversation_id"),
    sa.Index(None, "stored_at"),
    sa.Index(None, "trace_id"),
)

verdicts = sa.Table(
    "verdicts",
    metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True),
    sa.Column("event_id", sa.String(256), sa.ForeignKey("turns.event_id"), nullable=False),
    sa.Column("judge_config_hash", sa.String(128), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("failure_reason", sa.Text),
    sa.Column("weight_profile", sa.Text, nullable=False),
    sa.Column("s_final", sa.Float),
    sa.Column("final_band", sa.String(16)),
    sa.Column("turn_band", sa.String(16)),
    sa.Column("metric_scores", JSONDoc, nullable=False),
    sa.Column("metric_bands", JSONDoc, nullable=False),
    sa.Column("arbitrated", sa.Boolean, nullable=False),
    sa.Column("arbitration_trigger", sa.Text),
    sa.Column("stored_at", UTCDateTime, nullable=False, index=True),
    # When the detection job fed it to the detectors, in the transaction saving their state
    # (NULL: not yet; migration 0010): each verdict is observed once, whenever it commits.
    sa.Column("observed_at", UTCDateTime),
    # The idempotency key: a replayed event under the same judge configuration is a no-op.
    sa.UniqueConstraint("event_id", "judge_config_hash"),
    # The verdicts the detectors have not observed yet: few, however large the table.
    sa.Index(
        "ix_verdicts_unobserved",
        "id",
        sqlite_where=sa.text("observed_at IS NULL"),
        postgresql_where=sa.text("observed_at IS NULL"),
    ),
    sa.CheckConstraint("status IN ('ok', 'judge_failed')", name="status"),
)

judgments = sa.Table(
    "judgments",
    metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True),
    sa.Column(
        "verdict_id",
        sa.BigInteger().with_variant(sa.Integer, "sqlite"),
        sa.ForeignKey("verdicts.id", ondelete="CASCADE"),
        nullable=False,
        index=True,
    ),
    sa.Column("judge", sa.Text, nullable=False),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("model", sa.Text, nullable=False),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("failure_reason", sa.Text),
    sa.Column("failure_detail", sa.Text),
    # {metric: {score, justification}}; NULL when the judge failed.
    sa.Column("scores", JSONDoc),
    sa.Column("raw_output", sa.Text),
    sa.Column("prompt_version", sa.Text, nullable=False),
    sa.Column("prompt_hash", sa.Text, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("input_tokens", sa.Integer, nullable=False),
    sa.Column("output_tokens", sa.Integer, nullable=False),
    sa.Column("cost_usd", sa.Float, nullable=False),
    sa.Column("latency_seconds", sa.Float, nullable=False),
)

# One row per scheduled job: the replica holding an unexpired lease is the one that runs it.
job_leases = sa.Table(
    "job_leases",
    metadata,
    sa.Column("job", sa.String(64), primary_key=True),
    sa.Column("owner", sa.String(256), nullable=False),
    sa.Column("acquired_at", UTCDateTime, nullable=False),
    sa.Column("expires_at", UTCDateTime, nullable=False),
)

# Rubric grading of live answers (Pencils Down): one row per (turn, rubric entry, grader
# configuration), with every question's grade and the extracted answer for audit. Deleted with
# its turn (retention).
rubric_gradings = sa.Table(
    "rubric_gradings",
    metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True),
    sa.Column(
        "event_id",
        sa.String(256),
        sa.ForeignKey("turns.event_id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("entry_id", sa.String(128), nullable=False),
    sa.Column("grader", sa.String(512), nullable=False),
    sa.Column("assistant_name", sa.String(256), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("failure_reason", sa.Text),
    sa.Column("reviewed", sa.Boolean, nullable=False),
    sa.Column("coverage", sa.Float),
    sa.Column("covered_grade", sa.Integer, nullable=False),
    # [{question, grade, answer, path, passage}]; NULL when grading failed.
    sa.Column("grades", JSONDoc),
    sa.Column("path_counts", JSONDoc, nullable=False),
    sa.Column("passages", sa.Integer, nullable=False),
    sa.Column("requests", sa.Integer, nullable=False),
    sa.Column("input_tokens", sa.Integer, nullable=False),
    sa.Column("output_tokens", sa.Integer, nullable=False),
    sa.Column("cost_usd", sa.Float, nullable=False),
    sa.Column("graded_at", UTCDateTime, nullable=False, index=True),
    sa.UniqueConstraint("event_id", "entry_id", "grader"),
    sa.CheckConstraint("status IN ('ok', 'failed')", name="status"),
)

# The audit trail that `casewatch db` counts and retention purges.
# Pairwise matches of an assistant against a baseline tier (DICE), one row per probe and
# tier per run, with both judged orders' raw outputs (analysis, decision, top logprobs).
matches = sa.Table(
    "matches",
    metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True),
    sa.Column("run_id", sa.String(64), nullable=False, index=True),
    sa.Column("assistant", sa.String(256), nullable=False),
    sa.Column("opponent", sa.String(64), nullable=False),  # the tier: high | medium | low
    sa.Column("probe_id", sa.String(256), nullable=False),
    sa.Column("source", sa.String(16), nullable=False),  # endpoint | turns
    sa.Column("event_id", sa.String(256)),  # the stored turn the answer came from, if any
    sa.Column("answer", sa.Text, nullable=False),
    sa.Column("judge", sa.Text, nullable=False),
    sa.Column("model", sa.Text, nullable=False),
    sa.Column("prompt_version", sa.Text, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("failure_reason", sa.Text),
    sa.Column("score", sa.Float),  # the assistant's score, averaged over both orders
    sa.Column("outcome", sa.String(8)),  # win | tie | loss
    sa.Column("disagreement", sa.Float),  # |score in one order - score in the other|
    sa.Column("forward", JSONDoc, nullable=False),  # assistant shown as A
    sa.Column("swapped", JSONDoc),  # assistant shown as B; NULL when not swapped
    sa.Column("cost_usd", sa.Float, nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Index(None, "assistant", "created_at"),
    sa.CheckConstraint("status IN ('ok', 'judge_failed')", name="status"),
)

AUDIT_TABLES: tuple[sa.Table, ...] = (turns, verdicts, judgments)
# Everything the migrations create (other features append their tables here).
TABLES: tuple[sa.Table, ...] = (*AUDIT_TABLES, job_leases)
TABLES = (*TABLES, rubric_gradings)
TABLES = (*TABLES, matches)

# Drift results (monitor/jobs/drift.py): one row per (run, assistant, signal); the gauges show
# the last run, this table the history. Pruned by the drift job after storage.retention_days.
drift_results = sa.Table(
    "drift_results",
    metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True),
    sa.Column("run_at", UTCDateTime, nullable=False, index=True),
    sa.Column("assistant", sa.String(256), nullable=False),
    sa.Column("signal", sa.String(64), nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("test", sa.String(32), nullable=False),
    sa.Column("status", sa.String(24), nullable=False),
    sa.Column("statistic", sa.Float),
    sa.Column("p_value", sa.Float),
    sa.Column("q_value", sa.Float),
    sa.Column("effect", sa.Float),
    sa.Column("effect_name", sa.String(32), nullable=False),
    sa.Column("min_effect", sa.Float, nullable=False),
    sa.Column("shift", sa.Float),
    sa.Column("detected", sa.Boolean, nullable=False),
    sa.Column("recent_n", sa.Integer, nullable=False),
    sa.Column("reference_n", sa.Integer, nullable=False),
    sa.Column("recent_start", UTCDateTime, nullable=False),
    sa.Column("recent_end", UTCDateTime, nullable=False),
    sa.Column("reference_start", UTCDateTime, nullable=False),
    sa.Column("reference_end", UTCDateTime, nullable=False),
    sa.Column("details", JSONDoc, nullable=False),
    sa.Column("note", sa.Text, nullable=False),
    sa.Index(None, "assistant", "signal", "run_at"),
    sa.CheckConstraint("status IN ('ok', 'insufficient_data')", name="status"),
)
TABLES = (*TABLES, drift_results)

# Human labels: a labelling batch is a uniform random sample of judged turns, recorded
# with its design (frame, seed, population) so estimates from it know how it was drawn; its
# items are the drawn turns, labels the bands people gave them. Kept when a turn is purged
# (no foreign key to turns): labels are expensive and estimates still need their judge bands.
label_batches = sa.Table(
    "label_batches",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("assistant", sa.String(256), nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("seed", sa.BigInteger, nullable=False),
    sa.Column("frame_start", UTCDateTime),
    sa.Column("frame_end", UTCDateTime),
    sa.Column("population", sa.Integer, nullable=False),  # judged turns in the frame
    sa.Column("size", sa.Integer, nullable=False),  # turns drawn
    # uniform | uncertain: how the turns were drawn (uncertain: with unequal probabilities).
    sa.Column("strategy", sa.String(16), nullable=False, server_default="uniform"),
)
label_batch_items = sa.Table(
    "label_batch_items",
    metadata,
    sa.Column(
        "batch_id",
        sa.String(64),
        sa.ForeignKey("label_batches.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("event_id", sa.String(256), primary_key=True),
    sa.Column("position", sa.Integer, nullable=False),
    # The judge's bands when drawn ({metric|turn_band: band}): agreement and estimates compare
    # people with what the judge said then, even after a re-judge or retention.
    sa.Column("judge_bands", JSONDoc, nullable=False),
    # The probability this turn had of being drawn: estimates weigh its label by the inverse.
    sa.Column("inclusion_probability", sa.Float),
)
human_labels = sa.Table(
    "human_labels",
    metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True),
    sa.Column(
        "batch_id",
        sa.String(64),
        sa.ForeignKey("label_batches.id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("event_id", sa.String(256), nullable=False),
    sa.Column("metric", sa.String(64), nullable=False),  # a metric name or "turn_band"
    sa.Column("band", sa.String(16), nullable=False),
    sa.Column("labeller", sa.String(256), nullable=False),
    sa.Column("labelled_at", UTCDateTime, nullable=False),
    sa.Column("imported_at", UTCDateTime, nullable=False),
    sa.UniqueConstraint("batch_id", "event_id", "metric", "labeller"),
    sa.CheckConstraint("band IN ('severe', 'moderate', 'minor', 'none')", name="band"),
)
TABLES = (*TABLES, label_batches, label_batch_items, human_labels)

# The judge canary: one row per judge per canary run, with the canary detector's state after
# it (the newest ok row of a judge configuration carries its state forward).
judge_canary_runs = sa.Table(
    "judge_canary_runs",
    metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True),
    sa.Column("judge", sa.String(256), nullable=False),
    sa.Column("config_hash", sa.String(128), nullable=False),
    sa.Column("run_at", UTCDateTime, nullable=False, index=True),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("failure_reason", sa.Text),
    sa.Column("turns", sa.Integer, nullable=False),
    sa.Column("agreement", sa.Float),
    sa.Column("mean_score", sa.Float),
    sa.Column("score_shift", sa.Float),
    sa.Column("severe_calls", sa.Integer),
    sa.Column("armed", sa.Boolean, nullable=False),
    sa.Column("alarm", sa.Boolean, nullable=False),
    sa.Column("statistic", sa.Float, nullable=False),
    sa.Column("state", JSONDoc, nullable=False),
    sa.Index("ix_judge_canary_runs_judge", "judge", "config_hash", "run_at"),
    sa.CheckConstraint("status IN ('ok', 'failed')", name="status"),
)
TABLES = (*TABLES, judge_canary_runs)


# ---------------------------------------------------------------- rows from models (pure)


def turn_row(turn: TurnEvent, stored_at: datetime) -> dict[str, Any]:
    return {
        "event_id": turn.event_id,
        "conversation_id": turn.conversation_id,
        "turn_index": turn.turn_index,
        "assistant_name": turn.assistant.name,
        "assistant_version": turn.assistant.version,
        "assistant_model": turn.assistant.model,
        "event_timestamp": turn.timestamp,
        "event": turn.model_dump(mode="json"),
        "stored_at": stored_at,
        "trace_id": turn.trace_id,
        "span_id": turn.span_id,
    }


def verdict_row(verdict: Verdict, stored_at: datetime) -> dict[str, Any]:
    return {
        "event_id": verdict.event_id,
        "judge_config_hash": verdict.judge_config_hash,
        "status": verdict.status,
        "failure_reason": verdict.failure_reason,
        "weight_profile": verdict.weight_profile,
        "s_final": verdict.s_final,
        "final_band": str(verdict.final_band) if verdict.final_band else None,
        "turn_band": str(verdict.turn_band) if verdict.turn_band else None,
        "metric_scores": dict(verdict.metric_scores),
        # str(StrEnum) is its value, and much cheaper than .value on Python 3.11.
        "metric_bands": {m: str(b) for m, b in verdict.metric_bands.items()},
        "arbitrated": verdict.arbitrated,
        "arbitration_trigger": verdict.arbitration_trigger,
        "stored_at": stored_at,
    }


def judgment_row(judgment: Judgment, verdict_id: int) -> dict[str, Any]:
    return {
        "verdict_id": verdict_id,
        "judge": judgment.judge,
        "kind": judgment.kind,
        "model": judgment.model,
        "role": judgment.role,
        "status": judgment.status,
        "failure_reason": judgment.failure_reason,
        "failure_detail": judgment.failure_detail,
        "scores": judgment.scores.model_dump(mode="json") if judgment.scores else None,
        "raw_output": judgment.raw_output,
        "prompt_version": judgment.prompt_version,
        "prompt_hash": judgment.prompt_hash,
        "attempts": judgment.attempts,
        "input_tokens": judgment.input_tokens,
        "output_tokens": judgment.output_tokens,
        "cost_usd": judgment.cost_usd,
        "latency_seconds": judgment.latency_seconds,
    }


# --- detection: the sequential detectors' state and their cursor over verdicts ---
# One row per (assistant, signal): the CUSUMs' statistics, baseline and alarm, so a restart or a
# lease moving to another replica continues them. Written with the cursor in one transaction.
detector_states = sa.Table(
    "detector_states",
    metadata,
    sa.Column("assistant", sa.String(256), primary_key=True),
    sa.Column("signal", sa.String(64), primary_key=True),
    sa.Column("armed", sa.Boolean, nullable=False),
    sa.Column("baseline_rate", sa.Float),
    sa.Column("baseline_source", sa.String(16), nullable=False),  # reference | pinned | none
    sa.Column("reference_turns", sa.Integer, nullable=False),
    sa.Column("turn_rate", sa.Float),  # judged turns per second in the reference window
    sa.Column("statistic", sa.Float, nullable=False),  # max over shifts of S / h
    sa.Column("alarm", sa.Boolean, nullable=False),
    sa.Column("alarm_at", UTCDateTime),
    sa.Column("change_point", UTCDateTime),
    sa.Column("rate_since", sa.Float),
    sa.Column("observations", sa.BigInteger, nullable=False),
    sa.Column("calibrated_at", UTCDateTime),
    # {calibration: {rates, thresholds}, detector: Detector.to_dict()}
    sa.Column("state", JSONDoc, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=False),
)

# The detection job's run marker: present once it ran (what was stored before its first run is
# history), ``position`` the time of its last save, ``generation`` bumped by every save so a
# run saves only over the state it read (the verdicts themselves carry observed_at).
detector_cursor = sa.Table(
    "detector_cursor",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("position", UTCDateTime, nullable=False),
    sa.Column("generation", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("updated_at", UTCDateTime, nullable=False),
)

TABLES = (*TABLES, detector_states, detector_cursor)
# --- end detection ---

# --- failure modes (migration 0013): failed turns grouped into recurring causes ---
# One row per (assistant, mode): its signature (distinctive terms, failing metrics) that the next
# run recognises it by, and the figures of the newest run that found it (``present``).
failure_modes = sa.Table(
    "failure_modes",
    metadata,
    sa.Column("assistant", sa.String(256), primary_key=True),
    sa.Column("mode_id", sa.String(32), primary_key=True),
    sa.Column("label", sa.Text, nullable=False),
    sa.Column("terms", JSONDoc, nullable=False),  # {term: mean weight}
    sa.Column("metrics", JSONDoc, nullable=False),  # [metric], most frequent first
    sa.Column("first_seen", UTCDateTime, nullable=False),
    sa.Column("last_seen", UTCDateTime, nullable=False),  # its newest turn
    sa.Column("updated_at", UTCDateTime, nullable=False),  # the newest run that found it
    sa.Column("present", sa.Boolean, nullable=False),  # found by the assistant's newest run
    sa.Column("size", sa.Integer, nullable=False),
    sa.Column("share", sa.Float, nullable=False),
    sa.Column("recent", sa.Integer, nullable=False),
    sa.Column("earlier", sa.Integer, nullable=False),
    sa.Column("trend", sa.Float),  # recent share minus earlier share
    sa.Column("new", sa.Boolean, nullable=False),
    sa.Column("growing", sa.Boolean, nullable=False),
    sa.Column("examples", JSONDoc, nullable=False),  # [event_id], newest first
    # What the mode groups (migration 0017): failed turns, or failed cases (conversation ids).
    sa.Column("unit", sa.String(8), nullable=False, server_default="turn"),
    sa.CheckConstraint("unit IN ('turn', 'case')", name="unit"),
)
# Which turn the newest run put in which mode; replaced whole per assistant by each run (no
# foreign key: a purged turn simply drops out of the join that reads it).
failure_mode_members = sa.Table(
    "failure_mode_members",
    metadata,
    sa.Column("assistant", sa.String(256), primary_key=True),
    # turn: event_id is a turn's; case: the case's conversation id (migration 0017).
    sa.Column("unit", sa.String(8), primary_key=True, server_default="turn"),
    sa.Column("event_id", sa.String(256), primary_key=True),
    sa.Column("mode_id", sa.String(32), nullable=False),
    sa.Column("event_timestamp", UTCDateTime, nullable=False),  # a case's: when it was judged
    sa.Index(None, "assistant", "unit", "mode_id", "event_timestamp"),
    sa.CheckConstraint("unit IN ('turn', 'case')", name="unit"),
)
# One row per run and assistant, the runs with too few failed turns to group included.
failure_mode_runs = sa.Table(
    "failure_mode_runs",
    metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True),
    sa.Column("run_at", UTCDateTime, nullable=False),
    sa.Column("assistant", sa.String(256), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("turns", sa.Integer, nullable=False),
    sa.Column("recent_turns", sa.Integer, nullable=False),
    sa.Column("grouped", sa.Integer, nullable=False),
    sa.Column("unsorted", sa.Integer, nullable=False),
    sa.Column("over_cap", sa.Integer, nullable=False),  # newest turns past the cap, not read
    sa.Column("modes", sa.Integer, nullable=False),
    sa.Column("emerging", sa.Integer, nullable=False),
    sa.Column("note", sa.Text, nullable=False),
    sa.Column("unit", sa.String(8), nullable=False, server_default="turn"),  # turn | case
    sa.Index(None, "assistant", "run_at"),
    sa.CheckConstraint("status IN ('grouped', 'too_few_turns')", name="status"),
    sa.CheckConstraint("unit IN ('turn', 'case')", name="unit"),
)
TABLES = (*TABLES, failure_modes, failure_mode_members, failure_mode_runs)
# --- end failure modes ---

# --- cases (migration 0011): conversations judged as a whole ---
# One row per case verdict. A case is one assistant's side of one conversation (two assistants
# answering the same conversation id, as an A/B pair does, are two cases). (assistant_name,
# conversation_id, version) is unique, so a second write of a
# version, by a replica whose lease lapsed or a run replayed after a SIGKILL, is refused by
# the database whatever the code above it did. The newest version is the current verdict; a
# case that resumes (or whose judge failed) is judged again as the next version, and every
# earlier one is kept. No foreign key to turns: a case verdict outlives retention's purge.
case_verdicts = sa.Table(
    "case_verdicts",
    metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True),
    sa.Column("conversation_id", sa.String(256), nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("assistant_name", sa.String(256), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("failure_reason", sa.Text),
    sa.Column("failures_in_row", sa.Integer, nullable=False),
    sa.Column("close_reason", sa.String(16), nullable=False),
    sa.Column("judge_config_hash", sa.String(128), nullable=False),
    sa.Column("turns", sa.Integer, nullable=False),
    sa.Column("turns_cut", sa.Integer, nullable=False),
    # The newest stored_at of the turns it covered: a turn stored later resumes the case.
    sa.Column("covered_until", UTCDateTime, nullable=False),
    sa.Column("case_score", sa.Float),
    sa.Column("case_band", sa.String(16)),
    sa.Column("resolution_outcome", sa.String(16)),
    sa.Column("metric_scores", JSONDoc, nullable=False),
    sa.Column("metric_bands", JSONDoc, nullable=False),
    sa.Column("turn_mean_s_final", sa.Float),
    sa.Column("arbitrated", sa.Boolean, nullable=False),
    sa.Column("arbitration_trigger", sa.Text),
    sa.Column("judged_at", UTCDateTime, nullable=False, index=True),
    sa.UniqueConstraint("assistant_name", "conversation_id", "version"),
    sa.Index(None, "conversation_id"),
    sa.Index(None, "assistant_name", "judged_at"),
    sa.CheckConstraint("status IN ('ok', 'judge_failed')", name="status"),
    sa.CheckConstraint("close_reason IN ('idle', 'ended')", name="close_reason"),
)

# Each case judge's answer behind a case verdict, for audit (as ``judgments`` for turns).
case_judgments = sa.Table(
    "case_judgments",
    metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True),
    sa.Column(
        "case_verdict_id",
        sa.BigInteger().with_variant(sa.Integer, "sqlite"),
        sa.ForeignKey("case_verdicts.id", ondelete="CASCADE"),
        nullable=False,
        index=True,
    ),
    sa.Column("judge", sa.Text, nullable=False),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("model", sa.Text, nullable=False),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("failure_reason", sa.Text),
    sa.Column("failure_detail", sa.Text),
    # {resolution_outcome, metric: {score, justification}}; NULL when the judge failed.
    sa.Column("scores", JSONDoc),
    sa.Column("raw_output", sa.Text),
    sa.Column("prompt_version", sa.Text, nullable=False),
    sa.Column("prompt_hash", sa.Text, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("input_tokens", sa.Integer, nullable=False),
    sa.Column("output_tokens", sa.Integer, nullable=False),
    sa.Column("cost_usd", sa.Float, nullable=False),
    sa.Column("latency_seconds", sa.Float, nullable=False),
)
TABLES = (*TABLES, case_verdicts, case_judgments)
# --- end cases ---

# --- outcomes ---
# End-user feedback and case outcomes (monitor/schema/outcome.py), one row per outcome id (a
# replayed or duplicated event is a no-op). ``joined_at``: when its turn (feedback) or a turn
# of its case (case outcomes) was found stored; ``expired_at``: when the join window passed
# without one; ``paired_at`` / ``agreement``: when feedback was compared with the turn's
# newest ok verdict, and the cell of that comparison (stats/judge_user_agreement.py).
outcome_events = sa.Table(
    "outcome_events",
    metadata,
    sa.Column("outcome_id", sa.String(256), primary_key=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("signal_kind", sa.String(32), nullable=False),
    sa.Column("assistant_name", sa.String(256), nullable=False),
    sa.Column("turn_event_id", sa.String(256), index=True),
    sa.Column("conversation_id", sa.String(256), index=True),
    sa.Column("polarity", sa.String(8)),
    sa.Column("thumbs", sa.String(4)),
    sa.Column("rating", sa.Float),
    sa.Column("scale_min", sa.Float),
    sa.Column("scale_max", sa.Float),
    sa.Column("comment", sa.Text),  # redacted like turns
    sa.Column("event_timestamp", UTCDateTime, nullable=False),
    sa.Column("received_at", UTCDateTime, nullable=False, index=True),
    sa.Column("joined_at", UTCDateTime),
    sa.Column("expired_at", UTCDateTime),
    sa.Column("paired_at", UTCDateTime),
    sa.Column("agreement", sa.String(16)),
)

# Unsampled turns kept (redacted, bounded in rows and age) so a negative feedback can still get
# its turn judged once (``feedback_judged_at``).
retained_turns = sa.Table(
    "retained_turns",
    metadata,
    sa.Column("event_id", sa.String(256), primary_key=True),
    sa.Column("conversation_id", sa.String(256), nullable=False, index=True),
    sa.Column("assistant_name", sa.String(256), nullable=False),
    sa.Column("event", sa.Text, nullable=False),  # the redacted turn, JSON text as kept
    sa.Column("retained_at", UTCDateTime, nullable=False, index=True),
    sa.Column("feedback_judged_at", UTCDateTime),
    # A turn read from Kafka is kept as its record's place (``event`` empty), read back from
    # Kafka, decoded and redacted when feedback asks for it.
    sa.Column("source_topic", sa.String(256)),
    sa.Column("source_partition", sa.Integer),
    sa.Column("source_offset", sa.BigInteger),
)

# Unsampled turns read from Kafka, kept as the places of their records a batch at a time: one
# row per partition per batch the keeper took (``ids``: the turns' event ids, conversation ids,
# assistants and offsets as JSON lists, in step). A place is found, and copied into
# ``retained_turns``, only once an outcome asks for its turn or case (``OutcomeRecords.
# join_pending``): writing every turn read as a row of its own cost intake a third of its rate.
retained_places = sa.Table(
    "retained_places",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("source_topic", sa.String(256), nullable=False),
    sa.Column("source_partition", sa.Integer, nullable=False),
    sa.Column("turns", sa.Integer, nullable=False),
    sa.Column("event_ids", sa.Text, nullable=False),
    sa.Column("conversation_ids", sa.Text, nullable=False),
    sa.Column("assistants", sa.Text, nullable=False),
    sa.Column("offsets", sa.Text, nullable=False),
    sa.Column("retained_at", UTCDateTime, nullable=False, index=True),
)

TABLES = (*TABLES, outcome_events, retained_turns, retained_places)
# --- end outcomes ---

# --- review queue ---
# The review queue on an annotation server (monitor/storage/review_queue.py): each turn queued
# for people (in a labelling batch: ``targeted`` for severe turns, ``uncertain`` when drawn
# with a probability), the server task it became (NULL: in the backlog, pushed by a later run),
# and each annotation version pulled back (so a pull stores or refuses it once).
review_tasks = sa.Table(
    "review_tasks",
    metadata,
    sa.Column(
        "batch_id",
        sa.String(64),
        sa.ForeignKey("label_batches.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("event_id", sa.String(256), primary_key=True),
    sa.Column("reason", sa.String(16), nullable=False),  # severe | disagreement | uncertain
    sa.Column("queued_at", UTCDateTime, nullable=False),
    sa.Column("project_id", sa.BigInteger),
    sa.Column("task_id", sa.BigInteger),
    sa.Column("pushed_at", UTCDateTime),
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    sa.Column("last_error", sa.Text),
    sa.Index("ix_review_tasks_task_id", "task_id"),
)
review_annotations = sa.Table(
    "review_annotations",
    metadata,
    sa.Column("project_id", sa.BigInteger, primary_key=True),
    sa.Column("annotation_id", sa.BigInteger, primary_key=True),
    sa.Column("task_id", sa.BigInteger, nullable=False),
    sa.Column("version", sa.String(64), nullable=False),  # the server's updated_at, as sent
    sa.Column("outcome", sa.String(16), nullable=False),  # stored | refused
    sa.Column("reason", sa.Text),
    sa.Column("pulled_at", UTCDateTime, nullable=False),
)
TABLES = (*TABLES, review_tasks, review_annotations)
# --- end review queue ---

# --- case labels (migration 0016): people's bands for whole cases ---
# A case labelling batch is a uniform random sample of an assistant's scored cases (the case
# verdicts current at the frame's end), recorded with its design like ``label_batches``; its
# items are the drawn cases with the version and the judge's bands then; labels are the bands
# people gave a case ("case_band") and each case metric. No foreign key to case verdicts.
case_label_batches = sa.Table(
    "case_label_batches",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("assistant", sa.String(256), nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("seed", sa.BigInteger, nullable=False),
    sa.Column("frame_start", UTCDateTime),
    sa.Column("frame_end", UTCDateTime),
    sa.Column("population", sa.Integer, nullable=False),  # scored cases in the frame
    sa.Column("size", sa.Integer, nullable=False),  # cases drawn
)
case_label_items = sa.Table(
    "case_label_items",
    metadata,
    sa.Column(
        "batch_id",
        sa.String(64),
        sa.ForeignKey("case_label_batches.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("conversation_id", sa.String(256), primary_key=True),
    sa.Column("version", sa.Integer, nullable=False),  # the case verdict's version when drawn
    sa.Column("position", sa.Integer, nullable=False),
    # {case metric|case_band: band} as the judge said when drawn.
    sa.Column("judge_bands", JSONDoc, nullable=False),
)
case_labels = sa.Table(
    "case_labels",
    metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True),
    sa.Column(
        "batch_id",
        sa.String(64),
        sa.ForeignKey("case_label_batches.id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("conversation_id", sa.String(256), nullable=False),
    sa.Column("metric", sa.String(64), nullable=False),  # a case metric or "case_band"
    sa.Column("band", sa.String(16), nullable=False),
    sa.Column("labeller", sa.String(256), nullable=False),
    sa.Column("labelled_at", UTCDateTime, nullable=False),
    sa.Column("imported_at", UTCDateTime, nullable=False),
    sa.UniqueConstraint("batch_id", "conversation_id", "metric", "labeller"),
    sa.CheckConstraint("band IN ('severe', 'moderate', 'minor', 'none')", name="band"),
)
TABLES = (*TABLES, case_label_batches, case_label_items, case_labels)

# Which case verdicts the case detectors (monitor/jobs/case_detection.py) have observed: a row
# per verdict, written in the transaction that saves their state (as ``verdicts.observed_at``
# for turns), so a verdict is fed to them once whenever it committed.
case_verdict_observations = sa.Table(
    "case_verdict_observations",
    metadata,
    sa.Column(
        "case_verdict_id",
        sa.BigInteger().with_variant(sa.Integer, "sqlite"),
        sa.ForeignKey("case_verdicts.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("observed_at", UTCDateTime, nullable=False),
)
TABLES = (*TABLES, case_verdict_observations)
# --- end case labels ---

# --- outcome detection ---
# Which outcome events the outcome detectors (monitor/jobs/outcome_detection.py) have observed:
# a row per outcome, written in the transaction that saves their state, so an outcome is fed to
# them once whenever it was stored.
outcome_observations = sa.Table(
    "outcome_observations",
    metadata,
    sa.Column(
        "outcome_id",
        sa.String(256),
        sa.ForeignKey("outcome_events.outcome_id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("observed_at", UTCDateTime, nullable=False),
)
TABLES = (*TABLES, outcome_observations)
# --- end outcome detection ---
