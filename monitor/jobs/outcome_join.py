"""The outcome join job: outcomes whose turn came after them are joined, those the join
window passed are expired (counted: an unknown id), and joined feedback is paired once with
its turn's newest ok verdict (``casewatch_judge_user_pairs_total{agreement}``).

Runs on the lease like every scheduled job, every ``outcomes.join_interval_seconds``; one
replica joins and pairs, and a pair is marked in the same transaction that finds it, so a
restart or another replica never counts it twice.
"""

from __future__ import annotations

import structlog

from monitor.config.outcomes import OutcomesConfig
from monitor.jobs.recorders import OutcomeRecorder
from monitor.storage.outcomes import OutcomeRecords

log = structlog.get_logger(__name__)

PAIRS_PER_RUN = 5000


class OutcomeJoinJob:
    name = "outcome_join"

    def __init__(
        self, config: OutcomesConfig, records: OutcomeRecords, recorder: OutcomeRecorder
    ) -> None:
        self._config = config
        self._records = records
        self._recorder = recorder
        self.interval_seconds = config.join_interval_seconds
        recorder.prime()

    def close(self) -> None:
        pass  # holds nothing beyond the store, which the daemon closes

    def run(self) -> None:
        joins = self._records.join_pending(self._config.join_window_seconds)
        pending = self._records.pending()
        self._recorder.record_joins(later=joins.joined, expired=joins.expired, pending=pending)
        pairs = self._records.pair_feedback(PAIRS_PER_RUN)
        for pair in pairs:
            self._recorder.record_pair(pair.assistant, pair.agreement)
        if joins.joined or joins.expired or pairs:
            log.info(
                "outcomes joined",
                joined=joins.joined,
                expired=joins.expired,
                pending=pending,
                paired=len(pairs),
            )
