"""The PNG of ``casewatch tournament --plot``: ratings with 95 % error bars, and the match graph.

Left: each system's final Elo rating with its bootstrap interval, best at the top. Right:
the systems on a circle (in rank order), one edge per match played, drawn from the winner's
side darker the more one-sided the match was. matplotlib is an optional dependency (the
``plot`` extra); the Agg backend renders without a display.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from monitor.errors import ConfigError
from monitor.stats.elo import MatchResult
from monitor.stats.tournament import Interval


def plot_tournament(
    path: Path,
    ranking: Sequence[str],
    ratings: Mapping[str, float],
    intervals: Mapping[str, Interval],
    matches: Sequence[MatchResult],
    title: str = "casewatch tournament",
) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ConfigError(
            "--plot needs matplotlib: pip install 'casewatch[plot]' (or matplotlib)"
        ) from exc

    fig, (left, right) = plt.subplots(1, 2, figsize=(13, max(4.0, 0.35 * len(ranking) + 2)))
    try:
        ys = list(range(len(ranking)))[::-1]  # best at the top
        values = [ratings[s] for s in ranking]
        lows = [ratings[s] - intervals[s].low for s in ranking]
        highs = [intervals[s].high - ratings[s] for s in ranking]
        left.errorbar(
            values,
            ys,
            xerr=[[max(0.0, v) for v in lows], [max(0.0, v) for v in highs]],
            fmt="o",
            color="tab:blue",
            ecolor="tab:gray",
            capsize=3,
        )
        left.set_yticks(ys, labels=list(ranking))
        left.axvline(1500, color="tab:red", linewidth=0.8, linestyle="--")
        left.set_xlabel("Elo rating (95 % bootstrap interval over questions)")
        left.set_title("Ratings")
        left.grid(axis="x", alpha=0.3)

        n = len(ranking)
        angle = {s: math.pi / 2 - 2 * math.pi * i / n for i, s in enumerate(ranking)}
        pos = {s: (math.cos(a), math.sin(a)) for s, a in angle.items()}
        for match in matches:
            mean = match.mean_a
            if mean is None or match.a not in pos or match.b not in pos:
                continue
            (xa, ya), (xb, yb) = pos[match.a], pos[match.b]
            strength = abs(mean - 0.5) * 2  # 0 = even match, 1 = one side took everything
            right.plot(
                [xa, xb],
                [ya, yb],
                color=plt.get_cmap("viridis")(0.15 + 0.7 * strength),
                linewidth=0.8 + 2.0 * strength,
                alpha=0.8,
                zorder=1,
            )
        right.scatter(
            [pos[s][0] for s in ranking],
            [pos[s][1] for s in ranking],
            s=120,
            c=[ratings[s] for s in ranking],
            cmap="coolwarm",
            edgecolors="black",
            zorder=2,
        )
        for rank, s in enumerate(ranking, start=1):
            x, y = pos[s]
            right.annotate(f"{rank}. {s}", (x * 1.12, y * 1.12), ha="center", va="center")
        right.set_title(f"Matches played ({len(matches)})")
        right.set_xlim(-1.5, 1.5)
        right.set_ylim(-1.4, 1.4)
        right.set_aspect("equal")
        right.axis("off")
        fig.suptitle(title)
        fig.tight_layout()
        fig.savefig(path, format="png", dpi=110)
    finally:
        plt.close(fig)


__all__ = ["plot_tournament"]
