"""The one-line summary ``casewatch demo`` prints: counters read back from the metrics registry
(what a scrape of /metrics would show), so the summary cannot disagree with the exporter."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry

BANDS = ("none", "minor", "moderate", "severe")


@dataclass(frozen=True)
class Snapshot:
    """What the one-line summary shows, read from the metrics registry."""

    consumed: float = 0.0
    bands: dict[str, float] = field(default_factory=dict)
    judge_failed: float = 0.0
    dead_lettered: float = 0.0
    mean_s_final: dict[str, float] = field(default_factory=dict)

    @property
    def judged(self) -> float:
        return sum(self.bands.values())

    @classmethod
    def from_samples(cls, samples: Iterable[Any]) -> Snapshot:
        """From prometheus_client samples (anything with name, labels, value)."""
        consumed = failed = dead = 0.0
        bands: dict[str, float] = dict.fromkeys(BANDS, 0.0)
        s_sum: dict[str, float] = {}
        s_count: dict[str, float] = {}
        for s in samples:
            if s.name == "casewatch_turns_consumed_total":
                consumed += s.value
            elif s.name == "casewatch_turns_judged_total":
                band = s.labels["band"]
                if band == "judge_failed":
                    failed += s.value
                else:
                    bands[band] = bands.get(band, 0.0) + s.value
            elif s.name == "casewatch_dead_letter_total":
                dead += s.value
            elif s.name == "casewatch_score_final_sum":
                s_sum[s.labels["assistant"]] = s.value
            elif s.name == "casewatch_score_final_count":
                s_count[s.labels["assistant"]] = s.value
        means = {a: s_sum.get(a, 0.0) / n for a, n in sorted(s_count.items()) if n}
        return cls(consumed, bands, failed, dead, means)

    @classmethod
    def of(cls, registry: CollectorRegistry) -> Snapshot:
        return cls.from_samples(s for family in registry.collect() for s in family.samples)


def format_summary(snap: Snapshot, elapsed_s: float, produced: int) -> str:
    bands = ", ".join(f"{b} {snap.bands.get(b, 0):.0f}" for b in BANDS)
    means = ", ".join(f"{a} {m:.3f}" for a, m in snap.mean_s_final.items()) or "-"
    return (
        f"[{elapsed_s:5.0f}s] produced {produced} | consumed {snap.consumed:.0f} | "
        f"judged {snap.judged:.0f} ({bands}) | dead-lettered {snap.dead_lettered:.0f} | "
        f"judge_failed {snap.judge_failed:.0f} | mean S_final: {means}"
    )


@dataclass(frozen=True)
class AlertState:
    """One alert as the summary shows it (from Prometheus' ``/api/v1/alerts``)."""

    name: str
    state: str  # pending | firing
    assistant: str | None = None


def format_alerts(alerts: Iterable[AlertState], alerts_page: str) -> str:
    """``alerts: firing A [assistant]; pending B`` with where to see them (``alerts_page``,
    Prometheus' alerts page as its build serves it), sorted, each (name, assistant) once."""
    by_state: dict[str, set[str]] = {"firing": set(), "pending": set()}
    for a in alerts:
        shown = f"{a.name} [{a.assistant}]" if a.assistant else a.name
        by_state.setdefault(a.state, set()).add(shown)
    parts = [f"{state} {', '.join(sorted(names))}" for state, names in by_state.items() if names]
    body = "; ".join(parts) if parts else "none pending or firing"
    return f"  alerts: {body}   ({alerts_page})"
