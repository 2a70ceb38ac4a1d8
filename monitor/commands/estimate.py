"""``casewatch estimate``: an assistant's severe rate, the judge's corrected by human labels.

Read-only; the daemon's ``quality_estimate`` job exports the same numbers as gauges. Prints the
prediction-powered (PPI++) estimate next to the judge-only and labels-only rates, each with its
interval, so the judge's bias is visible: judge-only outside the corrected interval means the
judge over- or under-calls this signal. Below them, the anytime-valid interval over every
labelled batch of the assistant (the one a dashboard, re-read at every refresh, is read with).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import click

from monitor.commands.output import percent, table
from monitor.commands.store_access import check_assistant, db_options, open_store
from monitor.commands.usage import fail
from monitor.errors import CasewatchError
from monitor.jobs.case_estimate import (
    anytime_case_estimate,
    estimate_case_batch,
    labelled_case_batch,
)
from monitor.jobs.quality_estimate import (
    QualityEstimate,
    anytime_estimate,
    estimate_batch,
    labelled_batch,
)
from monitor.reports.case_label_files import CASE_BAND
from monitor.schema.case import CASE_METRICS
from monitor.schema.turn import METRICS
from monitor.stats.ppi import Interval
from monitor.storage import case_labels as case_sql
from monitor.storage import labels as label_sql


def _interval(lower: float | None, upper: float | None) -> str:
    return f"[{percent(lower)}, {percent(upper)}]"


def _row(name: str, i: Interval, note: str = "") -> list[str]:
    return [name, percent(i.point), _interval(i.lower, i.upper), str(i.n), note]


def _print(q: QualityEstimate, unit: str = "turns") -> None:
    e = q.estimates
    click.echo(
        f"{q.assistant}: share of {unit} with {q.signal} severe, batch {q.batch_id} "
        f"({q.labelled} labelled of {q.population} scored {unit} in its frame)"
    )
    rows = [
        _row("corrected", e.ppi, f"PPI++, lambda {e.lam:.2f}" if e.lam is not None else ""),
        _row("judge only", e.judge_only),
        _row("labels only", e.labels_only),
    ]
    a = q.anytime
    if a is not None:
        rows.append(
            [
                "anytime",
                percent(a.point),
                _interval(a.lower, a.upper),
                "",
                f"over {a.looks} labelled batch(es), valid at every look",
            ]
        )
    header = ["", "rate", f"{round(100 * e.confidence)} % interval", "n", ""]
    click.echo(table(header, rows, left=frozenset({0, 2, 4})))
    if a is not None:
        click.echo(
            "  Read a dashboard (or any figure re-read as labels come in) with the anytime "
            "interval;\n  the corrected fixed-n interval holds for this batch read once."
        )
        click.echo(
            "  The anytime interval is wider than the others because it stays valid however "
            "often it is read;\n  that guarantee costs width, the most while few labels are in."
        )
    if q.strategy != "uniform":
        click.echo(f"  (batch drawn by {q.strategy}: labels weighted by 1 / their probability)")


@click.command("estimate")
@db_options
@click.option("--assistant", required=True)
@click.option("--metric", type=click.Choice((*METRICS, *CASE_METRICS)),
              help="Severe rate of this metric (default: of the turn band; with --cases, of "
              "the case band; the case metrics need --cases).")  # fmt: skip
@click.option("--batch", "batch_id", help="Labelling batch (default: the newest labelled one).")
@click.option("--cases", is_flag=True, help="The share of severe cases, from case labels "
              "(labels export --cases).")  # fmt: skip
@click.option("--json", "as_json", is_flag=True)
def estimate_command(
    db: str | None,
    config_file: Path | None,
    assistant: str,
    metric: str | None,
    batch_id: str | None,
    cases: bool,
    as_json: bool,
) -> None:
    """The severe rate corrected by human labels (prediction-powered inference)."""
    if metric is not None and cases and metric not in CASE_METRICS:
        fail(f"--metric {metric} is a turn metric; with --cases pick a case metric "
             f"({', '.join(CASE_METRICS)})")  # fmt: skip
    if metric is not None and not cases and metric in CASE_METRICS:
        fail(f"--metric {metric} is a case metric: add --cases")
    if cases:
        _estimate_cases(db, config_file, assistant, metric or CASE_BAND, batch_id, as_json)
        return
    signal = metric or "turn_band"
    with open_store(db, config_file, need_turns=True) as store:
        check_assistant(store, assistant)
        try:
            chosen = labelled_batch(store, assistant, batch_id)
            if chosen is None:
                fail(
                    f"{assistant} has no labelled batch yet: casewatch labels export "
                    f"--assistant {assistant} --out batch.jsonl, label it, labels import"
                )
            batch = label_sql.batch(store, chosen)
            if batch is None or batch["assistant"] != assistant:
                fail(f"no labelling batch {chosen!r} for {assistant}")
            found = [
                replace(q, anytime=anytime_estimate(store, assistant, signal))
                for q in estimate_batch(store, chosen, [signal])
            ]
        except CasewatchError as exc:
            fail(str(exc))
    if not found:
        fail(f"batch {chosen} has no human label for {signal}")
    if as_json:
        click.echo(json.dumps(found[0].to_dict(), indent=2, sort_keys=True))
    else:
        _print(found[0])
    if (warning := small_n_warning(found[0].labelled)) is not None:
        click.echo(f"casewatch: warning: {warning}", err=True)


def _estimate_cases(
    db: str | None,
    config_file: Path | None,
    assistant: str,
    signal: str,
    batch_id: str | None,
    as_json: bool,
) -> None:
    with open_store(db, config_file, need_turns=True) as store:
        check_assistant(store, assistant)
        try:
            chosen = labelled_case_batch(store, assistant, batch_id)
            if chosen is None:
                fail(
                    f"{assistant} has no labelled case batch yet: casewatch labels export "
                    f"--cases --assistant {assistant} --out cases.jsonl, label it, "
                    "labels import --cases"
                )
            batch = case_sql.case_batch(store, chosen)
            if batch is None or batch["assistant"] != assistant:
                fail(f"no case labelling batch {chosen!r} for {assistant}")
            found = [
                replace(q, anytime=anytime_case_estimate(store, assistant, signal))
                for q in estimate_case_batch(store, chosen, [signal])
            ]
        except CasewatchError as exc:
            fail(str(exc))
    if not found:
        fail(f"case batch {chosen} has no human label for {signal}")
    if as_json:
        click.echo(json.dumps(found[0].to_dict() | {"unit": "cases"}, indent=2, sort_keys=True))
    else:
        _print(found[0], unit="cases")
    if (warning := small_n_warning(found[0].labelled, unit="case")) is not None:
        click.echo(f"casewatch: warning: {warning}", err=True)


# Below about 30 labels a binomial interval on a rate of a few percent spans tens of points (6
# labels, none severe: 0 % to about 46 %), so the corrected figure says little either way.
SMALL_N = 30


def small_n_warning(n: int, unit: str = "turn") -> str | None:
    """What to say when ``n`` labelled turns (or cases) are too few for the interval to mean
    much."""
    if n >= SMALL_N:
        return None
    return (
        f"only n = {n} labelled {unit}(s) in this batch: an interval from so few labels is too "
        f"wide to mean much; label at least {SMALL_N} (export a larger batch, or finish this one)"
    )


COMMANDS: list[click.Command] = [estimate_command]
