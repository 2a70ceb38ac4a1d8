"""Build the configured pairwise judge by name (the heuristic one offline, else the endpoint)."""

from __future__ import annotations

from monitor.clock import Clock
from monitor.judging.pairwise_judge import OpenAIPairwiseJudge, PairwiseJudge, PairwiseOptions
from monitor.settings import Settings


def build_pairwise_judge(
    name: str, settings: Settings, options: PairwiseOptions, *, clock: Clock | None = None
) -> PairwiseJudge:
    cfg = settings.judge_config(name)
    if cfg.kind == "heuristic":
        from monitor.judging.pairwise_heuristic import HeuristicPairwiseJudge

        return HeuristicPairwiseJudge(name, swap=options.swap)
    return OpenAIPairwiseJudge(name, cfg, options, clock=clock)


__all__ = ["build_pairwise_judge"]
