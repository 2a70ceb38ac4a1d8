"""Build a judge from its configuration (the offline heuristic, else the endpoint)."""

from __future__ import annotations

from monitor.config.judges import JudgeConfig
from monitor.judging.judge import Judge
from monitor.schema.turn import JudgeRole


def build_judge(name: str, cfg: JudgeConfig, role: JudgeRole = "single") -> Judge:
    if cfg.kind == "heuristic":
        from monitor.judging.heuristic.judge import HeuristicJudge

        return HeuristicJudge(name=name, role=role)
    from monitor.judging.openai_judge import OpenAIJudge

    return OpenAIJudge(name=name, config=cfg, role=role)
