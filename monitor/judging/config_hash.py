"""The judge configuration hash: what produced a verdict, as part of its storage key.

It lives beside the judges because it hashes their prompt version; settings only describe.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from monitor.config.judges import HEURISTIC, JudgeConfig
from monitor.config.settings import Settings
from monitor.judging.heuristic import judge as heuristic
from monitor.judging.prompt import PROMPT_VERSION


def judge_config_hash(settings: Settings) -> str:
    """Identifies what produced a verdict: prompt, judges, panel, weights, critical metrics.

    Part of the storage idempotency key, so changing the judge set re-judges a replayed turn
    instead of silently reusing an old verdict. API keys are not part of a fingerprint.
    """
    panel = settings.effective_panel()
    names = [*panel.primaries, *([panel.arbiter] if panel.arbiter else [])]
    doc = {
        "prompt": PROMPT_VERSION,
        "judges": {n: _fingerprint(settings.judge_config(n)) for n in names},
        "panel": panel.model_dump(mode="json"),
        "weights": settings.weights(),
        "critical": sorted(settings.critical_metrics),
    }
    raw = json.dumps(doc, sort_keys=True).encode()
    return hashlib.sha256(raw).hexdigest()[:16]


def single_judge_hash(settings: Settings, name: str) -> str:
    """Identifies what one judge's scores depend on: prompt, the judge, weights, critical
    metrics (the judge canary compares a judge's runs only under one such hash)."""
    doc = {
        "prompt": PROMPT_VERSION,
        "judge": _fingerprint(settings.judge_config(name)),
        "weights": settings.weights(),
        "critical": sorted(settings.critical_metrics),
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def _fingerprint(judge: JudgeConfig) -> dict[str, Any]:
    doc = judge.fingerprint()
    if judge.kind == HEURISTIC:
        # The heuristic has no prompt: its algorithm version is what changes its scores, so a
        # changed heuristic re-judges instead of reusing old verdicts.
        doc["algorithm"] = heuristic.ALGORITHM_VERSION
    return doc
