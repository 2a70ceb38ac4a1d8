"""What dynamic arbitration (DAFE) costs and buys, with scripted judges.

Three judges ("judge-a", "judge-b", "judge-arbiter") share an in-process fake
OpenAI-compatible server (tests/fake_judge_server.py) with equal prices, and score the turns
of examples/turns.jsonl through the real ``JudgePanel`` (real openai client, real HTTP). Their
replies are derived from the human bands of examples/human_labels.jsonl:

- every judge scores each metric inside the human band, at a deterministic jitter;
- on exactly ``--disagree`` of the turns (the first by a hash of the event id) one primary
  (A or B, alternating) puts one labelled metric one band off: the primaries disagree there
  and nowhere else;
- the arbiter answers the human band, except on ``--arbiter-error`` of its calls where it
  repeats the erring primary's band (so arbitration is not scripted to be perfect).

Expected: arbiter calls / turns = the disagreement share (0.20), panel cost / cost of three
judges on every turn ≈ (2 + 0.2) / 3 ≈ 0.733, and agreement with people after arbitration
above each primary alone. Prints the agreement table, then one JSON line of results.

    .venv/bin/python bench/arbitration_cost.py [--disagree 0.2] [--arbiter-error 0.1]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests/ is not an installed package

from monitor.commands.batch import panel_text  # noqa: E402
from monitor.config.settings import load_settings  # noqa: E402
from monitor.judging.arbitration import PanelOutcome  # noqa: E402
from monitor.judging.evaluator import build_evaluator  # noqa: E402
from monitor.judging.prompt import case_data  # noqa: E402
from monitor.reports import panel_report  # noqa: E402
from monitor.runtime.logs import configure_logging  # noqa: E402
from monitor.schema.turn import METRICS, Band, TurnEvent  # noqa: E402
from monitor.stats.agreement import TURN_KEY  # noqa: E402
from tests.fake_judge_server import FakeJudgeServer, Reply, case_data_of, scores  # noqa: E402

A, B, ARB = "judge-a", "judge-b", "judge-arbiter"
# Inner part of each band of the Case-Aware paper's appendix B, so jitter never crosses an edge.
BAND_RANGES = {
    Band.SEVERE: (0.03, 0.28),
    Band.MODERATE: (0.33, 0.58),
    Band.MINOR: (0.63, 0.83),
    Band.NONE: (0.88, 0.99),
}
BAND_ORDER = (Band.SEVERE, Band.MODERATE, Band.MINOR, Band.NONE)


def unit(*parts: object) -> float:
    """A stable pseudo-random number in [0, 1) from the parts."""
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def score_in(band: Band, *seed: object) -> float:
    lo, hi = BAND_RANGES[band]
    return round(lo + (hi - lo) * unit(*seed), 4)


def off_by_one(band: Band) -> Band:
    i = BAND_ORDER.index(band)
    return BAND_ORDER[i - 1] if i > 0 else BAND_ORDER[1]


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def read_labels(path: Path) -> dict[str, dict[str, str]]:
    """event_id → {metric or turn_band: band}; rows either nest them under 'labels' or not."""
    out: dict[str, dict[str, str]] = {}
    for row in read_jsonl(path):
        source = row.get("labels", row)
        keys = (*METRICS, TURN_KEY)
        out[str(row["event_id"])] = {k: str(v) for k, v in source.items() if k in keys}
    return out


class Script:
    """The three judges' replies, decided per turn from the human bands."""

    def __init__(
        self,
        turns: list[TurnEvent],
        labels: Mapping[str, Mapping[str, str]],
        disagree_share: float,
        arbiter_error: float,
    ) -> None:
        self.by_data: dict[str, str] = {}
        for t in turns:
            self.by_data[_data_key(case_data(t))] = t.event_id
        self.labels = labels
        ranked = sorted((t.event_id for t in turns), key=lambda e: unit("disagree", e))
        self.disputed = ranked[: round(disagree_share * len(turns))]
        order = {e: i for i, e in enumerate(self.disputed)}
        # Which primary errs, on which metric, and whether the arbiter errs with it.
        self.noise: dict[str, tuple[str, str, bool]] = {}
        for e in self.disputed:
            labelled = [m for m in METRICS if m in labels.get(e, {})] or list(METRICS)
            metric = labelled[int(unit("metric", e) * len(labelled))]
            erring = A if order[e] % 2 == 0 else B
            self.noise[e] = (erring, metric, unit("arbiter", e) < arbiter_error)

    def truth(self, event_id: str, metric: str) -> Band:
        return Band(self.labels.get(event_id, {}).get(metric, Band.NONE.value))

    def respond(self, request: dict[str, Any]) -> Reply:
        data = case_data_of(request)
        event_id = self.by_data.get(_data_key(data)) if data is not None else None
        if event_id is None:
            raise RuntimeError("the fake judge got a turn the bench did not send")
        model = str(request["model"])
        noise = self.noise.get(event_id)
        doc = {}
        for m in METRICS:
            band = self.truth(event_id, m)
            if noise is not None and noise[1] == m:
                erring, _, arbiter_errs = noise
                if model == erring or (model == ARB and arbiter_errs):
                    band = off_by_one(band)
            doc[m] = score_in(band, model, event_id, m)
        return scores(doc)


def tagged(turn: TurnEvent) -> TurnEvent:
    """The turn with its event id in the case description.

    A judge never sees ids, and the stable and canary assistants often give the very same
    answer: without a tag the scripted judges could not tell such turns apart.
    """
    case = turn.case.model_copy(
        update={"description": f"{turn.case.description}\n(bench ref {turn.event_id})"}
    )
    return turn.model_copy(update={"case": case})


def _data_key(data: Mapping[str, Any]) -> str:
    return json.dumps(data, sort_keys=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=Path, default=ROOT / "examples/turns.jsonl")
    parser.add_argument("--labels", type=Path, default=ROOT / "examples/human_labels.jsonl")
    parser.add_argument("--disagree", type=float, default=0.2, help="share of disputed turns")
    parser.add_argument("--arbiter-error", type=float, default=0.1)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args(argv)
    configure_logging("error", json=True)

    turns = [tagged(TurnEvent.model_validate(row)) for row in read_jsonl(args.turns)]
    labels = read_labels(args.labels)
    script = Script(turns, labels, args.disagree, args.arbiter_error)
    price = {"price_input_per_mtok": 1.0, "price_output_per_mtok": 4.0}  # same for all three
    outcomes: list[PanelOutcome] = []
    lock = threading.Lock()

    def observe(outcome: PanelOutcome) -> None:
        with lock:
            outcomes.append(outcome)

    with FakeJudgeServer(script.respond, record=True) as server:
        judges = {
            n: {"kind": "openai", "base_url": server.base_url, "model": n, "api_key": "bench"}
            | price
            for n in (A, B, ARB)
        }
        settings = load_settings(
            judges=judges,
            panel={"primaries": [A, B], "arbiter": ARB},
        )
        panel = build_evaluator(settings, concurrency=args.concurrency, on_panel_result=observe)
        try:
            with concurrent.futures.ThreadPoolExecutor(args.concurrency) as pool:
                verdicts = list(pool.map(panel.evaluate, turns))
        finally:
            panel.close()
        arbiter_requests = sum(1 for r in server.requests if r["model"] == ARB)

    report = panel_report.panel_report(verdicts, labels, weights=settings.weights())
    arbitrated = {v.event_id for v in verdicts if v.arbitrated}
    n = len(turns)
    pooled = {e.name: (e.row(panel_report.POOLED) or None, e.coverage) for e in report.evaluators}
    results = {
        "bench": "arbitration_cost",
        "turns": n,
        "labelled_turns": report.labelled,
        "disputed_scripted": len(script.disputed),
        "arbiter_calls": report.arbiter_calls,
        "arbiter_http_requests": arbiter_requests,
        "arbiter_calls_per_turn": report.arbiter_call_share,
        "arbitrated_exactly_the_scripted_turns": arbitrated == set(script.disputed),
        "disagreement_rate": report.disagreement_rate,
        "cost_ratio_vs_three_judges": round(report.cost_ratio, 4),
        "cost_basis": report.cost_basis,
        "cost_usd": round(report.cost_usd, 6),
        "three_judges_cost_usd": round(report.three_judges_cost_usd, 6),
        "call_ratio_vs_three_judges": round((2 * n + report.arbiter_calls) / (3 * n), 4),
        # With 144 turns, 20 % is 28.8: the scripted share is round(0.2 · n) / n.
        "scripted_share": round(len(script.disputed) / n, 4),
        "expected_ratio": round((2 + len(script.disputed) / n) / 3, 4),
        "sided_with": {
            s: sum(1 for o in outcomes if o.sided_with == s)
            for s in ("primary_a", "primary_b", "neither", "both")
        },
        "pooled_agreement": {
            name: {
                "coverage": cov,
                "accuracy": row.accuracy if row else None,
                "kappa": row.kappa if row else None,
                "macro_f1": row.macro_f1 if row else None,
            }
            for name, (row, cov) in pooled.items()
        },
        "judge_failed": report.judge_failed,
    }
    print(panel_text(report))
    print()
    print(json.dumps(results, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
