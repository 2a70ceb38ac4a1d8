"""``casewatch judge``, ``casewatch compare`` and ``casewatch agreement``: offline batch use.

Operator errors (bad config, unreadable files) print one clear message and exit 2; a bug
still shows its traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from monitor.batch.rejects import DEAD_LETTER_EVENTS
from monitor.batch.runner import run_batch
from monitor.batch.verdict_files import VerdictFile, default_rejects_path, read_verdicts
from monitor.commands.batch_report import (
    comparison_text,
    human_text,
    judges_text,
    panel_text,
    summary_text,
)
from monitor.commands.usage import fail, settings_or_fail
from monitor.errors import ConfigError, InvalidInput, TransportError
from monitor.judging.evaluator import build_evaluator
from monitor.judging.preflight import judges_to_probe, probe_judges
from monitor.reports.panel_report import panel_report
from monitor.runtime.logs import configure_logging
from monitor.schema.turn import Band
from monitor.stats.agreement import agreement, judge_agreement
from monitor.stats.comparison import compare

_IN = click.Path(exists=True, dir_okay=False, readable=True, path_type=Path)
_OUT = click.Path(dir_okay=False, writable=True, path_type=Path)
_CONFIG = click.Path(dir_okay=False, path_type=Path)  # load_settings names a missing file


# ---------------------------------------------------------------- judge


@click.command("judge")
@click.argument("input_path", metavar="INPUT.jsonl", type=_IN)
@click.option("--out", "out_path", required=True, type=_OUT, help="Granular verdicts (JSONL).")
@click.option("--compact", "compact_path", type=_OUT, help="Compact rows for dashboards (JSONL).")
@click.option("--judge", "judge_name", help="Configured judge to use (overrides `judge`).")
@click.option("--concurrency", type=click.IntRange(1, 1024), help="Turns judged at once.")
@click.option("--config", type=_CONFIG, help="YAML configuration file.")
@click.option("--rejects", "rejects_path", type=_OUT, help="Default: <out>.rejects.jsonl.")
@click.option("--no-progress", is_flag=True, help="No progress bar (never shown off a tty).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def judge_command(
    input_path: Path,
    out_path: Path,
    compact_path: Path | None,
    judge_name: str | None,
    concurrency: int | None,
    config: Path | None,
    rejects_path: Path | None,
    no_progress: bool,
    as_json: bool,
) -> None:
    """Judge every turn event of INPUT.jsonl; resumable (turns already in --out are skipped)."""
    settings = settings_or_fail(config, **({"judge": judge_name} if judge_name else {}))
    configure_logging(
        settings.log_level, settings.secret_values(), said_otherwise=DEAD_LETTER_EVENTS
    )
    for p in (out_path, compact_path, rejects_path):
        if p is not None and not p.parent.is_dir():
            fail(f"output directory {p.parent} does not exist")
    concurrency = concurrency or settings.daemon.concurrency
    # One cheap request per judge endpoint first: a judge that is down or refuses the key
    # stops the run here, not after every turn failed.
    found = probe_judges(judges_to_probe(settings))
    if found.misconfigured:  # a setting to fix: exit 2, as every configuration problem
        fail("; ".join(found.misconfigured.values()) + " — nothing was judged")
    if found.down:
        fail("; ".join(found.down.values()) + " — nothing was judged", code=1)
    try:
        evaluator = build_evaluator(settings, concurrency=concurrency)
    except ConfigError as exc:
        fail(str(exc))
    try:
        summary = run_batch(
            input_path,
            out_path,
            compact_path,
            evaluator,
            concurrency=concurrency,
            rejects_path=rejects_path,
            progress=not no_progress,
            redaction=settings.redaction,  # as in the daemon: judges see placeholders
        )
    except (OSError, ConfigError, TransportError) as exc:  # a file that cannot be read
        fail(f"I/O error: {exc}")
    finally:
        evaluator.close()
    if as_json:
        click.echo(json.dumps(summary.to_dict()))
    else:
        click.echo(summary_text(summary))
    if summary.rejected:
        where = rejects_path or default_rejects_path(out_path)
        click.echo(f"casewatch: {summary.rejected} line(s) rejected, listed in {where}", err=True)
    if summary.interrupted:
        kept = summary.judged + summary.skipped_existing
        fail(
            f"interrupted: {kept} turn(s) kept in {out_path}; run the same command again to "
            "resume (turns already there are skipped)",
            code=130,
        )
    if summary.all_rejected:
        fail(
            f"none of the {summary.read} line(s) of {input_path} is a turn event that could "
            "be judged: nothing was judged (the reasons are above and in the rejects file)",
            code=1,
        )
    if summary.all_failed:
        fail(
            f"all {summary.judged} turn(s) judged in this run ended judge_failed: the judge "
            f"is not scoring (see the failure reasons in {out_path})",
            code=1,
        )


# ---------------------------------------------------------------- compare


def _looks_like_turns(path: Path) -> bool:
    """Whether ``path`` starts with a turn event (a query and an answer, no verdict fields):
    the input of `casewatch judge`, given to a command that reads its output."""
    try:
        with path.open(encoding="utf-8") as fh:
            first = next((line for line in fh if line.strip()), "")
        doc = json.loads(first)
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return (
        isinstance(doc, dict)
        and "query" in doc
        and "answer" in doc
        and not {"status", "turn_band", "metric_bands"} & doc.keys()
    )


def _load(path: Path) -> VerdictFile:
    if _looks_like_turns(path):
        fail(
            f"{path} holds turn events, not verdicts: judge it first "
            f"(`casewatch judge {path} --out judged.jsonl`) and compare the judged files"
        )
    try:
        loaded = read_verdicts(path)
    except OSError as exc:
        fail(f"cannot read {path}: {exc}")
    if loaded.bad_lines:
        number, reason = loaded.bad_lines[0]
        click.echo(
            f"casewatch: {path}: {len(loaded.bad_lines)} unreadable line(s) skipped "
            f"(first: line {number}: {reason})",
            err=True,
        )
    if not loaded.verdicts:
        fail(f"{path} holds no verdicts (expected the --out file of `casewatch judge`)")
    return loaded


@click.command("compare")
@click.argument("a_arg", metavar="A")
@click.argument("b_arg", metavar="B")
@click.option("--weight-profile", help="Recompute S_final under this profile (default: as judged).")
@click.option("--config", type=_CONFIG, help="YAML configuration (for custom weight profiles; "
              "with --cases, the settings naming the store).")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON.")
@click.option("--cases", is_flag=True, help="A and B are assistants in the store: compare their "
              "cases' current case scores, paired by conversation.")  # fmt: skip
@click.option("--db", default=None, help="With --cases: database URL or SQLite file.")
def compare_command(
    a_arg: str,
    b_arg: str,
    weight_profile: str | None,
    config: Path | None,
    as_json: bool,
    cases: bool,
    db: str | None,
) -> None:
    """Compare assistant B with A on the conversations both answered (Wilcoxon, t, bootstrap).

    A and B are --out files of `casewatch judge`; with --cases, two assistants whose cases the
    store holds (each case scored once, as a whole, by the case judge).
    """
    if cases:
        if weight_profile is not None:
            fail("--weight-profile recomputes turn scores: case scores are compared as judged")
        from monitor.commands.case_compare import compare_stored_cases

        compare_stored_cases(a_arg, b_arg, db, config, as_json=as_json)
        return
    a_path, b_path = _existing(a_arg), _existing(b_arg)
    weights = None
    if weight_profile is not None:
        weights = settings_or_fail(config, weight_profile=weight_profile).weights()
    result = compare(
        _load(a_path).verdicts, _load(b_path).verdicts, weights, weight_profile=weight_profile
    )
    if as_json:
        click.echo(json.dumps(result.to_dict()))
    else:
        click.echo(comparison_text(result))


def _existing(arg: str) -> Path:
    path = Path(arg)
    if not path.is_file():
        fail(f"{arg}: no such file (A and B are --out files of casewatch judge; to compare "
             "two assistants' cases in a store, add --cases)")  # fmt: skip
    return path


# ---------------------------------------------------------------- agreement


def read_human_labels(path: Path) -> dict[str, dict[str, Band]]:
    """``{"event_id": ..., "labels": {metric: band}}`` per line → event_id → labels.

    Raises InvalidInput naming the line on anything malformed (labels are small and
    hand-made: a typo should stop the report, not silently shrink it).
    """
    out: dict[str, dict[str, Band]] = {}
    for number, raw in enumerate(path.read_bytes().splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            doc = json.loads(raw)
            event_id = doc["event_id"]
            labels = doc["labels"]
            if not isinstance(event_id, str) or not isinstance(labels, dict):
                raise TypeError("event_id must be a string and labels an object")
            out[event_id] = {str(k): Band(v) for k, v in labels.items()}
        except (ValueError, KeyError, TypeError) as exc:
            bands = ", ".join(b.value for b in Band)
            raise InvalidInput(
                f"{path}: line {number}",
                f"expected {{'event_id': str, 'labels': {{metric: band}}}} with bands in "
                f"({bands}): {exc!r}",
            ) from exc
    return out


@click.command("agreement")
@click.argument("judged_path", metavar="JUDGED.jsonl", type=_IN, required=False)
@click.option("--labels", "labels_path", type=_IN, help="Human bands: {event_id, labels}.")
@click.option("--other", "other_path", type=_IN, help="A second judge's --out file.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON.")
# Agreement from the store's labelling batches (monitor/commands/labels.py).
@click.option("--store", "from_store", is_flag=True, help="Human labels and judge bands "
              "from the store (casewatch labels import) instead of files.")  # fmt: skip
@click.option("--batch", "batch_ids", multiple=True, help="With --store: only this batch.")
@click.option("--cases", is_flag=True, help="With --store: the case judge against people's "
              "case labels (labels export --cases).")  # fmt: skip
@click.option("--db", default=None, help="With --store: database URL or SQLite file.")
@click.option("--config", "config_file", type=_IN, default=None, help="With --store: settings.")
def agreement_command(
    judged_path: Path | None,
    labels_path: Path | None,
    other_path: Path | None,
    as_json: bool,
    from_store: bool,
    batch_ids: tuple[str, ...],
    cases: bool,
    db: str | None,
    config_file: Path | None,
) -> None:
    """How well the judge agrees with human labels (--labels or --store) and another judge
    (--other)."""
    if cases and not from_store:
        fail("--cases reads case labels from the store: add --store")
    if from_store:
        from monitor.commands.case_labels import store_case_agreement
        from monitor.commands.labels import store_agreement
        from monitor.commands.store_access import open_store

        with open_store(db, config_file, need_turns=False) as store:
            read = store_case_agreement if cases else store_agreement
            stored = read(store, batch_ids)
        if as_json:
            click.echo(json.dumps({"human": stored.to_dict()}))
        else:
            click.echo(human_text(stored))
        return
    if judged_path is None:
        fail("give JUDGED.jsonl (with --labels or --other), or --store")
    if labels_path is None and other_path is None:
        fail("give --labels HUMAN.jsonl, --other JUDGED2.jsonl, or both")
    judged = _load(judged_path).verdicts
    doc: dict[str, Any] = {}
    human = judges = None
    panel = None
    if labels_path is not None:
        try:
            labels = read_human_labels(labels_path)
        except InvalidInput as exc:
            fail(str(exc))
        except OSError as exc:
            fail(f"cannot read {labels_path}: {exc}")
        human = agreement(judged, labels)
        doc["human"] = human.to_dict()
        # Verdicts of a two-judge panel also get DAFE's before/after-arbitration view.
        if any(j.role == "primary" for v in judged for j in v.judgments):
            panel = panel_report(judged, labels)
            doc["panel"] = panel.to_dict()
    if other_path is not None:
        judges = judge_agreement(judged, _load(other_path).verdicts)
        doc["judges"] = judges.to_dict()
    if as_json:
        click.echo(json.dumps(doc))
        return
    if human is not None:
        click.echo(human_text(human))
    if panel is not None:
        click.echo()
        click.echo(panel_text(panel))
    if judges is not None:
        if human is not None:
            click.echo()
        click.echo(judges_text(judges))


COMMANDS: list[click.Command] = [judge_command, compare_command, agreement_command]
