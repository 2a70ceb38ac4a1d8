"""``casewatch labels export`` / ``labels import``: checking the judge against people.

``export`` draws a uniform random sample of an assistant's scored turns (or, with ``--strategy
uncertain``, each turn with a known probability that favours the turns the judge is least sure
of), records it as a labelling batch (frame, seed, population, strategy, the drawn turns with
their probabilities and the judge's bands then) and
writes what a labeller needs: our JSONL, a Label Studio import file and its labelling
interface. ``import`` stores the bands people gave, from our JSONL or a Label Studio JSON
export: every bad row is listed with its line (or task) and reason, and then nothing is stored.
``casewatch agreement --store`` (monitor/commands/batch.py) reads them back via
``store_agreement``.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import click

from monitor.commands.case_labels import export_cases, import_cases
from monitor.commands.store_access import (
    check_assistant,
    db_options,
    open_store,
    parse_time,
    store_args,
)
from monitor.commands.usage import fail
from monitor.errors import CasewatchError
from monitor.reports.label_files import (
    check_inclusion,
    consensus,
    draw,
    jsonl_record,
    label_studio_config,
    label_studio_task,
    parse_labels,
)
from monitor.runtime.program import casewatch_program
from monitor.schema.turn import Assistant, Band, Verdict
from monitor.scoring.turn import BUILTIN_PROFILES, DEFAULT_CRITICAL_METRICS
from monitor.stats.active_sampling import (
    inclusion_probabilities,
    poisson_draw,
    turn_uncertainty,
)
from monitor.stats.agreement import HumanAgreement, agreement
from monitor.storage import labels as label_sql
from monitor.storage.store import Store

_MAX_BAD_SHOWN = 50


def sibling(out: Path, suffix: str) -> Path:
    stem = out.name[: -len(out.suffix)] if out.suffix else out.name
    return out.with_name(stem + suffix)


@click.group("labels")
def labels_group() -> None:
    """Human labels: export a random batch to label, import the labels."""


@labels_group.command("export")
@db_options
@click.option("--assistant", required=True, help="The assistant whose turns to sample.")
@click.option("--n", "size", type=click.IntRange(1, 100_000), default=100, show_default=True)
@click.option("--seed", type=click.IntRange(0, 2**62), default=None,
              help="Random seed (default: a fresh one, printed and recorded).")  # fmt: skip
@click.option("--since", help="Frame start: ISO 8601 or a duration ago (7d).")
@click.option("--until", help="Frame end (exclusive): ISO 8601 or a duration ago.")
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="JSONL to write; .labelstudio.json/.xml go beside it.")  # fmt: skip
@click.option(
    "--strategy",
    type=click.Choice(["uniform", "uncertain"]),
    default="uniform",
    show_default=True,
    help="uncertain: draw the turns the judge is least sure of more often, each with a known "
    "probability the estimate weights by (--n: the expected count).",
)
@click.option("--cases", is_flag=True, help="Sample whole cases (the assistant's scored case "
              "verdicts) instead of turns, uniformly; labels are bands per case metric and "
              "case_band.")  # fmt: skip
def export_command(
    db: str | None,
    config_file: Path | None,
    assistant: str,
    size: int,
    seed: int | None,
    since: str | None,
    until: str | None,
    out: Path,
    strategy: str,
    cases: bool,
) -> None:
    """Draw a sample of judged turns (uniform, or by uncertainty) and write it for labelling."""
    start, end = parse_time("--since", since), parse_time("--until", until)
    seed = secrets.randbelow(2**62) if seed is None else seed
    if cases:
        if strategy != "uniform":
            fail("--cases draws cases uniformly: leave out --strategy")
        with open_store(db, config_file, need_turns=True) as store:
            check_assistant(store, assistant)
            export_cases(store, assistant=assistant, size=size, seed=seed, start=start, end=end,
                         out=out, db=db, config_file=config_file)  # fmt: skip
        return
    now = datetime.now(UTC)
    with open_store(db, config_file, need_turns=True) as store:
        check_assistant(store, assistant)
        try:
            frame = list(label_sql.judged_frame(store, assistant, start, end))
            if not frame:
                fail(f"{assistant} has no scored turn in this time range: nothing to sample")
            probs: list[float] | None = None
            if strategy == "uniform":
                drawn = [frame[i] for i in draw(len(frame), size, seed)]
            else:
                drawn, probs = _draw_uncertain(store, assistant, frame, size, seed)
            events = label_sql.turn_events(store, [r.event_id for r in drawn])
            batch_id = f"{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(4)}"
            chance: list[float | None] = list(probs) if probs else [None] * len(drawn)
            tasks = [
                label_studio_task(batch_id, r.event_id, events[r.event_id], p)
                for r, p in zip(drawn, chance, strict=True)
            ]
            lines = [
                jsonl_record(batch_id, r.event_id, events[r.event_id], p)
                for r, p in zip(drawn, chance, strict=True)
            ]
            studio, config = sibling(out, ".labelstudio.json"), sibling(out, ".labelstudio.xml")
            try:
                out.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines))
                studio.write_text(json.dumps(tasks, ensure_ascii=False, indent=1) + "\n")
                config.write_text(label_studio_config())
            except OSError as exc:
                fail(f"cannot write the batch files: {exc}")
            try:
                row = _batch_row(batch_id, assistant, now, seed, start, end, len(frame), len(drawn))
                label_sql.create_batch(store, row | {"strategy": strategy}, drawn, probs)
            except CasewatchError:
                for path in (out, studio, config):  # no files for a batch that was not recorded
                    path.unlink(missing_ok=True)
                raise
        except CasewatchError as exc:
            fail(str(exc))
    click.echo(
        f"batch {batch_id}: {len(drawn)} of {len(frame)} scored turns of {assistant} "
        f"({strategy}, seed {seed})\n  {out}  (fill in 'labeller' and 'labels')\n"
        f"  {studio}  (Label Studio: import these tasks)\n"
        f"  {config}  (Label Studio: the labelling interface)\n"
        f"then: {casewatch_program()} labels import FILE{store_args(db, config_file)} "
        "(this JSONL, or Label Studio's JSON export)"
    )


def _draw_uncertain(
    store: Store, assistant: str, frame: list[label_sql.FrameRow], size: int, seed: int
) -> tuple[list[label_sql.FrameRow], list[float]]:
    """Poisson sampling with probabilities favouring unsure turns (exit 2 when no turn carries
    an uncertainty signal: the draw would be uniform in disguise)."""
    signals = label_sql.turn_signals(store, [r.event_id for r in frame])
    weights = BUILTIN_PROFILES["default"]
    critical = list(DEFAULT_CRITICAL_METRICS)
    u = [
        turn_uncertainty(signals[r.event_id], weights=weights, critical=critical)
        if r.event_id in signals
        else 0.0
        for r in frame
    ]
    try:
        pi = inclusion_probabilities(u, size)
    except ValueError:
        fail(
            f"{assistant}: no scored turn in this time range carries an uncertainty signal "
            "(no panel disagreement, no heuristic/LLM split, no score near the severe edge): "
            "nothing to favour; draw with --strategy uniform"
        )
    chosen = poisson_draw(pi, seed)
    drawn = [r for r, c in zip(frame, chosen, strict=True) if c]
    if not drawn:
        fail(f"{assistant}: the draw (seed {seed}) picked no turn; raise --n or change --seed")
    return drawn, [float(p) for p, c in zip(pi, chosen, strict=True) if c]


def _batch_row(
    batch_id: str,
    assistant: str,
    now: datetime,
    seed: int,
    start: datetime | None,
    end: datetime | None,
    population: int,
    size: int,
) -> dict[str, object]:
    return {
        "id": batch_id,
        "assistant": assistant,
        "created_at": now,
        "seed": seed,
        "frame_start": start,
        "frame_end": end,
        "population": population,
        "size": size,
    }


@labels_group.command("import")
@db_options
@click.argument(
    "path", metavar="FILE", type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option("--labeller", help="Who labelled, for rows that do not say.")
@click.option("--cases", is_flag=True, help="The file labels cases (labels export --cases).")
def import_command(
    db: str | None, config_file: Path | None, path: Path, labeller: str | None, cases: bool
) -> None:
    """Store human bands from our JSONL or a Label Studio JSON export: every labelled row or,
    if one is bad, none; rows not labelled yet are left out and counted."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"cannot read {path}: {exc}")
    if cases:
        with open_store(db, config_file, need_turns=False) as store:
            import_cases(store, path, text, labeller)
        return
    with open_store(db, config_file, need_turns=False) as store:
        try:
            ids = [b["id"] for b in label_sql.batches(store)]
            known: dict[str, set[str]] = {i: set() for i in ids}
            for batch_id, event_id in label_sql.batch_items(store, ids):
                known[batch_id].add(event_id)
            parsed = parse_labels(text, known, labeller, datetime.now(UTC))
            parsed.bad.extend(
                check_inclusion(text, _probabilities(store, {r["batch_id"] for r in parsed.rows}))
            )
            if parsed.bad:
                shown = "\n".join(f"  {path}: {b}" for b in parsed.bad[:_MAX_BAD_SHOWN])
                more = len(parsed.bad) - _MAX_BAD_SHOWN
                fail(f"{len(parsed.bad)} bad row(s), nothing imported:\n{shown}"
                     + (f"\n  ... and {more} more" if more > 0 else ""))  # fmt: skip
            now = datetime.now(UTC)
            stored = label_sql.save_labels(store, [r | {"imported_at": now} for r in parsed.rows])
        except CasewatchError as exc:
            fail(str(exc))
    events = len({(r["batch_id"], r["event_id"]) for r in parsed.rows})
    click.echo(f"imported {stored} label(s) on {events} turn(s) from {path}")
    if parsed.unlabelled:
        click.echo(
            f"{len(parsed.unlabelled)} turn(s) not labelled yet were left out (first: "
            f"{parsed.unlabelled[0]}); label them and import the file again (what was imported "
            "is kept). Estimates from part of a batch hold while the labelled turns are still a "
            "random sample of it: label in the exported order, not by choice"
        )


def _probabilities(store: Store, batch_ids: set[str]) -> dict[tuple[str, str], float]:
    """The drawing probability of every turn of the batches drawn by uncertainty."""
    uneven = [b for b in batch_ids if (label_sql.batch(store, b) or {}).get("strategy") not in
              (None, "uniform")]  # fmt: skip
    return {k: p for k, p in label_sql.item_probabilities(store, uneven).items() if p is not None}


def store_agreement(store: Store, batch_ids: Sequence[str] | None) -> HumanAgreement:
    """Judge vs human bands over the labelled turns of these batches (all when None), the judge's
    bands being those recorded when the batch was drawn."""
    ids = list(batch_ids) if batch_ids else [b["id"] for b in label_sql.batches(store)]
    known = {b["id"] for b in label_sql.batches(store)}
    unknown = [i for i in ids if i not in known]
    if unknown:
        fail(f"unknown labelling batch {unknown[0]!r}; known: {', '.join(sorted(known)) or 'none'}")
    rows = label_sql.stored_labels(store, ids)
    if not rows:
        fail("no human labels stored yet: casewatch labels export, then labels import")
    items = label_sql.batch_items(store, ids)
    judge_bands: dict[str, dict[str, str]] = {}
    for (_batch, event_id), bands in items.items():
        judge_bands.setdefault(event_id, bands)
    verdicts = [
        Verdict(
            event_id=event_id,
            conversation_id="",
            turn_index=0,
            assistant=Assistant(name="-", version="", model=""),
            status="ok",
            weight_profile="",
            turn_band=Band(bands["turn_band"]),
            metric_bands={m: Band(b) for m, b in bands.items() if m != "turn_band"},
        )
        for event_id, bands in judge_bands.items()
    ]
    return agreement(verdicts, consensus(rows))


COMMANDS: list[click.Command] = [labels_group]
