"""Build a configured judge by name."""

from __future__ import annotations

from typing import Literal

from monitor.judges.base import Judge
from monitor.settings import Settings

Role = Literal["single", "primary", "arbiter"]


def build_judge(name: str, settings: Settings, role: Role = "single") -> Judge:
    cfg = settings.judge_config(name)
    if cfg.kind == "heuristic":
        from monitor.judges.heuristic import HeuristicJudge

        return HeuristicJudge(name=name, role=role)
    from monitor.judges.openai_judge import OpenAIJudge

    return OpenAIJudge(name=name, config=cfg, role=role)
