"""Case labels from the command line: ``labels export --cases``, ``labels import --cases`` and
``agreement --store --cases`` (the commands live in labels.py and batch.py; the case work here).

``export --cases`` draws a uniform random sample of an assistant's scored cases (the case
verdicts current at the frame's end), records it as a case labelling batch (frame, seed,
population, each drawn case's version and the judge's bands then) and writes our JSONL (one
line per case: the case and every turn its verdict covered), a Label Studio import and its
labelling interface. ``import --cases`` stores people's bands per case metric and for the whole
case (``case_band``): every bad row is listed with where it is and why, and then nothing is
stored.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import click

from monitor.commands.store_access import store_args
from monitor.commands.usage import fail
from monitor.errors import CasewatchError
from monitor.reports.case_label_files import (
    CASE_ID,
    CASE_LABEL_KEYS,
    case_jsonl_record,
    case_label_studio_config,
    case_label_studio_task,
)
from monitor.reports.label_files import consensus, draw, parse_labels
from monitor.runtime.program import casewatch_program
from monitor.stats.agreement import HumanAgreement, case_agreement
from monitor.storage import case_labels as case_sql
from monitor.storage.store import Store

_MAX_BAD_SHOWN = 50


def _sibling(out: Path, suffix: str) -> Path:
    stem = out.name[: -len(out.suffix)] if out.suffix else out.name
    return out.with_name(stem + suffix)


def export_cases(
    store: Store,
    *,
    assistant: str,
    size: int,
    seed: int,
    start: datetime | None,
    end: datetime | None,
    out: Path,
    db: str | None,
    config_file: Path | None,
) -> None:
    """Draw, record and write a case labelling batch (exit 2 with the reason otherwise)."""
    now = datetime.now(UTC)
    try:
        frame = case_sql.case_frame(store, assistant, start, end)
        if not frame:
            fail(
                f"{assistant} has no scored case in this time range: nothing to sample (cases "
                "are judged once their conversation goes quiet: see cases.idle_seconds)"
            )
        drawn = [frame[i] for i in draw(len(frame), size, seed)]
        batch_id = f"case-{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(4)}"
        lines, tasks = [], []
        for row in drawn:
            events = case_sql.case_turn_events(
                store, assistant, row.conversation_id, row.covered_until
            )
            lines.append(case_jsonl_record(batch_id, row.conversation_id, row.version, events))
            tasks.append(case_label_studio_task(batch_id, row.conversation_id, row.version, events))
        studio, config = _sibling(out, ".labelstudio.json"), _sibling(out, ".labelstudio.xml")
        try:
            out.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines))
            studio.write_text(json.dumps(tasks, ensure_ascii=False, indent=1) + "\n")
            config.write_text(case_label_studio_config())
        except OSError as exc:
            fail(f"cannot write the batch files: {exc}")
        row_doc = {
            "id": batch_id,
            "assistant": assistant,
            "created_at": now,
            "seed": seed,
            "frame_start": start,
            "frame_end": end,
            "population": len(frame),
            "size": len(drawn),
        }
        try:
            case_sql.create_case_batch(store, row_doc, drawn)
        except CasewatchError:
            for path in (out, studio, config):  # no files for a batch that was not recorded
                path.unlink(missing_ok=True)
            raise
    except CasewatchError as exc:
        fail(str(exc))
    click.echo(
        f"case batch {batch_id}: {len(drawn)} of {len(frame)} scored cases of {assistant} "
        f"(uniform, seed {seed})\n  {out}  (fill in 'labeller' and 'labels': a band per case "
        f"metric and case_band)\n"
        f"  {studio}  (Label Studio: import these tasks)\n"
        f"  {config}  (Label Studio: the labelling interface)\n"
        f"then: {casewatch_program()} labels import FILE --cases{store_args(db, config_file)} "
        "(this JSONL, or Label Studio's JSON export)"
    )


def import_cases(store: Store, path: Path, text: str, labeller: str | None) -> None:
    """Store the case bands of ``text`` (our JSONL or a Label Studio export): all or none."""
    try:
        ids = [b["id"] for b in case_sql.case_batches(store)]
        known: dict[str, set[str]] = {i: set() for i in ids}
        for batch_id, conversation_id in case_sql.case_batch_items(store, ids):
            known[batch_id].add(conversation_id)
        parsed = parse_labels(
            text, known, labeller, datetime.now(UTC), keys=CASE_LABEL_KEYS, id_field=CASE_ID
        )
        if parsed.bad:
            shown = "\n".join(f"  {path}: {b}" for b in parsed.bad[:_MAX_BAD_SHOWN])
            more = len(parsed.bad) - _MAX_BAD_SHOWN
            fail(f"{len(parsed.bad)} bad row(s), nothing imported:\n{shown}"
                 + (f"\n  ... and {more} more" if more > 0 else ""))  # fmt: skip
        now = datetime.now(UTC)
        stored = case_sql.save_case_labels(store, [r | {"imported_at": now} for r in parsed.rows])
    except CasewatchError as exc:
        fail(str(exc))
    cases = len({(r["batch_id"], r[CASE_ID]) for r in parsed.rows})
    click.echo(f"imported {stored} case label(s) on {cases} case(s) from {path}")
    if parsed.unlabelled:
        click.echo(
            f"{len(parsed.unlabelled)} case(s) not labelled yet were left out (first: "
            f"{parsed.unlabelled[0]}); label them and import the file again (what was imported "
            "is kept). Label in the exported order, not by choice: the estimates need the "
            "labelled cases to stay a random sample of the batch"
        )


def store_case_agreement(store: Store, batch_ids: Sequence[str] | None) -> HumanAgreement:
    """Case judge vs human bands over the labelled cases of these case batches (all when
    None), the judge's bands being those recorded when the batch was drawn."""
    known = {b["id"] for b in case_sql.case_batches(store)}
    ids = list(batch_ids) if batch_ids else sorted(known)
    unknown = [i for i in ids if i not in known]
    if unknown:
        fail(f"unknown case labelling batch {unknown[0]!r}; known: "
             f"{', '.join(sorted(known)) or 'none'}")  # fmt: skip
    rows = case_sql.stored_case_labels(store, ids)
    if not rows:
        fail("no case labels stored yet: casewatch labels export --cases, then "
             "labels import --cases")  # fmt: skip
    judge_bands: dict[str, dict[str, str]] = {}
    for (_batch, conversation_id), bands in case_sql.case_batch_items(store, ids).items():
        judge_bands.setdefault(conversation_id, bands)
    return case_agreement(judge_bands, consensus(rows, CASE_ID), CASE_LABEL_KEYS)
