"""What the review queue's tests share: a store of judged turns (some severe, some the panel
disagreed on), the job over a real Label Studio client, and a person's annotations."""

from __future__ import annotations

from datetime import timedelta

from prometheus_client import CollectorRegistry

from monitor.annotation.label_studio import LabelStudioClient
from monitor.config.quality_estimate import QualityEstimateConfig
from monitor.config.review import ReviewConfig
from monitor.jobs.quality_estimate import QualityEstimateJob
from monitor.jobs.review_queue import ReviewQueueJob
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import ManualClock
from monitor.scoring.turn import BUILTIN_PROFILES, DEFAULT_CRITICAL_METRICS
from monitor.storage.store import Store
from tests.fixtures.turns import T0, seed_turn

TURNS = 30
# Judged severe: i % 10 == 0 (3 turns). The panel disagreed (an arbiter was called): i % 7 == 3
# (4 turns: uncertainty 1, so the draw takes each with probability 1 at UNCERTAIN_N). Turn 10 is
# both, and the arbiter passes it: the judge calls 2 turns severe and passes 4 disputed ones that
# people call severe. Since the disputed turns outnumber the judge's severe ones, the corrected
# rate is above the judge's own for every draw (see the round-trip test), not only on average.
UNCERTAIN_N = 8
NOW = T0 + timedelta(hours=1)


def severe(i: int) -> bool:
    return i % 10 == 0


def disputed(i: int) -> bool:
    return i % 7 == 3


def seed_review_turns(store: Store, assistant: str = "helpdesk") -> None:
    for i in range(TURNS):
        scores = {"hallucination": 0.1} if severe(i) else None
        arbiter = {"hallucination": 0.9} if disputed(i) else None
        second = {"hallucination": 0.6} if disputed(i) else None
        seed_turn(store, f"r-{i:03d}", assistant=assistant, at=T0 + timedelta(seconds=i),
                  scores=scores, second=second, arbiter=arbiter)  # fmt: skip


def review_job(
    store: Store,
    client: LabelStudioClient,
    title: str,
    registry: CollectorRegistry | None = None,
    *,
    severe_per_run: int = 20,
    uncertain_n: int = UNCERTAIN_N,
) -> ReviewQueueJob:
    metrics = Metrics(registry=registry or CollectorRegistry())
    config = ReviewConfig(project_title=title, uncertain_per_run=uncertain_n,
                          severe_per_run=severe_per_run)  # fmt: skip
    estimates = QualityEstimateJob(QualityEstimateConfig(), store, metrics)
    return ReviewQueueJob(
        config,
        store,
        metrics,
        client,
        weights=BUILTIN_PROFILES["default"],
        critical=list(DEFAULT_CRITICAL_METRICS),
        refresh=estimates.run_once,
        clock=ManualClock(NOW.timestamp()),
    )


def person_bands(event_id: str) -> dict[str, str]:
    """What the reviewer says: every turn the judge called severe is severe, and so is each
    disputed one (the judge passed it)."""
    i = int(event_id.split("-")[1])
    band = "severe" if severe(i) or disputed(i) else "none"
    return {"turn_band": band, "hallucination": band}
