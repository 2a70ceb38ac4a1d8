"""How well a Swiss tournament with Elo (DICE) ranks systems, against round-robin.

Simulated systems with known strengths play matches of ``--questions`` questions each; every
question is one Bradley-Terry outcome with ties (Davidson's model): with strengths
s_i = exp(theta_i),

    P(i wins) = s_i / (s_i + s_j + nu * sqrt(s_i s_j)),   P(tie) = nu * sqrt(s_i s_j) / (...)

scored 1 / 0.5 / 0 as the pairwise judge scores a question. theta is spread evenly over
``--spread`` (the gap between best and worst system, in logits); ``--nu`` sets the tie rate.
For 8, 16 and 32 systems and ``--seeds`` seeds, the same simulated judge plays a Swiss
tournament (``monitor.stats.tournament.swiss``, default ⌈log2 n⌉ + 1 rounds unless
``--rounds``) and a round-robin (every pair once). Both rank by the Bradley-Terry fit to all
their matches (``monitor.stats.bradley_terry``); the Swiss tournament pairs each round by
DICE's sequential Elo, whose final ranking is reported too (it falls short).
Reported over seeds: Spearman of the Swiss ranking vs the true ranking (median and 10th
percentile), of its Elo trajectory's end, vs the round-robin ranking, of round-robin vs
truth, and the share of round-robin's matches the Swiss tournament used. DICE reports 16
vs 28 matches for 8 systems; our target is Spearman >= 0.95 (median) with <= 30 % of
round-robin's matches at 32 systems.

    .venv/bin/python bench/tournament.py [--seeds 101] [--questions 20] [--rounds R]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from pathlib import Path

from scipy.stats import spearmanr

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from monitor.stats.elo import EloConfig  # noqa: E402
from monitor.stats.tournament import (  # noqa: E402
    Play,
    default_rounds,
    round_robin,
    round_robin_matches,
    swiss,
)

SIZES = (8, 16, 32)


def simulated_judge(theta: dict[str, float], questions: int, nu: float, rng: random.Random) -> Play:
    def play(a: str, b: str) -> dict[str, float]:
        sa, sb = math.exp(theta[a]), math.exp(theta[b])
        tie = nu * math.sqrt(sa * sb)
        total = sa + sb + tie
        p_a, p_tie = sa / total, tie / total
        scores = {}
        for q in range(questions):
            u = rng.random()
            scores[f"q{q}"] = 1.0 if u < p_a else 0.5 if u < p_a + p_tie else 0.0
        return scores

    return play


def rho(order: list[str], truth: dict[str, float]) -> float:
    ranks = {s: i for i, s in enumerate(order)}
    names = sorted(truth)
    value = spearmanr([ranks[s] for s in names], [-truth[s] for s in names]).statistic
    return float(value)


def one(n: int, seed: int, args: argparse.Namespace) -> dict[str, float]:
    rng = random.Random(seed * 1000 + n)
    systems = [f"s{i:02d}" for i in range(n)]
    theta = {s: args.spread * (1 - i / (n - 1)) for i, s in enumerate(systems)}
    order = systems[:]
    rng.shuffle(order)  # the first round pairs by this order: no head start from the names
    play = simulated_judge(theta, args.questions, args.nu, rng)
    elo = EloConfig(k=args.k)
    sw = swiss(order, play, rounds=args.rounds or default_rounds(n), config=elo)
    rr = round_robin(order, play, config=elo, rng=rng)
    rr_rank = {s: i for i, s in enumerate(rr.ranking())}
    elo_order = sorted(sw.systems, key=lambda s: (-sw.elo[s], s))
    return {
        "swiss_vs_truth": rho(sw.ranking(), theta),
        "swiss_elo_vs_truth": rho(elo_order, theta),
        "swiss_vs_rr": rho(sw.ranking(), {s: -float(r) for s, r in rr_rank.items()}),
        "rr_vs_truth": rho(rr.ranking(), theta),
        "swiss_matches": float(sw.match_count),
        "rounds": float(len(sw.rounds)),
        "rr_matches": float(round_robin_matches(n)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=101)
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--spread", type=float, default=3.0, help="best - worst, in logits")
    parser.add_argument("--nu", type=float, default=0.5, help="Davidson tie parameter")
    parser.add_argument("--rounds", type=int, default=None, help="default ceil(log2 n) + 1")
    parser.add_argument("--k", type=float, default=32.0, help="Elo K-factor")
    args = parser.parse_args(argv)

    rows = []
    print(
        f"Bradley-Terry-Davidson systems, spread {args.spread} logits, nu {args.nu}, "
        f"{args.questions} questions a match, median of {args.seeds} seeds\n"
    )
    header = "| systems | rounds | Swiss matches | round-robin | share | Spearman Swiss vs truth (median / p10) | its Elo trajectory (median / p10) | vs round-robin | round-robin vs truth |"  # noqa: E501
    print(header)
    print("|---|---|---|---|---|---|---|---|---|")
    for n in SIZES:
        runs = [one(n, seed, args) for seed in range(args.seeds)]

        def med(key: str, runs: list[dict[str, float]] = runs) -> float:
            return float(statistics.median(r[key] for r in runs))

        def p10(key: str, runs: list[dict[str, float]] = runs) -> float:
            return float(statistics.quantiles([r[key] for r in runs], n=10)[0])

        row = {
            "systems": n,
            "rounds": med("rounds"),
            "swiss_matches": med("swiss_matches"),
            "rr_matches": med("rr_matches"),
            "share": med("swiss_matches") / med("rr_matches"),
            "spearman_swiss_truth": med("swiss_vs_truth"),
            "p10_spearman_swiss_truth": p10("swiss_vs_truth"),
            "spearman_swiss_elo_truth": med("swiss_elo_vs_truth"),
            "p10_spearman_swiss_elo_truth": p10("swiss_elo_vs_truth"),
            "spearman_swiss_rr": med("swiss_vs_rr"),
            "spearman_rr_truth": med("rr_vs_truth"),
            "min_spearman_swiss_truth": min(r["swiss_vs_truth"] for r in runs),
        }
        rows.append(row)
        print(
            f"| {n} | {row['rounds']:.0f} | {row['swiss_matches']:.0f} | "
            f"{row['rr_matches']:.0f} | {row['share']:.0%} | "
            f"{row['spearman_swiss_truth']:.3f} / {row['p10_spearman_swiss_truth']:.3f} | "
            f"{row['spearman_swiss_elo_truth']:.3f} / {row['p10_spearman_swiss_elo_truth']:.3f} | "
            f"{row['spearman_swiss_rr']:.3f} | "
            f"{row['spearman_rr_truth']:.3f} |"
        )
    at32 = rows[-1]
    meets = at32["spearman_swiss_truth"] >= 0.95 and at32["share"] <= 0.30
    print(
        f"\ntarget at 32 systems (Spearman >= 0.95, share <= 30 %): {'met' if meets else 'NOT met'}"
    )
    print(json.dumps({"sizes": rows, "meets_target": meets}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
