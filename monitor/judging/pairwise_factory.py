"""Build a pairwise judge from its configuration (the heuristic one offline, else the
endpoint)."""

from __future__ import annotations

from monitor.config.judges import JudgeConfig
from monitor.judging.pairwise_judge import OpenAIPairwiseJudge, PairwiseJudge, PairwiseOptions
from monitor.runtime.clock import Clock


def build_pairwise_judge(
    name: str, cfg: JudgeConfig, options: PairwiseOptions, *, clock: Clock | None = None
) -> PairwiseJudge:
    if cfg.kind == "heuristic":
        from monitor.judging.pairwise_heuristic import HeuristicPairwiseJudge

        return HeuristicPairwiseJudge(name, swap=options.swap)
    return OpenAIPairwiseJudge(name, cfg, options, clock=clock)


__all__ = ["build_pairwise_judge"]
