"""``casewatch pairwise`` and ``casewatch tournament``: DICE's pairwise comparisons offline.

Both read turn events (JSON Lines, schema v1) and pair them by (conversation_id, turn_index):
the same question answered by different systems. The question (case, history, query,
contexts, reference) comes from the first file; an answer whose own contexts differ is judged
with them. The judge is any configured judge (``--judge``; the offline ``heuristic`` one by
default, whose decisions carry no logprobs and so are all ``confidence: unknown``).

Operator errors (bad config, unreadable or invalid files) print one message and exit 2.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import click
from pydantic import ValidationError

from monitor.commands.output import num, table
from monitor.commands.usage import fail as _fail
from monitor.commands.usage import settings_or_fail
from monitor.config.settings import Settings
from monitor.errors import ConfigError, validation_error_lines
from monitor.judging.pairwise_factory import build_pairwise_judge
from monitor.judging.pairwise_judge import PairwiseJudge, PairwiseOptions
from monitor.judging.pairwise_prompt import PairwiseAnswer, PairwiseQuestion
from monitor.reports.pairwise_report import PairwiseItem, summarise
from monitor.runtime.logs import configure_logging
from monitor.runtime.workers import fan_out
from monitor.schema.turn import TurnEvent
from monitor.stats.tournament import (
    TournamentResult,
    bootstrap_intervals,
    default_rounds,
    round_robin,
    swiss,
)

_IN = click.Path(exists=True, dir_okay=False, readable=True, path_type=Path)
_OUT = click.Path(dir_okay=False, writable=True, path_type=Path)
_CONFIG = click.Path(dir_okay=False, path_type=Path)

Key = tuple[str, int]


def load_turns(path: Path) -> dict[Key, TurnEvent]:
    """Turns of one answer set by (conversation_id, turn_index); exits 2 naming the line of
    the first invalid or repeated record."""
    turns: dict[Key, TurnEvent] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        _fail(f"cannot read {path}: {exc}")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            turn = TurnEvent.model_validate_json(line)
        except ValidationError as exc:
            first = validation_error_lines(exc, limit=1)[0]
            _fail(f"{path}:{number}: not a valid turn event: {first}")
        key = (turn.conversation_id, turn.turn_index)
        if key in turns:
            _fail(f"{path}:{number}: turn {key[0]}#{key[1]} appears twice")
        turns[key] = turn
    if not turns:
        _fail(f"{path}: no turn events")
    return turns


def question_of(turn: TurnEvent) -> PairwiseQuestion:
    return PairwiseQuestion(
        case=turn.case,
        history=turn.history,
        query=turn.query,
        contexts=turn.contexts,
        reference=turn.reference,
    )


def answer_of(turn: TurnEvent, question: PairwiseQuestion) -> PairwiseAnswer:
    own = None if turn.contexts == question.contexts else turn.contexts
    return PairwiseAnswer(text=turn.answer, contexts=own)


def _judge(settings: Settings, name: str | None, swap: bool) -> PairwiseJudge:
    try:
        name = name or settings.judge
        return build_pairwise_judge(name, settings.judge_config(name), PairwiseOptions(swap=swap))
    except ConfigError as exc:
        _fail(str(exc))


def judge_sets(
    judge: PairwiseJudge,
    first: dict[Key, TurnEvent],
    second: dict[Key, TurnEvent],
    keys: Sequence[Key],
    concurrency: int,
    question_source: dict[Key, TurnEvent] | None = None,
) -> list[PairwiseItem]:
    source = question_source or first

    def one(key: Key) -> PairwiseItem:
        question = question_of(source[key])
        judgment = judge.compare(
            question, answer_of(first[key], question), answer_of(second[key], question)
        )
        return PairwiseItem(f"{key[0]}#{key[1]}", judgment)

    # Ctrl-C cancels the comparisons not started (fan_out), so the command stops at once.
    return list(fan_out(one, keys, concurrency, "pairwise"))


def _interrupted(progress: str) -> NoReturn:
    _fail(f"interrupted ({progress}): comparisons not started were cancelled; nothing written", 130)


def _row(item: PairwiseItem) -> str:
    j = item.judgment
    if not j.ok:
        return f"{item.question_id:<40} failed ({j.failure_reason})"
    delta = j.forward.delta_p
    kinds = "/".join(j.kinds)
    return (
        f"{item.question_id:<40} {j.outcome:<5} score {num(j.score_first, 3)}  {kinds:<12} "
        f"ΔP {num(delta, 2)}  order gap {num(j.disagreement, 2)}"
    )


# ---------------------------------------------------------------- pairwise


@click.command("pairwise")
@click.argument("a_path", metavar="A.jsonl", type=_IN)
@click.argument("b_path", metavar="B.jsonl", type=_IN)
@click.option("--judge", "judge_name", help="Configured judge (default: the `judge` setting).")
@click.option("--no-swap", is_flag=True, help="Judge one order only (no position control).")
@click.option("--concurrency", type=click.IntRange(1, 256), default=4, show_default=True)
@click.option("--config", type=_CONFIG, help="YAML configuration file.")
@click.option("--out", "out_path", type=_OUT, help="Every judgment, both orders (JSONL).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def pairwise_command(
    a_path: Path,
    b_path: Path,
    judge_name: str | None,
    no_swap: bool,
    concurrency: int,
    config: Path | None,
    out_path: Path | None,
    as_json: bool,
) -> None:
    """Compare two answer sets to the same questions: per question A/B/Tie with confidence,
    totals, and A's win rate with a 95 % bootstrap interval."""
    settings = settings_or_fail(config)
    configure_logging(settings.log_level, settings.secret_values())
    a, b = load_turns(a_path), load_turns(b_path)
    keys = sorted(a.keys() & b.keys())
    if not keys:
        _fail(f"{a_path} and {b_path} share no (conversation_id, turn_index)")
    judge = _judge(settings, judge_name, not no_swap)
    try:
        items = judge_sets(judge, a, b, keys, concurrency)
    except KeyboardInterrupt:
        _interrupted(f"{len(keys)} comparisons queued")
    finally:
        judge.close()
    summary = summarise(items)
    if out_path is not None:
        with out_path.open("w", encoding="utf-8") as f:
            for item in items:
                doc = {"question": item.question_id, **item.judgment.model_dump(mode="json")}
                f.write(json.dumps(doc) + "\n")
    result = {
        "a": str(a_path),
        "b": str(b_path),
        "judge": judge.name,
        "unpaired": {"a": len(a) - len(keys), "b": len(b) - len(keys)},
        **summary.as_dict(),
    }
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    for item in items:
        click.echo(_row(item))
    o = summary.outcomes
    click.echo(
        f"\nA = {a_path.name}, B = {b_path.name}, judge {judge.name}: {len(keys)} questions "
        f"(unpaired: {len(a) - len(keys)} in A, {len(b) - len(keys)} in B)"
    )
    click.echo(f"A wins {o['win']}, ties {o['tie']}, loses {o['loss']}, failed {o['failed']}")
    ci = f" (95 % CI {num(summary.ci_low, 3)}–{num(summary.ci_high, 3)})" if summary.ci_low else ""
    click.echo(f"A's win rate (ties count half): {num(summary.win_rate, 3)}{ci}")
    click.echo(f"confidence: {dict(summary.kinds)}")
    if summary.position_disagreement is not None:
        click.echo(
            f"position disagreement: {num(summary.position_disagreement, 3)} "
            f"(winner changed with the order on {num(summary.label_flip_rate, 2)} of questions)"
        )


# ---------------------------------------------------------------- tournament


def _names(paths: Sequence[Path], sets: Sequence[dict[Key, TurnEvent]]) -> list[str]:
    names = []
    for path, turns in zip(paths, sets, strict=True):
        assistants = {t.assistant.name for t in turns.values()}
        names.append(assistants.pop() if len(assistants) == 1 else path.stem)
    if len(set(names)) != len(names):
        names = [p.stem for p in paths]
    if len(set(names)) != len(names):
        _fail("two systems have the same name: rename the files")
    return names


@click.command("tournament")
@click.argument("paths", metavar="SYSTEMS...", nargs=-1, required=True, type=_IN)
@click.option("--rounds", type=click.IntRange(1, 1000), help="Swiss rounds (⌈log2 n⌉ + 1).")
@click.option("--swiss/--round-robin", "use_swiss", default=True, help="Pairing scheme.")
@click.option("--plot", "plot_path", type=_OUT, help="Write ratings and match graph (PNG).")
@click.option("--judge", "judge_name", help="Configured judge (default: the `judge` setting).")
@click.option("--no-swap", is_flag=True, help="Judge one order only (no position control).")
@click.option("--resamples", type=click.IntRange(1, 100_000), default=1000, show_default=True)
@click.option("--concurrency", type=click.IntRange(1, 256), default=4, show_default=True)
@click.option("--config", type=_CONFIG, help="YAML configuration file.")
@click.option("--json", "as_json", is_flag=True, help="Print the ranking as JSON.")
def tournament_command(
    paths: tuple[Path, ...],
    rounds: int | None,
    use_swiss: bool,
    plot_path: Path | None,
    judge_name: str | None,
    no_swap: bool,
    resamples: int,
    concurrency: int,
    config: Path | None,
    as_json: bool,
) -> None:
    """Rank systems (one turn-event file each) by a Bradley-Terry fit on the Elo scale to a Swiss
    tournament (default) or a round-robin; ratings come with 95 % bootstrap intervals."""
    if len(paths) < 2:
        _fail("a tournament needs at least two systems")
    settings = settings_or_fail(config)
    configure_logging(settings.log_level, settings.secret_values())
    sets = [load_turns(p) for p in paths]
    names = _names(paths, sets)
    by_name = dict(zip(names, sets, strict=True))
    keys = sorted(set.intersection(*(set(s) for s in sets)))
    if not keys:
        _fail("the systems share no (conversation_id, turn_index)")
    judge = _judge(settings, judge_name, not no_swap)
    calls = {"pairs": 0, "failed": 0}

    def play(a: str, b: str) -> dict[str, float]:
        items = judge_sets(judge, by_name[a], by_name[b], keys, concurrency, sets[0])
        calls["pairs"] += len(items)
        scores = {}
        for item in items:
            if item.judgment.ok and item.judgment.score_first is not None:
                scores[item.question_id] = item.judgment.score_first
            else:
                calls["failed"] += 1
        return scores

    try:
        result: TournamentResult
        if use_swiss:
            result = swiss(names, play, rounds=rounds or default_rounds(len(names)))
        else:
            result = round_robin(names, play)
    except KeyboardInterrupt:
        _interrupted(f"{calls['pairs']} comparisons finished")
    finally:
        judge.close()
    intervals = bootstrap_intervals(names, result.matches, resamples=resamples)
    ranking = result.ranking()
    if plot_path is not None:
        from monitor.reports.tournament_plot import plot_tournament

        try:
            plot_tournament(
                plot_path,
                ranking,
                result.ratings,
                intervals,
                result.matches,
                title=f"{'Swiss' if use_swiss else 'Round-robin'}: {len(names)} systems, "
                f"{result.match_count} matches, {len(keys)} questions",
            )
        except ConfigError as exc:
            _fail(str(exc))
    played = _played(result)
    rows: list[dict[str, Any]] = [
        {
            "rank": i,
            "system": s,
            "rating": result.ratings[s],
            "ci95": [intervals[s].low, intervals[s].high],
            "matches": played[s][0],
            "mean_score": played[s][1],
        }
        for i, s in enumerate(ranking, start=1)
    ]
    if as_json:
        doc: dict[str, Any] = {
            "scheme": "swiss" if use_swiss else "round-robin",
            "rounds": len(result.rounds),
            "matches": result.match_count,
            "questions": len(keys),
            "judged_pairs": calls["pairs"],
            "failed_pairs": calls["failed"],
            "ranking": rows,
        }
        click.echo(json.dumps(doc, indent=2))
        return
    header = ["rank", "system", "Elo", "95 % CI", "matches", "mean score"]
    cells = [
        [
            str(row["rank"]),
            row["system"],
            f"{row['rating']:.1f}",
            "{:.1f}–{:.1f}".format(*row["ci95"]),
            str(row["matches"]),
            num(row["mean_score"], 3),
        ]
        for row in rows
    ]
    click.echo(table(header, cells, left=frozenset({1}), rule=False))
    click.echo(
        f"\n{'Swiss' if use_swiss else 'round-robin'}: {len(result.rounds)} rounds, "
        f"{result.match_count} matches, {len(keys)} questions, judge {judge.name} "
        f"({calls['failed']} of {calls['pairs']} pairs failed)"
    )
    if plot_path is not None:
        click.echo(f"plot written to {plot_path}")


def _played(result: TournamentResult) -> dict[str, tuple[int, float | None]]:
    count: dict[str, int] = dict.fromkeys(result.systems, 0)
    totals: dict[str, list[float]] = {s: [] for s in result.systems}
    for m in result.matches:
        mean = m.mean_a
        count[m.a] += 1
        count[m.b] += 1
        if mean is not None:
            totals[m.a].append(mean)
            totals[m.b].append(1.0 - mean)
    return {
        s: (count[s], sum(totals[s]) / len(totals[s]) if totals[s] else None)
        for s in result.systems
    }


COMMANDS: list[click.Command] = [pairwise_command, tournament_command]
