"""The cascade against uniform sampling at the same LLM-call budget on the turns of examples/:
the real cheap look (the offline heuristic judge's band and the identifier tripwire) and, as the
LLM judge, an OpenAI-compatible judge client calling the fake judge server of the tests.

1. **The LLM judge's calls.** ``tests/fake_judge_server.FakeJudgeServer`` answers each judge
   request with the scores of the bands the turn was built with (``examples/human_labels.jsonl``;
   a turn without labels is clean: every metric ``none``), severe 0.15, moderate 0.45, minor
   0.72, none 0.93; casewatch's own OpenAI judge client asks it (``build_evaluator``, one judge)
   and its verdict's turn band says whether the turn is severe. A careful judge that knows the
   construction: the best case for any cheap look, and the heuristic judge was calibrated while
   this dataset was built, so the agreement here is optimistic (``casewatch cascade check``
   measures it on one's own traffic).
2. **The cheap look** of every turn: ``monitor.stream.steps.decisions.cheap_cell`` (the
   heuristic judge's band) and ``identifier_tripwire`` (a hit is an always-judge rule: judged
   with probability 1 under either strategy). Its agreement: the AUROC of the cheap band
   (severe > moderate > minor > none) for the LLM judge's severe call.
3. **Traffic** of ``--runs`` windows of ``--window`` turns: each turn is severe for the LLM judge
   with probability ``--severe-rate`` (5 %), then one of the example turns with that call, drawn
   at random (so every traffic turn is a real (cheap band, tripwire, LLM call) triple). Uniform
   judges the tripwire's turns and ``--rate`` of the others; the cascade judges the tripwire's
   turns and spends the same expected calls on the others with probabilities from
   ``monitor.stats.inclusion`` (risks from the pairs of a 2,000-turn warm-up at the floor and
   uniform rate, allocated with the 1 % floor, as the daemon does). Reported per strategy: LLM
   calls per turn, the bias (mean minus the window's true share) and mean 95 % width of the
   weighted severe share (Hajek, each judged turn weighing 1/pi, what the rules and panels now
   compute), and the bias of the unweighted share of the judged turns (what they computed
   before).
4. **Detection**: ``bench/cascade.py``'s model (a 5 -> 15 % step, both detectors calibrated to
   one false alarm per 200,000 turns of traffic, baselines from 20,000 judged reference turns)
   with the cheap bands' distributions given the LLM judge's call taken from the examples
   (half a turn added to each band, so no band has probability 0; the tripwire rule left out):
   the LLM calls the cascade needs for the uniform strategy's detection delay.

    .venv/bin/python bench/cascade_examples.py --runs 200 --seed 1
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # bench/ is not an installed package

from bench import cascade as simulated  # noqa: E402
from monitor.config.judges import JudgeConfig  # noqa: E402
from monitor.config.settings import load_settings  # noqa: E402
from monitor.judging.evaluator import build_evaluator  # noqa: E402
from monitor.judging.heuristic.tripwire import identifier_tripwire  # noqa: E402
from monitor.runtime.logs import configure_logging  # noqa: E402
from monitor.schema.turn import METRICS, Band, TurnEvent  # noqa: E402
from monitor.stats.inclusion import Pairs, allocate, risks  # noqa: E402
from monitor.stats.weighted_rates import hajek  # noqa: E402
from monitor.stream.steps.decisions import cheap_cell  # noqa: E402
from tests.fake_judge_server import FakeJudgeServer, Reply, case_data_of, scores  # noqa: E402

EXAMPLES = ROOT / "examples"
CELLS = ("severe", "moderate", "minor", "none")
BAND_SCORE = {"severe": 0.15, "moderate": 0.45, "minor": 0.72, "none": 0.93}
FLOOR = 0.01
WARM_UP = 2000


def load_turns() -> list[TurnEvent]:
    lines = (EXAMPLES / "turns.jsonl").read_text(encoding="utf-8").splitlines()
    return [TurnEvent.model_validate_json(line) for line in lines if line.strip()]


def construction_judge(turns: list[TurnEvent]) -> Any:
    """The fake judge's responder: each turn scored by the bands it was built with."""
    labels: dict[str, dict[str, str]] = {}
    for line in (EXAMPLES / "human_labels.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            labels[row["event_id"]] = row["labels"]
    by_answer = {t.answer: labels.get(t.event_id, {}) for t in turns}

    def respond(request: dict[str, Any]) -> Reply:
        bands = by_answer.get(str((case_data_of(request) or {}).get("answer", "")), {})
        return scores({m: BAND_SCORE[bands.get(m, "none")] for m in METRICS})

    return respond


def llm_calls(turns: list[TurnEvent]) -> list[bool]:
    """Each turn's severe call by an OpenAI judge client asking the fake judge server."""
    with FakeJudgeServer(responder=construction_judge(turns)) as server:
        judge = JudgeConfig(
            kind="openai", base_url=server.base_url, model="fake-judge", api_key="fake-key"
        )
        settings = load_settings(None, judges={"llm": judge}, panel={"primaries": ["llm"]})
        evaluator = build_evaluator(settings, concurrency=1)
        try:
            verdicts = [evaluator.evaluate(t) for t in turns]
        finally:
            evaluator.close()
    failed = [v.event_id for v in verdicts if v.status != "ok"]
    if failed:
        raise SystemExit(f"the fake judge failed on {len(failed)} turns, e.g. {failed[0]}")
    return [v.turn_band is Band.SEVERE for v in verdicts]


def auroc(cell: np.ndarray, severe: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(severe, 3 - cell))  # cell index 0 = severe: the highest score


def draw_traffic(
    pools: tuple[np.ndarray, np.ndarray], p: float, n: int, rng: np.random.Generator
) -> np.ndarray:
    """Indices of example turns: severe with probability ``p``, then one of that pool."""
    clean, severe = pools
    y = rng.random(n) < p
    out = clean[rng.integers(0, clean.size, n)]
    out[y] = severe[rng.integers(0, severe.size, int(y.sum()))]
    return out


def cascade_allocation(
    cell: np.ndarray,
    trip: np.ndarray,
    severe: np.ndarray,
    args: argparse.Namespace,
    rng: np.random.Generator,
) -> tuple[dict[str, float], dict[str, float]]:
    """(traffic share, risk) per cheap band among the turns no rule picks: the risks from the
    pairs of a warm-up judged at the uniform rate, as the daemon learns them online."""
    pools = (np.flatnonzero(~severe), np.flatnonzero(severe))
    warm = draw_traffic(pools, args.severe_rate, WARM_UP, rng)
    warm = warm[~trip[warm]]
    judged = warm[rng.random(warm.size) < args.rate]
    jc, js = cell[judged], severe[judged]
    pairs = {
        name: Pairs(int((jc == k).sum()), int((js & (jc == k)).sum()))
        for k, name in enumerate(CELLS)
    }
    big = draw_traffic(pools, args.severe_rate, 200_000, rng)
    big = big[~trip[big]]
    traffic = {name: float((cell[big] == k).mean()) for k, name in enumerate(CELLS)}
    return traffic, risks(pairs, list(CELLS))


def cascade_width(
    cell: np.ndarray,
    trip: np.ndarray,
    severe: np.ndarray,
    pi: dict[str, float],
    args: argparse.Namespace,
    seed: int,
) -> tuple[float, float]:
    """(LLM calls per turn, mean 95 % width in points) of the cascade's weighted severe share
    with ``pi`` over a quarter of ``--runs`` windows (the same windows for every ``pi``)."""
    rng = np.random.default_rng(seed)
    pools = (np.flatnonzero(~severe), np.flatnonzero(severe))
    prob_cell = np.array([pi[c] for c in CELLS])
    calls, widths = [], []
    for _ in range(max(10, args.runs // 4)):
        idx = draw_traffic(pools, args.severe_rate, args.window, rng)
        prob = np.where(trip[idx], 1.0, prob_cell[cell[idx]])
        drawn = rng.random(idx.size) < prob
        calls.append(float(drawn.mean()))
        widths.append(hajek(severe[idx][drawn], prob[drawn]).interval().width or 0.0)
    return float(np.mean(calls)), 100 * float(np.mean(widths))


def estimation(
    cell: np.ndarray,
    trip: np.ndarray,
    severe: np.ndarray,
    pi: dict[str, float],
    args: argparse.Namespace,
    rng: np.random.Generator,
) -> dict[str, dict[str, float]]:
    pools = (np.flatnonzero(~severe), np.flatnonzero(severe))
    prob_cell = np.array([pi[c] for c in CELLS])
    out: dict[str, dict[str, list[float]]] = {
        s: {"calls": [], "err": [], "width": [], "raw_err": []} for s in ("uniform", "cascade")
    }
    for _ in range(args.runs):
        idx = draw_traffic(pools, args.severe_rate, args.window, rng)
        y = severe[idx]
        truth = float(y.mean())
        rule = trip[idx]
        u = rng.random(idx.size)  # the conversation's point, shared by both strategies
        for strategy, prob in (
            ("uniform", np.full(idx.size, args.rate)),
            ("cascade", prob_cell[cell[idx]]),
        ):
            prob = np.where(rule, 1.0, prob)
            drawn = u < prob
            est = hajek(y[drawn], prob[drawn])
            r = out[strategy]
            r["calls"].append(float(drawn.mean()))
            r["err"].append((est.point or 0.0) - truth)
            r["width"].append(est.interval().width or 0.0)
            r["raw_err"].append(float(y[drawn].mean()) - truth)
    return {
        s: {
            "calls": float(np.mean(r["calls"])),
            "bias_pts": 100 * float(np.mean(r["err"])),
            "se_pts": 100 * float(np.std(r["err"]) / math.sqrt(args.runs)),
            "width_pts": 100 * float(np.mean(r["width"])),
            "raw_bias_pts": 100 * float(np.mean(r["raw_err"])),
        }
        for s, r in out.items()
    }


def detection(
    cell: np.ndarray, severe: np.ndarray, args: argparse.Namespace, rng: np.random.Generator
) -> dict[str, float]:
    """bench/cascade.py's detection with the examples' band distributions given the call."""
    f0 = [float((cell[~severe] == k).sum()) + 0.5 for k in range(4)]
    f1 = [float((cell[severe] == k).sum()) + 0.5 for k in range(4)]
    simulated.AGREEMENT["examples"] = (
        tuple(x / sum(f0) for x in f0),
        tuple(x / sum(f1) for x in f1),
    )
    sim_args = argparse.Namespace(
        runs=args.runs,
        rate=args.rate,
        arl0_turns=200_000.0,
        fa_turns=100_000,
        reference=20_000,
    )
    return simulated.detection("examples", sim_args, rng)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--rate", type=float, default=0.10, help="uniform's rate = the budget")
    parser.add_argument(
        "--severe-rate", type=float, default=0.05, help="the traffic's severe share"
    )
    parser.add_argument("--window", type=int, default=20_000, help="turns per estimate")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-detection", action="store_true", help="skip the detection part")
    args = parser.parse_args(argv)
    configure_logging("warning")
    rng = np.random.default_rng(args.seed)
    started = time.monotonic()
    turns = load_turns()
    cell = np.array([CELLS.index(cheap_cell(t)) for t in turns])
    trip = np.array([bool(identifier_tripwire(t).kinds) for t in turns])
    severe = np.array(llm_calls(turns))
    print(
        f"{len(turns)} example turns: {int(severe.sum())} severe for the LLM judge (the fake "
        f"judge), {int(trip.sum())} tripped the identifier tripwire "
        f"({int((trip & severe).sum())} of them severe)"
    )
    agreement = auroc(cell, severe)
    print(f"cheap look's AUROC for the LLM judge's severe call: {agreement:.2f}")
    print("\n| cheap band | turns | LLM severe | tripwire hits |")
    print("| --- | --- | --- | --- |")
    for k, name in enumerate(CELLS):
        mask = cell == k
        hits = int((trip & mask).sum())
        print(f"| {name} | {int(mask.sum())} | {int((severe & mask).sum())} | {hits} |")
    traffic, risk = cascade_allocation(cell, trip, severe, args, rng)
    pi = allocate(traffic, risk, args.rate, floor=FLOOR)
    print(
        "\ncascade probabilities (tripwire turns at 1): "
        + ", ".join(f"{c} {pi[c]:.3f}" for c in CELLS)
    )
    e = estimation(cell, trip, severe, pi, args, rng)
    print(
        f"\nEstimation, {args.runs} windows of {args.window} turns at "
        f"{100 * args.severe_rate:.0f} % severe, uniform rate {args.rate}:\n"
    )
    print(
        "| strategy | LLM calls per turn | bias of the weighted share, points (se) "
        "| 95 % width, points | bias of the unweighted share of judged turns, points |"
    )
    # What the rules and panels compute: the weighted share under the cascade; under uniform
    # sampling every weight is 1 (a rule's turn and a drawn one alike), i.e. the last column.
    print("| --- | --- | --- | --- | --- |")
    for s in ("uniform", "cascade"):
        r = e[s]
        print(
            f"| {s} | {r['calls']:.3f} | {r['bias_pts']:+.2f} ({r['se_pts']:.2f}) "
            f"| {r['width_pts']:.2f} | {r['raw_bias_pts']:+.2f} |"
        )
    # The cascade's budget whose interval is no wider than uniform's at its full budget.
    seed = int(rng.integers(2**31))
    lo, hi = FLOOR, args.rate
    for _ in range(10):
        mid = (lo + hi) / 2
        if (
            cascade_width(
                cell, trip, severe, allocate(traffic, risk, mid, floor=FLOOR), args, seed
            )[1]
            <= e["uniform"]["width_pts"]
        ):
            hi = mid
        else:
            lo = mid
    calls_w, width_w = cascade_width(
        cell, trip, severe, allocate(traffic, risk, hi, floor=FLOOR), args, seed
    )
    print(
        f"\nThe uniform's 95 % width ({e['uniform']['width_pts']:.2f} points at "
        f"{e['uniform']['calls']:.3f} calls per turn) takes the cascade {calls_w:.3f} calls per "
        f"turn ({calls_w / e['uniform']['calls']:.2f} of them; width {width_w:.2f}), the "
        "tripwire's turns included in both."
    )
    result: dict[str, Any] = {
        "auroc": round(agreement, 3),
        "estimation": e,
        "calls_for_uniform_width": round(calls_w, 4),
    }
    if not args.no_detection:
        d = detection(cell, severe, args, rng)
        print(
            f"\nDetection of a 5 -> 15 % step ({args.runs} runs; the examples' cheap-band "
            "distributions in bench/cascade.py's model):\n"
        )
        print(
            "| LLM calls per turn, uniform -> cascade (ratio) | delay in turns, uniform / "
            "cascade (median; mean) | false alarms uniform / cascade (expected) |"
        )
        print("| --- | --- | --- |")
        print(
            f"| {d['calls_uniform']:.3f} -> {d['calls_cascade']:.3f} ({d['ratio']:.2f}) "
            f"| {d['delay_uniform_median']:.0f} / {d['delay_cascade_median']:.0f} "
            f"({d['delay_uniform_mean']:.0f}; {d['delay_cascade_mean']:.0f}) "
            f"| {d['fa_uniform']} / {d['fa_cascade']} ({d['fa_expected']:.0f}) |"
        )
        result["detection"] = d
    print(f"\n(seed {args.seed}, {time.monotonic() - started:.0f} s)")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
