"""How long stopping the daemon may take, and the limits it is made of (pure arithmetic).

Stopping takes at most ``shutdown_budget_s(settings)`` whatever the brokers do (an orchestrator's
grace period should exceed it): every Kafka call has a limit, those of the running loop within
the drain timeout, so a stop request never waits on more than the drain, the final commit and
the bounded steps of closing. ``stream/runner.py`` gives these limits to what it opens.
"""

from __future__ import annotations

from monitor.config.settings import Settings
from monitor.stream.steps.commit import FINAL_COMMIT_MIN_S

# Limits of the Kafka calls the running loop makes (a commit, a dead-letter write), capped by
# the drain timeout: a stop request waits for the call in progress.
BROKER_CALL_TIMEOUT_S = 30.0
# Each step of closing a Kafka client: the consumer's revocation commit, then its leaving the
# group; the dead-letter producer's flush, then its sender thread's exit.
KAFKA_CLOSE_TIMEOUT_S = 5.0
JOBS_STOP_S = 5.0  # a scheduled job running at shutdown is given this long, then abandoned


def broker_call_timeout_s(settings: Settings) -> float:
    return min(BROKER_CALL_TIMEOUT_S, settings.daemon.drain_timeout_seconds)


def shutdown_budget_s(settings: Settings) -> float:
    """The longest a stop request takes to return from ``DaemonRunner.run_foreground`` (or
    ``stop``), brokers reachable or not."""
    return (
        settings.daemon.drain_timeout_seconds  # absorbs a broker call in progress at the stop
        + FINAL_COMMIT_MIN_S
        + JOBS_STOP_S  # a scheduled job in progress
        + 4 * KAFKA_CLOSE_TIMEOUT_S  # consumer and dead-letter producer, two steps each
    )
