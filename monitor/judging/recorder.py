"""What judging records: each verdict's turn- and metric-level series, every judge request
(outcome, failure reason, retries, latency, tokens, cost) and the two-primary panel's
agreement, arbiter calls and cost by role. The families are declared in
``monitor.metrics.exporter``.

Used by the stream (each finished verdict), the panel (its ``on_result`` observer) and the
baseline-tier job (its pairwise judge requests): one place bounds a failure reason.
"""

from __future__ import annotations

from typing import Any

from monitor.judging.arbitration import PanelOutcome
from monitor.judging.judge import FAILURE_REASONS
from monitor.metrics.exporter import Metrics
from monitor.schema.turn import METRICS, Band, Verdict


def failure_label(reason: str | None) -> str:
    """``reason`` as a label value: one of ``FAILURE_REASONS``, anything else ``internal``."""
    return reason if reason in FAILURE_REASONS else "internal"


class JudgingRecorder:
    def __init__(self, metrics: Metrics) -> None:
        self._m = metrics
        self._assistant = metrics.assistant_label
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        self._judged_primed: set[str] = set()  # assistants whose band series exist (see below)

    def _child(self, metric: Any, *values: str) -> Any:
        """``metric.labels(*values)``, remembered: the verdict path records ~25 series per turn
        and prometheus_client's ``labels()`` validates and locks on every call (about 5 % of the
        daemon's CPU at 150 judged turns/s, bench/judging.py). Only series never removed go
        through here."""
        key = (id(metric), values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def record_verdict(self, verdict: Verdict, weight: float = 1.0) -> None:
        """Turn-level, metric-level and per-judge series for one finished verdict. ``weight``:
        1/π, π the probability the turn was drawn with (the cascade; 1 for a rule's turn and
        under uniform sampling), added to its turn band's and each of its metric bands'
        weighted counters."""
        m = self._m
        assistant = self._assistant(verdict.assistant.name)
        child = self._child
        if assistant not in self._judged_primed:
            # Every band of a new assistant starts at 0, so that rate()/increase() in rules/
            # count its first severe turn (a series born at 1 loses that first increment).
            self._judged_primed.add(assistant)
            for band in (*(b.value for b in Band), "judge_failed"):
                child(m.turns_judged, assistant, band)
                child(m.turns_judged_weight, assistant, band)
            # Every metric's bands too: a per-metric share's first severe turn under the
            # cascade may weigh 1/π of a hundred.
            for metric in METRICS:
                for band in (b.value for b in Band):
                    child(m.metric_band, assistant, metric, band)
                    child(m.metric_band_weight, assistant, metric, band)
        if verdict.status == "ok" and verdict.turn_band is not None:
            band = str(verdict.turn_band)
            child(m.turns_judged, assistant, band).inc()
            child(m.turns_judged_weight, assistant, band).inc(weight)
            if verdict.s_final is not None:
                child(m.score_final, assistant).observe(verdict.s_final)
            for metric, score in verdict.metric_scores.items():
                child(m.metric_score, assistant, metric).observe(score)
            for metric, metric_band in verdict.metric_bands.items():
                child(m.metric_band, assistant, metric, str(metric_band)).inc()
                child(m.metric_band_weight, assistant, metric, str(metric_band)).inc(weight)
        else:
            child(m.turns_judged, assistant, "judge_failed").inc()
            child(m.turns_judged_weight, assistant, "judge_failed").inc(weight)
        for j in verdict.judgments:
            self.record_judge_request(
                j.judge,
                ok=j.ok,
                failure_reason=j.failure_reason,
                attempts=j.attempts,
                latency_seconds=j.latency_seconds,
                input_tokens=j.input_tokens,
                output_tokens=j.output_tokens,
                cost_usd=j.cost_usd,
            )

    def record_judge_request(
        self,
        judge: str,
        *,
        ok: bool,
        failure_reason: str | None = None,
        attempts: int = 1,
        latency_seconds: float | None = None,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        cost_usd: float | None = None,
    ) -> None:
        """One logical judge request (its retries included); ``latency_seconds`` None: not
        measured by the caller, so not observed."""
        m = self._m
        child = self._child
        child(m.judge_requests, judge, "ok" if ok else "failed").inc()
        if not ok:
            child(m.judge_failed, judge, failure_label(failure_reason)).inc()
        if attempts > 1:
            child(m.judge_retries, judge).inc(attempts - 1)
        if latency_seconds is not None:
            child(m.judge_latency, judge).observe(latency_seconds)
        if input_tokens:
            child(m.judge_tokens, judge, "input").inc(input_tokens)
        if output_tokens:
            child(m.judge_tokens, judge, "output").inc(output_tokens)
        if cost_usd:
            child(m.judge_cost, judge).inc(cost_usd)

    def record_panel(self, outcome: PanelOutcome) -> None:
        """One two-primary panel evaluation (the panel's ``on_result`` observer)."""
        m = self._m
        assistant = self._assistant(outcome.assistant)
        if outcome.trigger == "primary_failed":
            agreement = "primary_failed"
        else:
            agreement = "disagreed" if outcome.disagreed else "agreed"
        m.panel_turns.labels(assistant=assistant, agreement=agreement).inc()
        for metric in outcome.disagreement_metrics:
            m.disagreements.labels(assistant=assistant, metric=metric).inc()
        if outcome.arbitrated:
            m.arbiter_calls.labels(assistant=assistant).inc()
        if outcome.sided_with is not None:
            m.arbitration_outcome.labels(assistant=assistant, sided_with=outcome.sided_with).inc()
        for role, usd in outcome.cost_by_role.items():
            if usd > 0:
                m.judge_cost_by_role.labels(role=role).inc(usd)


__all__ = ["JudgingRecorder", "failure_label"]
