"""``casewatch outcomes import FILE``: outcome events from a JSONL file, one event a line.

The same outcome step as the daemon's outcomes topics (``stream/steps/outcomes.py``): each line
decoded (casewatch's shape, or ``outcomes.mapping`` with ``--mapped``), its comment redacted,
stored once per outcome id; a bad line goes to the dead-letter file with its reason and line.
Then one pass of the outcome join job joins and pairs what it can. Prints what it did; exit 1
when a line was dead-lettered, 2 when the command could not run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from prometheus_client import CollectorRegistry

from monitor.commands.store_access import db_options, open_store
from monitor.commands.usage import fail
from monitor.errors import CasewatchError, MessageRejected

STORE_TIMEOUT_S = 120.0  # a database that does not answer for this long ends the import


class _Finished:
    """The end of the import's chain: counts the lines finished."""

    def __init__(self) -> None:
        self.count = 0

    def submit(self, message: Any) -> None:
        self.count += 1

    def poll(self) -> None:
        pass

    def join(self, timeout: float | None = None) -> None:
        pass

    def close(self) -> None:
        pass


class _Counts:
    """What the import counts of dead letters and database trouble (printed, not exported)."""

    def __init__(self) -> None:
        self.dead_letters: dict[str, int] = {}
        self.storage_errors = 0

    def record_dead_letter(self, reason: str) -> None:
        self.dead_letters[reason] = self.dead_letters.get(reason, 0) + 1

    def record_dead_letter_held(self, why: str) -> None:
        pass  # the file sink acknowledges every write at once

    def record_storage_error(self) -> None:
        self.storage_errors += 1


@click.group()
def outcomes() -> None:
    """End-user feedback and case outcomes: import them from a file."""


@outcomes.command("import")
@db_options
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--mapped", is_flag=True, help="Read each line through outcomes.mapping.")
@click.option(
    "--dead-letters",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where bad lines go (default: PATH with .dlq.jsonl).",
)
def import_command(
    db: str | None, config_file: Path | None, path: Path, mapped: bool, dead_letters: Path | None
) -> None:
    """Store the outcome events of a JSONL file (idempotent), then join them to turns."""
    from consumers.dlq import FileDeadLetterSink
    from consumers.file_source import FILE_TP
    from consumers.records import RawMessage
    from monitor.config.settings import load_settings
    from monitor.jobs.outcome_join import OutcomeJoinJob
    from monitor.jobs.recorders import OutcomeRecorder
    from monitor.metrics.exporter import Metrics
    from monitor.redaction import Redactor
    from monitor.schema.outcome import OutcomeMapping, decode_outcome
    from monitor.storage.outcomes import OutcomeRecords
    from monitor.stream.pipeline import OutcomeIntake, outcome_step
    from monitor.stream.steps.base import Envelope
    from monitor.stream.steps.outcomes import OutcomeDecoder

    try:
        settings = load_settings(config_file)
        decoder: OutcomeDecoder = (
            OutcomeMapping.compile(settings.outcomes.mapping).decode if mapped else decode_outcome
        )
    except (CasewatchError, ValueError) as exc:
        fail(str(exc))
    redaction = settings.redaction
    redactor = Redactor(redaction.policy()) if redaction.active else None
    dlq_path = dead_letters or path.with_name(path.name + ".dlq.jsonl")
    metrics = Metrics(CollectorRegistry())
    recorder = OutcomeRecorder(metrics)
    finished = _Finished()
    counts = _Counts()
    with open_store(db, config_file, need_turns=False) as store:
        records = OutcomeRecords(store)
        sink = FileDeadLetterSink(dlq_path)
        try:
            step = outcome_step(
                finished,
                finished,
                sink,
                OutcomeIntake(records, recorder),
                counts,
                {FILE_TP.topic: decoder},
                max_bytes=settings.kafka.max_message_bytes,
                max_buffered=settings.outcomes.max_buffered,
                redactor=redactor,
            )
            with path.open("rb") as lines:
                for offset, line in enumerate(lines):
                    raw = RawMessage(FILE_TP.topic, 0, offset, line.rstrip(b"\r\n"))
                    message = Envelope(FILE_TP, offset, raw)
                    while True:
                        try:
                            step.submit(message)
                            break
                        except MessageRejected:  # the buffer is full: store it first
                            _store_buffer(step)
            _store_buffer(step)
            OutcomeJoinJob(settings.outcomes, records, recorder).run()
        except CasewatchError as exc:
            fail(str(exc))
        finally:
            sink.close()
    _summary(metrics, counts, dlq_path)


def _store_buffer(step: Any) -> None:
    step.join(STORE_TIMEOUT_S)
    if step.buffered:
        fail(f"outcome events not stored within {STORE_TIMEOUT_S:g} s: is the database up?")


def _summary(metrics: Any, counts: _Counts, dlq_path: Path) -> None:
    def value(name: str, **labels: str) -> int:
        return int(metrics.registry.get_sample_value(name, labels) or 0)

    inserted = value("casewatch_outcome_events_total", outcome="inserted")
    duplicate = value("casewatch_outcome_events_total", outcome="duplicate")
    joined = value("casewatch_outcome_joins_total", outcome="on_arrival")
    bad = sum(counts.dead_letters.values())
    click.echo(
        f"{inserted} outcome event(s) stored ({joined} joined to a stored turn or case), "
        f"{duplicate} already stored, {bad} dead-lettered"
    )
    if bad:
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(counts.dead_letters.items()))
        click.echo(f"dead letters ({reasons}) in {dlq_path}")
        raise SystemExit(1)


COMMANDS: list[click.Command] = [outcomes]
