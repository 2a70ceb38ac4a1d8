"""Build a configured judge by name."""

from __future__ import annotations

from monitor.judging.judge import Judge
from monitor.models import JudgeRole
from monitor.settings import Settings


def build_judge(name: str, settings: Settings, role: JudgeRole = "single") -> Judge:
    cfg = settings.judge_config(name)
    if cfg.kind == "heuristic":
        from monitor.judging.heuristic.judge import HeuristicJudge

        return HeuristicJudge(name=name, role=role)
    from monitor.judging.openai_judge import OpenAIJudge

    return OpenAIJudge(name=name, config=cfg, role=role)
