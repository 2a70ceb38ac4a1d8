"""The probe set of the baseline-tier check (DICE §3.3, "single-system baseline").

A probe is one question (case, history, query, contexts and an optional reference, exactly
what the pairwise judge sees) with pre-generated answers of a High, a Medium and a Low
baseline system. The file is JSON Lines, one probe per line::

    {"id": "bkp-catalog-lock-0", "case": {...}, "history": [...], "query": "...",
     "contexts": [...], "reference": "...",
     "baselines": {"high": "...", "medium": "...", "low": "..."}}

``load_probes`` reads it strictly: an unknown field, a missing tier, an empty answer or a
repeated id is an error naming the line, and nothing is half-loaded.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from monitor.errors import ConfigError, validation_error_lines
from monitor.judging.pairwise_prompt import PairwiseAnswer, PairwiseQuestion

Tier = Literal["high", "medium", "low"]
TIERS: tuple[Tier, ...] = ("high", "medium", "low")
_WS = re.compile(r"\s+")


class Baselines(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    high: str = Field(min_length=1)
    medium: str = Field(min_length=1)
    low: str = Field(min_length=1)

    def answer(self, tier: Tier) -> str:
        text: str = getattr(self, tier)
        return text


class Probe(PairwiseQuestion):
    id: str = Field(min_length=1, max_length=256)
    baselines: Baselines

    def question(self) -> PairwiseQuestion:
        return PairwiseQuestion.model_validate(
            self.model_dump(exclude={"id", "baselines"}, exclude_none=False)
        )

    def baseline(self, tier: Tier) -> PairwiseAnswer:
        return PairwiseAnswer(text=self.baselines.answer(tier))


def normalise_query(text: str) -> str:
    """How a stored turn's query is matched to a probe: case and whitespace do not count."""
    return _WS.sub(" ", text).strip().casefold()


def parse_probes(lines: list[str], source: str = "<probes>") -> list[Probe]:
    probes: list[Probe] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            probe = Probe.model_validate(json.loads(line))
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{source}:{number}: not JSON ({exc.msg})") from None
        except ValidationError as exc:
            first = validation_error_lines(exc, limit=1)[0]
            raise ConfigError(f"{source}:{number}: {first}") from None
        if probe.id in seen:
            raise ConfigError(
                f"{source}:{number}: probe id {probe.id!r} already used on line {seen[probe.id]}"
            )
        seen[probe.id] = number
        probes.append(probe)
    if not probes:
        raise ConfigError(f"{source}: no probes")
    return probes


def load_probes(path: Path) -> list[Probe]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the probe set {path}: {exc}") from exc
    return parse_probes(text.splitlines(), str(path))


__all__ = [
    "TIERS",
    "Baselines",
    "Probe",
    "Tier",
    "load_probes",
    "normalise_query",
    "parse_probes",
]
