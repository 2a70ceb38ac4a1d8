"""``casewatch compare --cases A B``: two assistants compared on the cases both answered, with
the case judge's case scores as the unit (``monitor.stats.case_comparison``), read from the
store: each side's scored cases are the current case verdicts (``case_labels.case_frame``)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from monitor.commands.batch_report import case_comparison_text
from monitor.commands.store_access import check_assistant, open_store
from monitor.commands.usage import fail
from monitor.errors import CasewatchError
from monitor.stats.case_comparison import CaseScore, compare_cases
from monitor.storage.case_labels import case_frame
from monitor.storage.store import Store


def _cases(store: Store, assistant: str) -> list[CaseScore]:
    return [
        CaseScore(r.conversation_id, r.case_score, r.metric_scores, r.outcome, r.judge_config_hash)
        for r in case_frame(store, assistant)
        if r.case_score is not None
    ]


def compare_stored_cases(
    a: str, b: str, db: str | None, config_file: Path | None, *, as_json: bool
) -> None:
    with open_store(db, config_file, need_turns=True) as store:
        check_assistant(store, a)
        check_assistant(store, b)
        try:
            a_cases, b_cases = _cases(store, a), _cases(store, b)
        except CasewatchError as exc:
            fail(str(exc))
    if not a_cases or not b_cases:
        empty = a if not a_cases else b
        fail(f"{empty} has no scored case yet (cases are judged once their conversation goes "
             "quiet: see cases.idle_seconds)")  # fmt: skip
    result = compare_cases(a, a_cases, b, b_cases)
    if as_json:
        click.echo(json.dumps(result.to_dict()))
    else:
        click.echo(case_comparison_text(result))
