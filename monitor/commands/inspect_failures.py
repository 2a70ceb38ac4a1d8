"""``casewatch inspect failures`` and ``inspect failure MODE_ID``: the failure modes the
failure-modes job stored, largest first with their trend, and one mode's turns newest first
with the judges' reasons; ``--cases`` lists the modes of failed cases instead, and a case
mode's id shows its cases (conversation ids, newest first, with the case judge's reasons).
Read-only; ``--json`` prints stable documents. ``inspect.py`` adds
both to the ``inspect`` group.

``--since-change`` ranks the modes among the failed turns since each alarmed detector's
change point, as the regression page names them; ``inspect failure`` takes a mode's id
or its number (the page's).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import click

from monitor.commands.store_access import check_assistant, db_options, open_store, store_args
from monitor.commands.usage import fail
from monitor.errors import CasewatchError
from monitor.reports.failure_view import (
    SINCE_CHANGE_LIMIT,
    failures_doc,
    mode_turns_doc,
    render_failures,
    render_mode,
    render_since_change,
    since_change_doc,
)
from monitor.runtime.program import casewatch_program
from monitor.stats.detector_state import DetectorState
from monitor.storage.detection_queries import read_states
from monitor.storage.failure_modes import (
    CASE,
    TURN,
    get_mode,
    latest_runs,
    list_modes,
    mode_cases,
    mode_id_of,
    mode_turns,
    modes_since,
)

_MAX_WIDTH = 100


def _width() -> int:
    return min(shutil.get_terminal_size((_MAX_WIDTH, 24)).columns, _MAX_WIDTH)


def _dump(doc: Any) -> None:
    click.echo(json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False, default=str))


@click.command("failures")
@db_options
@click.option("--assistant", help="Only this assistant.")
@click.option("--all", "include_gone", is_flag=True,
              help="Also the modes the newest run no longer found.")  # fmt: skip
@click.option("--cases", is_flag=True,
              help="The modes of failed cases (whole conversations), not of turns.")  # fmt: skip
@click.option(
    "--since-change",
    is_flag=True,
    help="Among the failed turns since each alarmed detector's change point.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def failures_command(
    db: str | None,
    config_file: Path | None,
    assistant: str | None,
    include_gone: bool,
    since_change: bool,
    cases: bool,
    as_json: bool,
) -> None:
    """List failure modes (recurring causes of failed turns, or with --cases of failed cases),
    largest first, with their trend."""
    unit = CASE if cases else TURN
    if since_change:
        _since_change(db, config_file, assistant, as_json)
        return
    with open_store(db, config_file, need_turns=not cases) as store:
        if not cases:
            check_assistant(store, assistant)
        try:
            modes = list_modes(store, assistant, include_gone=include_gone, unit=unit)
            runs = latest_runs(store, assistant, unit)
        except CasewatchError as exc:
            fail(str(exc))
    if as_json:
        _dump(failures_doc(modes, runs))
    elif not runs and not modes:
        what = "failed cases' " if cases else ""
        click.echo(
            f"no {what}failure modes stored: the failure-modes job has not run on this store "
            "(failure_modes.enabled, on `casewatch run`)"
            + (", or no case was judged severe or moderate (failure_modes.cases)" if cases else "")
        )
    else:
        click.echo(render_failures(modes, runs, width=_width()))
        click.echo(
            f"{'cases' if cases else 'turns'} of a mode: {casewatch_program()} inspect failure "
            f"MODE_ID{store_args(db, config_file)}"
        )


@click.command("failure")
@db_options
@click.argument("mode_id")
@click.option("--limit", type=click.IntRange(1, 10_000), default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def failure_command(
    db: str | None, config_file: Path | None, mode_id: str, limit: int, as_json: bool
) -> None:
    """Show one failure mode: its turns (or a case mode's cases), newest first, with the
    judges' reasons."""
    mode_id = mode_id_of(mode_id)  # the id, or its number as the regression page prints it
    with open_store(db, config_file, need_turns=False) as store:
        try:
            mode = get_mode(store, mode_id)
            read = mode_cases if mode is not None and mode.unit == CASE else mode_turns
            turns = [] if mode is None else read(store, mode.assistant, mode_id, limit=limit)
        except CasewatchError as exc:
            fail(str(exc))
    if mode is None:
        fail(f"no failure mode has id {mode_id!r} (see `casewatch inspect failures`)")
    if as_json:
        _dump(mode_turns_doc(mode, turns))
    else:
        click.echo(render_mode(mode, turns, width=_width()))


def _since_change(db: str | None, config_file: Path | None, assistant: str | None,
                  as_json: bool) -> None:  # fmt: skip
    """The largest modes among the failed turns since each alarmed detector's change point
    (else its alarm), from the failure-modes job's newest grouping."""
    with open_store(db, config_file, need_turns=True) as store:
        check_assistant(store, assistant)
        try:
            found = []
            for state in (DetectorState.from_row(r) for r in read_states(store)):
                since = state.regression_start
                if since is None or assistant not in (None, state.assistant):
                    continue
                if state.signal.metric is None and state.signal.name != "turn_severe":
                    continue  # a case or outcome detector: not on the turns' clock
                ranked = modes_since(store, state.assistant, since, limit=SINCE_CHANGE_LIMIT)
                found.append((state, ranked))
        except CasewatchError as exc:
            fail(str(exc))
    if as_json:
        _dump(since_change_doc(found))
    elif not found:
        click.echo(
            "no detector is in alarm: no change point to rank the failure modes since "
            f"({casewatch_program()} detect{store_args(db, config_file)})"
        )
    else:
        click.echo(render_since_change(found, width=_width()))
        click.echo(
            f"turns of a mode: {casewatch_program()} inspect failure MODE_ID"
            f"{store_args(db, config_file)}"
        )
