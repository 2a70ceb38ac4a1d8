"""``casewatch rubric generate | grade | evaluate``: rubric grading offline (seed 001).

Operator errors (bad config, bad files) print one clear message and exit 2; a grading that
could not finish (endpoint failures after retries) exits 1 and writes no qrels or run file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from pydantic import BaseModel, ConfigDict, ValidationError

from monitor.commands.usage import fail as _fail
from monitor.errors import ConfigError, InvalidInput
from monitor.judging.rubric_grader import RubricGrader, RubricGradingFailed
from monitor.judging.rubric_set import (
    EntryId,
    RubricEntry,
    RubricQuestion,
    Text,
    dump_rubric_set,
    load_rubric_set,
)
from monitor.logs import configure_logging
from monitor.reporting.rubric_runs import grade_responses, read_responses
from monitor.reporting.stats import Correlation
from monitor.reporting.trec import (
    DEFAULT_MEASURES,
    TrecFormatError,
    format_qrels,
    format_run,
    leaderboard,
    read_qrels,
    read_ranking,
    read_run,
)
from monitor.settings import Settings, load_settings

_IN = click.Path(exists=True, dir_okay=False, readable=True, path_type=Path)
_OUT = click.Path(dir_okay=False, writable=True, path_type=Path)
_DIR = click.Path(file_okay=False, path_type=Path)
_CONFIG = click.Path(dir_okay=False, path_type=Path)

MEASURE_TITLES = {"ndcg_cut_10": "nDCG@10", "P_10": "P@10", "map": "MAP"}


def _settings(config: Path | None) -> Settings:
    try:
        return load_settings(config)
    except ConfigError as exc:
        _fail(str(exc))


def _grader(settings: Settings, judge: str | None, concurrency: int | None) -> RubricGrader:
    name = judge or settings.rubric.judge or settings.judge
    try:
        return RubricGrader(
            name,
            settings.judge_config(name),
            concurrency=concurrency or settings.rubric.concurrency,
            max_passage_tokens=settings.rubric.max_passage_tokens,
        )
    except ConfigError as exc:
        _fail(str(exc))


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def fmt(row: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )

    return "\n".join([fmt(header), fmt(["-" * w for w in widths]), *(fmt(r) for r in rows)])


def _num(x: float | None, digits: int = 4) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


@click.group("rubric")
def rubric_group() -> None:
    """Rubric grading (seed 001): question generation, grading to qrels/runs, trec_eval."""


# ---------------------------------------------------------------- generate


class _Query(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    id: EntryId
    query: Text


def _read_queries(path: Path) -> list[_Query]:
    queries: list[_Query] = []
    problems: list[str] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            queries.append(_Query.model_validate_json(line))
        except ValidationError as exc:
            problems.extend(
                f"line {number}: {'.'.join(str(p) for p in e['loc']) or '(line)'}: {e['msg']}"
                for e in exc.errors()
            )
    if problems or not queries:
        _fail(f"{path}: " + ("; ".join(problems) or "no queries"))
    return queries


@rubric_group.command("generate")
@click.argument("queries_path", metavar="QUERIES.jsonl", type=_IN)
@click.option("--out", "out_path", required=True, type=_OUT, help="Rubric set to write (YAML).")
@click.option("--judge", help="An 'openai' judge of the configuration (default: rubric.judge).")
@click.option("--config", type=_CONFIG, help="YAML configuration file.")
def generate_command(
    queries_path: Path, out_path: Path, judge: str | None, config: Path | None
) -> None:
    """Ask the LLM for 10 questions per query ({"id", "query"} per line) with the seed's
    prompt; writes them with reviewed: false, for people to edit before grading."""
    settings = _settings(config)
    configure_logging(settings.log_level, settings.secret_values())
    queries = _read_queries(queries_path)
    grader = _grader(settings, judge, None)
    entries, failed = [], []
    try:
        for q in queries:
            try:
                questions = grader.generate_questions(q.query)
            except RubricGradingFailed as exc:
                failed.append(f"{q.id} ({exc.reason}: {exc})")
                continue
            entries.append(
                RubricEntry(
                    id=q.id,
                    query=q.query,
                    questions=[RubricQuestion(question=t) for t in questions],
                    reviewed=False,
                )
            )
    finally:
        grader.close()
    header = (
        "# Generated by `casewatch rubric generate`: review every question, then set\n"
        "# reviewed: true (graders warn about entries still marked false).\n"
    )
    if not entries:
        # Nothing to review: no file (an empty rubric set would only fail later, in grading).
        _fail(
            f"no questions were generated, so {out_path} was not written: " + "; ".join(failed),
            code=1,
        )
    out_path.write_text(header + dump_rubric_set(entries, out_path), encoding="utf-8")
    click.echo(f"wrote {len(entries)} entries to {out_path} (reviewed: false)")
    if failed:
        _fail(f"no questions for {len(failed)} queries: {'; '.join(failed)}", code=1)


# ---------------------------------------------------------------- grade


@rubric_group.command("grade")
@click.argument("rubrics_path", metavar="RUBRICS.yaml", type=_IN)
@click.argument("responses", metavar="RESPONSES.jsonl...", type=_IN, nargs=-1, required=True)
@click.option(
    "--out-dir", required=True, type=_DIR, help="Writes qrels.txt, SYSTEM.run, grades.jsonl."
)
@click.option(
    "-m",
    "m",
    type=click.IntRange(1, 10),
    default=1,
    show_default=True,
    help="Label = the best grade reached by at least m questions.",
)
@click.option("--judge", help="An 'openai' judge of the configuration (default: rubric.judge).")
@click.option("--concurrency", type=click.IntRange(1, 64), help="Grading requests in flight.")
@click.option("--config", type=_CONFIG, help="YAML configuration file.")
def grade_command(
    rubrics_path: Path,
    responses: tuple[Path, ...],
    out_dir: Path,
    m: int,
    judge: str | None,
    concurrency: int | None,
    config: Path | None,
) -> None:
    """Grade every passage of the responses on its query's rubric; write the qrels
    (query 0 doc relevance), a TREC run per system and the grades with extracted answers."""
    settings = _settings(config)
    configure_logging(settings.log_level, settings.secret_values())
    try:
        rubrics = load_rubric_set(rubrics_path)
        items = read_responses(responses, rubrics)
    except InvalidInput as exc:
        _fail(str(exc))
    unreviewed = sorted({r.query for r in items} & set(rubrics.unreviewed))
    if unreviewed:
        click.echo(
            f"casewatch: warning: {len(unreviewed)} rubric entries are not reviewed "
            f"(reviewed: false): {', '.join(unreviewed)}",
            err=True,
        )
    grader = _grader(settings, judge, concurrency)
    try:
        result = grade_responses(
            items, rubrics, grader.grade_passage, m=m, max_tokens=grader.max_passage_tokens
        )
    finally:
        grader.close()
    counts = ", ".join(f"{p} {n}" for p, n in result.path_counts.items())
    click.echo(f"graded {len(result.gradings)} passages; parse paths: {counts}")
    if result.failures:
        listed = ", ".join(f"{q}/{d} ({why})" for (q, d), why in sorted(result.failures.items()))
        _fail(f"{len(result.failures)} passages could not be graded, no file written: {listed}", 1)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "qrels.txt").write_text(format_qrels(result.qrels), encoding="utf-8")
    for system, run in sorted(result.runs.items()):
        (out_dir / f"{system}.run").write_text(format_run(run, system), encoding="utf-8")
    with (out_dir / "grades.jsonl").open("w", encoding="utf-8") as f:
        for row in result.audit_rows():
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    click.echo(f"wrote {out_dir}/qrels.txt, grades.jsonl and {len(result.runs)} run files")


# ---------------------------------------------------------------- evaluate


def _system_name(path: Path) -> str:
    with path.open(encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if len(parts) == 6:
                return parts[5]
    return path.stem


def _corr_cells(c: Correlation) -> list[str]:
    return [str(c.n), _num(c.spearman), _num(c.spearman_p), _num(c.kendall), _num(c.kendall_p)]


@rubric_group.command("evaluate")
@click.argument("qrels_path", metavar="QRELS", type=_IN)
@click.argument("run_paths", metavar="RUN...", type=_IN, nargs=-1, required=True)
@click.option("--reference-qrels", type=_IN, help="Leaderboard correlation vs these qrels.")
@click.option("--reference-ranking", type=_IN, help="Or vs system names, one a line, best first.")
@click.option(
    "--level",
    "relevance_level",
    type=click.IntRange(0, 5),
    default=1,
    show_default=True,
    help="Minimum label counted relevant (trec_eval -l).",
)
@click.option(
    "--reference-level",
    type=click.IntRange(0, 100),
    default=1,
    show_default=True,
    help="The same for the reference qrels (their own scale).",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON.")
def evaluate_command(
    qrels_path: Path,
    run_paths: tuple[Path, ...],
    reference_qrels: Path | None,
    reference_ranking: Path | None,
    relevance_level: int,
    reference_level: int,
    as_json: bool,
) -> None:
    """trec_eval measures (nDCG@10, P@10, MAP) per run with pytrec_eval, and the Spearman /
    Kendall correlation of the leaderboard with a reference."""
    if reference_qrels is not None and reference_ranking is not None:
        _fail("give --reference-qrels or --reference-ranking, not both")
    try:
        qrels = read_qrels(qrels_path)
        runs = {}
        for path in run_paths:
            name = _system_name(path)
            if name in runs:
                _fail(f"two runs are named {name!r} ({path})")
            runs[name] = read_run(path)
        board = leaderboard(
            qrels,
            runs,
            relevance_level=relevance_level,
            reference_relevance_level=reference_level,
            reference_qrels=read_qrels(reference_qrels) if reference_qrels else None,
            reference_ranking=read_ranking(
                reference_ranking.read_text(encoding="utf-8").splitlines()
            )
            if reference_ranking
            else None,
        )
    except (TrecFormatError, OSError) as exc:
        _fail(str(exc))
    if as_json:
        doc: dict[str, Any] = {
            "scores": board.scores,
            "reference": board.reference,
            "correlations": {
                m: {"n": c.n, "spearman": c.spearman, "kendall": c.kendall, "notes": list(c.notes)}
                for m, c in board.correlations.items()
            },
        }
        click.echo(json.dumps(doc))
        return
    measures = list(DEFAULT_MEASURES)
    header = ["system", *(MEASURE_TITLES[m] for m in measures)]
    if board.reference is not None:
        header += [f"ref {MEASURE_TITLES[m]}" for m in measures]
    ordered = sorted(board.systems, key=lambda s: -board.scores[s]["ndcg_cut_10"])
    rows = []
    for s in ordered:
        row = [s, *(_num(board.scores[s][m]) for m in measures)]
        if board.reference is not None:
            row += [_num(board.reference[s][m]) for m in measures]
        rows.append(row)
    click.echo(_table(header, rows))
    if board.correlations:
        click.echo("\nleaderboard correlation with the reference:")
        corr_rows = [[MEASURE_TITLES[m], *_corr_cells(c)] for m, c in board.correlations.items()]
        click.echo(_table(["measure", "n", "Spearman ρ", "p", "Kendall τ", "p"], corr_rows))
        notes = [n for c in board.correlations.values() for n in c.notes]
        for note in dict.fromkeys(notes):
            click.echo(f"  note: {note}")


COMMANDS: list[click.Command] = [rubric_group]
