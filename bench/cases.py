"""Case judging's cost against judging every turn, and the store's growth per million cases.

    .venv/bin/python bench/cases.py                 # examples/turns.jsonl, SQLite
    .venv/bin/python bench/cases.py --cases 5000    # more verdicts written for the growth

cost: the conversations of examples/turns.jsonl (each assistant's side of a conversation is a
case). Per conversation, judging every turn with one judge costs one call per turn, each prompt
the turn judge's (``monitor.judging.prompt.build_messages``); judging the case costs one call,
its prompt the case judge's (``monitor.judging.case_prompt.build_case_prompt``, default
``cases.max_prompt_chars``). Tokens are counted as the suite's fake judge counts them (4
characters a token) over the prompt messages; the reply is sized as the offline judges' JSON
replies for the same turns and cases. Reported per conversation (median and total): calls and
tokens of each, and the case call as a share of judging every turn. A panel of two judges
doubles both sides alike.

growth: ``--cases`` case verdicts of the examples' cases (the offline case judge's outcome,
scores and justifications, one judgment each, as the job writes them) are written into a fresh
SQLite store through ``save_case_verdict``; the file's growth per verdict, times a million, is
the store's growth per million judged cases (one version each; a resumed case adds another).

The last line is one JSON object of the figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # bench/ is not an installed package

from monitor.config.cases import CasesConfig  # noqa: E402
from monitor.judging.case_prompt import build_case_prompt  # noqa: E402
from monitor.judging.heuristic.case_judge import HeuristicCaseJudge  # noqa: E402
from monitor.judging.heuristic.judge import HeuristicJudge  # noqa: E402
from monitor.judging.prompt import build_messages  # noqa: E402
from monitor.schema.case import Case, CaseTurn, CaseVerdict  # noqa: E402
from monitor.schema.turn import TurnEvent  # noqa: E402
from monitor.scoring import case as case_scoring  # noqa: E402
from monitor.storage.case_queries import save_case_verdict  # noqa: E402
from monitor.storage.store import Store  # noqa: E402

CHARS_PER_TOKEN = 4
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _tokens(messages: list[dict[str, str]]) -> int:
    return sum(len(m["content"]) for m in messages) // CHARS_PER_TOKEN + 1


def _cases(path: Path) -> list[Case]:
    grouped: dict[tuple[str, str], list[TurnEvent]] = defaultdict(list)
    for line in path.read_text().splitlines():
        event = TurnEvent.model_validate_json(line)
        grouped[(event.assistant.name, event.conversation_id)].append(event)
    cases = []
    for (assistant, conversation), events in sorted(grouped.items()):
        events.sort(key=lambda e: e.turn_index)
        turns = tuple(CaseTurn(e, T0 + timedelta(seconds=i)) for i, e in enumerate(events))
        cases.append(Case(assistant, conversation, turns))
    return cases


def cost(cases: list[Case]) -> dict[str, float]:
    turn_judge = HeuristicJudge()
    case_judge = HeuristicCaseJudge()
    max_chars = CasesConfig().max_prompt_chars
    rows = []
    for case in cases:
        turn_in = sum(_tokens(build_messages(e)) for e in case.events)
        turn_out = sum(
            len(turn_judge.judge(e).raw_output or "") // CHARS_PER_TOKEN + 1 for e in case.events
        )
        judgment, _ = case_judge.judge_case(case)
        case_in = _tokens(build_case_prompt(case, max_chars).messages)
        case_out = len(judgment.raw_output or "") // CHARS_PER_TOKEN + 1
        rows.append((len(case.events), turn_in + turn_out, case_in + case_out))
    turns = [r[0] for r in rows]
    every_turn = [r[1] for r in rows]
    whole = [r[2] for r in rows]
    share = [c / t for _, t, c in rows]
    return {
        "conversations": len(rows),
        "turns_per_conversation_median": statistics.median(turns),
        "calls_every_turn_per_conversation": statistics.mean(turns),
        "calls_case_per_conversation": 1.0,
        "tokens_every_turn_per_conversation_median": statistics.median(every_turn),
        "tokens_case_per_conversation_median": statistics.median(whole),
        "case_tokens_share_of_every_turn_median": round(statistics.median(share), 3),
        "case_tokens_share_of_every_turn_total": round(sum(whole) / sum(every_turn), 3),
    }


def growth(cases: list[Case], n: int) -> dict[str, float]:
    judge = HeuristicCaseJudge()
    verdicts = []
    for case in cases:
        judgment, cut = judge.judge_case(case)
        assert judgment.scores is not None
        scores = judgment.scores.score_map()
        outcome = judgment.scores.resolution_outcome
        verdicts.append((case, judgment, scores, outcome, cut))
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "cases.db"
        store = Store(f"sqlite:///{db}")
        try:
            store.migrate()
            before = db.stat().st_size
            for i in range(n):
                case, judgment, scores, outcome, cut = verdicts[i % len(verdicts)]
                verdict = CaseVerdict(
                    conversation_id=f"{case.conversation_id}-{i}",
                    version=1,
                    assistant=case.assistant,
                    status="ok",
                    close_reason="idle",
                    turns=len(case.turns),
                    turns_cut=cut,
                    covered_until=T0,
                    judge_config_hash="bench",
                    case_score=case_scoring.case_score(scores),
                    case_band=case_scoring.case_band(scores, outcome),
                    resolution_outcome=outcome,
                    metric_scores=scores,
                    metric_bands=case_scoring.metric_bands(scores),
                    turn_mean_s_final=0.8,
                    judgments=(judgment,),
                )
                save_case_verdict(store, verdict, T0, fence=None)
            after = db.stat().st_size
        finally:
            store.close()
    per_case = (after - before) / n
    return {
        "verdicts_written": n,
        "bytes_per_case_verdict": round(per_case),
        "store_growth_per_million_cases_mb": round(per_case * 1e6 / 2**20),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=Path, default=ROOT / "examples" / "turns.jsonl")
    parser.add_argument("--cases", type=int, default=2000, help="Verdicts written for growth.")
    args = parser.parse_args()
    cases = _cases(args.turns)
    figures = cost(cases)
    print(
        f"{figures['conversations']} conversations, median "
        f"{figures['turns_per_conversation_median']} turns each"
    )
    print(
        f"calls per conversation: every turn {figures['calls_every_turn_per_conversation']:.2f}, "
        f"the case 1"
    )
    print(
        f"tokens per conversation (median): every turn "
        f"{figures['tokens_every_turn_per_conversation_median']}, the case "
        f"{figures['tokens_case_per_conversation_median']} "
        f"({figures['case_tokens_share_of_every_turn_median']:.0%} of every turn)"
    )
    grown = growth(cases, args.cases)
    figures.update(grown)
    print(
        f"store: {grown['bytes_per_case_verdict']} bytes per case verdict (SQLite), "
        f"{grown['store_growth_per_million_cases_mb']} MB per million cases"
    )
    print(json.dumps(figures, sort_keys=True))


if __name__ == "__main__":
    main()
