"""The scheduled baseline-tier check (DICE §3.3, "single-system baseline evaluation").

Every ``baseline.interval_seconds``, on the one replica holding the job's lease, for each
configured assistant:

1. get its answers to the probe set: from its HTTP endpoint (one request per probe), and/or
   from its most recent stored production turns whose query matches a probe's (case and
   whitespace ignored; the turn's own contexts go with its answer);
2. judge each answer pairwise against the probe's High, Medium and Low baseline answers
   (both orders unless ``swap: false``), with bounded concurrency;
3. store one ``matches`` row per answer and tier, with both orders' raw outputs;
4. export, per assistant: ``casewatch_baseline_win_rate{tier}`` (mean pairwise score, ties
   count half), ``casewatch_baseline_outcomes_total{tier,outcome}``,
   ``casewatch_pairwise_confidence_total{kind}`` (one per judged order),
   ``casewatch_pairwise_position_disagreement`` (mean |score A-first − score B-first|) and
   ``casewatch_elo_rating``: the assistant and the three tiers start at 1500 each run and
   play the three matches low, medium, high in that order (DICE eq. 5 with the
   upset-amplified K), so runs compare with each other.

Judge requests are charged to the daemon's hourly judge budget (``sampling.budget_*``, the
same buckets as turn judging and the rubric job); a pair the budget refuses is not judged
this run. A failed pairwise judgment is stored (``judge_failed`` with the reason) and counted in
``casewatch_judge_failed_total``, never scored. An assistant endpoint that answered no probe
at all fails the run (counted by the scheduler as ``failed``) after the other assistants were
judged; no stored turn matching a probe yet is not a failure (nothing to judge). The stream
is never touched.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog

from monitor.config.baseline import BaselineAssistantConfig, BaselineConfig
from monitor.config.judges import JudgeConfig
from monitor.errors import AssistantError, CasewatchError, ConfigError
from monitor.jobs.assistant_client import AssistantClient
from monitor.jobs.recorders import BaselineRecorder
from monitor.judging.pairwise_factory import build_pairwise_judge
from monitor.judging.pairwise_heuristic import HeuristicPairwiseJudge
from monitor.judging.pairwise_judge import PairwiseJudge, PairwiseJudgment, PairwiseOptions
from monitor.judging.pairwise_prompt import PairwiseAnswer
from monitor.judging.pairwise_scoring import OUTCOMES
from monitor.judging.probes import TIERS, Probe, Tier, normalise_query
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import Clock, SystemClock
from monitor.runtime.workers import DaemonThreadPool
from monitor.sampling.budget import Budget
from monitor.schema.turn import Context
from monitor.stats.elo import MatchResult, replay
from monitor.storage.matches import insert_matches, recent_turns
from monitor.storage.store import Store

log = structlog.get_logger(__name__)

JOB_NAME = "baseline_tiers"
# The order the assistant meets the tiers in the per-run Elo replay.
ELO_ORDER: tuple[Tier, ...] = ("low", "medium", "high")


@dataclass(frozen=True)
class Answer:
    probe: Probe
    text: str
    source: str  # endpoint | turns
    event_id: str | None = None
    contexts: list[Context] | None = None  # the stored turn's, when the answer came from one

    @property
    def key(self) -> str:
        return f"{self.probe.id}@{self.source}"


@dataclass
class TierSummary:
    outcomes: Counter[str] = field(default_factory=Counter)  # win | tie | loss | failed
    scores: list[float] = field(default_factory=list)

    @property
    def win_rate(self) -> float | None:
        return sum(self.scores) / len(self.scores) if self.scores else None


@dataclass
class AssistantSummary:
    assistant: str
    answers: int
    endpoint_answers: int
    fetch_failures: Counter[str]
    tiers: dict[str, TierSummary]
    kinds: Counter[str]
    position_disagreement: float | None
    elo: float | None
    budget_refused: int = 0  # pairs the hourly judge budget refused this run


class BaselineTiersJob:
    name = JOB_NAME

    def __init__(
        self,
        config: BaselineConfig,
        probes: Sequence[Probe],
        judge: PairwiseJudge,
        store: Store,
        metrics: Metrics,
        *,
        clock: Clock | None = None,
        client_factory: Callable[[BaselineAssistantConfig], AssistantClient] | None = None,
        budget: Budget | None = None,
    ) -> None:
        if not probes:
            raise ValueError("the baseline-tier job needs at least one probe")
        self.interval_seconds = config.interval_seconds
        self._config = config
        self._probes = list(probes)
        self._by_query = {normalise_query(p.query): p for p in self._probes}
        self._judge = judge
        self._store = store
        self._metrics = BaselineRecorder(metrics)
        self._clock = clock or SystemClock()
        # Judge requests per pair (two stages per order), charged to the daemon's hourly
        # budget like every other judge call; the offline heuristic judge makes none.
        self._budget = None if isinstance(judge, HeuristicPairwiseJudge) else budget
        self._calls_per_pair = 4 if config.swap else 2
        make = client_factory or _client
        self._clients = {a.name: make(a) for a in config.assistants if a.endpoint is not None}
        # The job's own, for every run: ``close`` cancels the comparisons a stopped run still
        # queues. Daemon threads, started on the first run: a run abandoned at a stop never
        # holds the process (workers.py).
        self._pool = DaemonThreadPool(config.concurrency, "baseline-judge")
        self.last_run: list[AssistantSummary] = []
        for assistant in config.assistants:
            self._metrics.prime(assistant.name)

    def close(self) -> None:
        self._pool.shutdown()
        for client in self._clients.values():
            client.close()
        self._judge.close()

    def run(self) -> None:
        run_id = uuid.uuid4().hex
        summaries = []
        silent = []
        for assistant in self._config.assistants:
            summary = self.run_assistant(run_id, assistant)
            summaries.append(summary)
            if assistant.endpoint is not None and summary.endpoint_answers == 0:
                silent.append(assistant.name)
        self.last_run = summaries
        if silent:
            raise CasewatchError(f"no endpoint answered any probe: {', '.join(silent)}")

    # ------------------------------------------------------------------ one assistant

    def run_assistant(self, run_id: str, assistant: BaselineAssistantConfig) -> AssistantSummary:
        answers, failures = self._answers(assistant)
        tasks = [(answer, tier) for answer in answers for tier in TIERS]
        judged = [f.result() for f in [self._pool.submit(self._compare, *task) for task in tasks]]
        refused = sum(1 for r in judged if r is None)
        if refused:
            log.info("baseline.budget_refused", assistant=assistant.name, pairs=refused)
        done = [(t, r) for t, r in zip(tasks, judged, strict=True) if r is not None]
        tasks = [t for t, _ in done]
        results = [r for _, r in done]
        now = datetime.fromtimestamp(self._clock.time(), UTC)
        rows = [
            _row(run_id, assistant.name, answer, tier, result, now)
            for (answer, tier), result in done
        ]
        insert_matches(self._store, rows)
        summary = self._summarise(assistant.name, answers, failures, tasks, results)
        summary.budget_refused = refused
        self._export(summary, results)
        log.info(
            "baseline.run",
            assistant=assistant.name,
            answers=len(answers),
            fetch_failures=sum(failures.values()),
            win_rate={t: s.win_rate for t, s in summary.tiers.items()},
            elo=summary.elo,
        )
        return summary

    def _compare(self, answer: Answer, tier: Tier) -> PairwiseJudgment | None:
        """The judgment, or None when the hourly budget refused it (judged next run)."""
        reserved = self._calls_per_pair
        if self._budget is None:
            return self._judge_pair(answer, tier)
        if self._budget.reserve(reserved) is not None:
            return None
        # Settled whatever happens; a judge that raised spent what is unknown: all of it.
        requests, usd = reserved, 0.0
        try:
            result = self._judge_pair(answer, tier)
            orders = [result.forward, *([result.swapped] if result.swapped else [])]
            requests, usd = sum(o.attempts for o in orders), result.cost_usd
            return result
        finally:
            self._budget.settle(reserved, requests, usd)

    def _judge_pair(self, answer: Answer, tier: Tier) -> PairwiseJudgment:
        mine = PairwiseAnswer(text=answer.text, contexts=answer.contexts)
        return self._judge.compare(answer.probe.question(), mine, answer.probe.baseline(tier))

    def _answers(self, assistant: BaselineAssistantConfig) -> tuple[list[Answer], Counter[str]]:
        answers: list[Answer] = []
        failures: Counter[str] = Counter()
        client = self._clients.get(assistant.name)
        if client is not None:
            for n, probe in enumerate(self._probes):
                try:
                    text = client.answer(probe.id, probe.question())
                except ConfigError as exc:
                    # This assistant's endpoint is misconfigured (e.g. its body template): no
                    # probe can be asked, but the other assistants' answers are still judged.
                    failures["config"] += len(self._probes) - n
                    log.error(
                        "baseline.assistant_misconfigured", assistant=assistant.name, error=str(exc)
                    )
                    break
                except AssistantError as exc:
                    failures[exc.reason] += 1
                    log.warning(
                        "baseline.assistant_failed",
                        assistant=assistant.name,
                        probe=probe.id,
                        reason=exc.reason,
                    )
                    continue
                answers.append(Answer(probe, text, "endpoint"))
        if assistant.from_turns:
            answers.extend(self._stored_answers(assistant))
        return answers, failures

    def _stored_answers(self, assistant: BaselineAssistantConfig) -> list[Answer]:
        since = datetime.fromtimestamp(self._clock.time(), UTC) - timedelta(
            hours=assistant.turns_max_age_hours
        )
        found: dict[str, Answer] = {}
        for turn in recent_turns(self._store, assistant.name, since):  # newest first
            probe = self._by_query.get(normalise_query(turn.query))
            if probe is None or probe.id in found or not turn.answer.strip():
                continue
            found[probe.id] = Answer(
                probe, turn.answer, "turns", turn.event_id, turn.contexts or None
            )
        return [found[p.id] for p in self._probes if p.id in found]

    # ------------------------------------------------------------------ results

    def _summarise(
        self,
        name: str,
        answers: Sequence[Answer],
        failures: Counter[str],
        tasks: Sequence[tuple[Answer, Tier]],
        results: Sequence[PairwiseJudgment],
    ) -> AssistantSummary:
        tiers: dict[str, TierSummary] = {tier: TierSummary() for tier in TIERS}
        kinds: Counter[str] = Counter()
        gaps: list[float] = []
        per_tier_scores: dict[str, dict[str, float]] = {tier: {} for tier in TIERS}
        for (answer, tier), result in zip(tasks, results, strict=True):
            kinds.update(result.kinds)
            if not result.ok or result.score_first is None or result.outcome is None:
                tiers[tier].outcomes["failed"] += 1
                continue
            tiers[tier].outcomes[result.outcome] += 1
            tiers[tier].scores.append(result.score_first)
            per_tier_scores[tier][answer.key] = result.score_first
            if result.disagreement is not None:
                gaps.append(result.disagreement)
        matches = [MatchResult(name, f"tier:{t}", per_tier_scores[t]) for t in ELO_ORDER]
        judged = any(m.scores for m in matches)
        elo = replay([name, *(f"tier:{t}" for t in TIERS)], matches)[name] if judged else None
        return AssistantSummary(
            assistant=name,
            answers=len(answers),
            endpoint_answers=sum(1 for a in answers if a.source == "endpoint"),
            fetch_failures=failures,
            tiers=tiers,
            kinds=kinds,
            position_disagreement=sum(gaps) / len(gaps) if gaps else None,
            elo=elo,
        )

    def _export(self, summary: AssistantSummary, results: Sequence[PairwiseJudgment]) -> None:
        self._metrics.record_assistant(
            summary.assistant,
            outcomes={tier: stats.outcomes for tier, stats in summary.tiers.items()},
            win_rates={tier: stats.win_rate for tier, stats in summary.tiers.items()},
            kinds=summary.kinds,
            position_disagreement=summary.position_disagreement,
            elo=summary.elo,
        )
        if isinstance(self._judge, HeuristicPairwiseJudge):
            return  # no requests, failures or spend: the judge series stay the turn judge's
        self._metrics.record_judge_requests(self._judge.name, results)


def _client(assistant: BaselineAssistantConfig) -> AssistantClient:
    if assistant.endpoint is None:
        raise ValueError(f"assistant {assistant.name!r} has no endpoint")
    return AssistantClient(assistant.endpoint, name=assistant.name)


def build_baseline_job(
    config: BaselineConfig,
    probes: Sequence[Probe],
    judge_config: JudgeConfig,
    store: Store,
    metrics: Metrics,
    clock: Clock,
    budget: Budget | None = None,
) -> BaselineTiersJob:
    """The job as configured in the ``baseline:`` section on ``probes`` (the set of
    ``config.probes``, read and checked at the entrypoint by ``jobs/inputs.probe_set``), its
    pairwise judge configured by ``judge_config``."""
    options = PairwiseOptions(
        swap=config.swap,
        threshold=config.confidence_threshold,
        top_logprobs=config.top_logprobs,
    )
    judge = build_pairwise_judge(config.judge, judge_config, options, clock=clock)
    return BaselineTiersJob(config, probes, judge, store, metrics, clock=clock, budget=budget)


def _row(
    run_id: str,
    assistant: str,
    answer: Answer,
    tier: Tier,
    result: PairwiseJudgment,
    now: datetime,
) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "assistant": assistant,
        "opponent": tier,
        "probe_id": answer.probe.id,
        "source": answer.source,
        "event_id": answer.event_id,
        "answer": answer.text,
        "judge": result.judge,
        "model": result.model,
        "prompt_version": result.prompt_version,
        "status": result.status,
        "failure_reason": result.failure_reason,
        "score": result.score_first,
        "outcome": result.outcome,
        "disagreement": result.disagreement,
        "forward": result.forward.model_dump(mode="json"),
        "swapped": result.swapped.model_dump(mode="json") if result.swapped else None,
        "cost_usd": result.cost_usd,
        "created_at": now,
    }


def summary_dict(summary: AssistantSummary) -> Mapping[str, Any]:
    """A JSON-friendly view (CLI output and logs)."""
    return {
        "assistant": summary.assistant,
        "answers": summary.answers,
        "fetch_failures": dict(summary.fetch_failures),
        "tiers": {
            t: {"win_rate": s.win_rate, **{k: s.outcomes[k] for k in (*OUTCOMES, "failed")}}
            for t, s in summary.tiers.items()
        },
        "confidence": dict(summary.kinds),
        "position_disagreement": summary.position_disagreement,
        "elo": summary.elo,
        "budget_refused": summary.budget_refused,
    }


__all__ = [
    "ELO_ORDER",
    "JOB_NAME",
    "AssistantSummary",
    "BaselineTiersJob",
    "TierSummary",
    "build_baseline_job",
    "summary_dict",
]
