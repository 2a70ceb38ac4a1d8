"""What ``casewatch demo`` runs with: its options, the topic it replays into, the settings it
derives from the user's (``demo_settings``) and the longest its stop may take."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from monitor.config.cases import CasesConfig
from monitor.config.failure_modes import FailureModesConfig
from monitor.config.sampling import SamplingConfig
from monitor.config.settings import Settings
from monitor.demo.producer import PRODUCER_STOP_S
from monitor.demo.prometheus_process import ALERTMANAGER_BIN, PROMETHEUS_BIN
from monitor.demo.prometheus_process import STOP_TIMEOUT_S as PROMETHEUS_STOP_S
from monitor.stream.shutdown_budget import shutdown_budget_s

DEMO_TOPIC = "support.turns"
DEMO_PARTITIONS = 2
DEFAULT_RATE = 20.0
DEFAULT_PORT = 9464
SUMMARY_INTERVAL_S = 10.0
REGRESSION_AFTER_S = 90.0  # the canary turns bad this long after the start

DEMO_SAMPLING = SamplingConfig(
    default_rate=1.0, budget_calls_per_hour=None, budget_usd_per_hour=None
)


@dataclass(frozen=True)
class DemoOptions:
    rate: float = DEFAULT_RATE
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    db_path: Path | None = None  # None: a new file in the temp directory, kept (printed)
    examples: Path | None = None
    summary_interval_s: float = SUMMARY_INTERVAL_S
    # Prometheus + Alertmanager with rules/ loaded, when the binaries are installed.
    alerts: bool = True
    rules: Path | None = None  # None: rules/casewatch.rules.yml of the checkout
    prometheus_bin: Path = PROMETHEUS_BIN
    alertmanager_bin: Path = ALERTMANAGER_BIN
    # The canary regresses this long after the start (None: never); see demo_regression.
    regression_after_s: float | None = REGRESSION_AFTER_S


# The failure-modes job every 20 s over the last 10 minutes, the last minute its recent part,
# at most 2,000 failed turns a run: the canary's regression shows as new modes within a run of
# its injection, and a run stays a few seconds of CPU however long the demo lasts.
DEMO_FAILURE_MODES = FailureModesConfig(
    interval_seconds=20.0, window_seconds=600.0, recent_seconds=60.0, max_turns=2000
)


DEMO_CASES = CasesConfig(idle_seconds=10.0, interval_seconds=5.0, lookback_seconds=3600.0)


def demo_settings(base: Settings, bootstrap: str, db_url: str, host: str, port: int) -> Settings:
    """``base`` (judges, panel, sampling, weights) pointed at the demo's broker, DB and port.

    Session timeouts are short: one consumer on a fresh broker joins in ~3 s instead of ~23.
    The poll interval is the configuration's: the drain at the stop keeps polling
    (``monitor/stream/drain.py``), so however long it takes the consumer stays in its group
    and the final commit is accepted.
    """
    from consumers.tansu import FETCH_MAX_WAIT_MS

    kafka = base.kafka.model_copy(
        update={
            "bootstrap_servers": [bootstrap],
            "topics": [DEMO_TOPIC],
            "group_id": "casewatch-demo",
            "session_timeout_ms": 6000,
            "heartbeat_interval_ms": 1000,
            "fetch_max_wait_ms": FETCH_MAX_WAIT_MS,
        }
    )
    # The demo judges every turn with the offline judge unless the configuration says how to
    # sample: the production defaults (a tenth, an hourly budget) would leave its dashboards
    # and alerts thin.
    sampling = base.sampling if "sampling" in base.model_fields_set else DEMO_SAMPLING
    # Cases close 10 s after their last turn unless the configuration says otherwise: a loop
    # replays a conversation's turns within a second or two, and the demo should show case
    # verdicts (and the canary's cases turning bad) within its first minute, not after 10.
    cases = base.cases if "cases" in base.model_fields_set else DEMO_CASES
    failure_modes = (
        base.failure_modes if "failure_modes" in base.model_fields_set else DEMO_FAILURE_MODES
    )
    return base.model_copy(
        update={
            "kafka": kafka,
            "sampling": sampling,
            "cases": cases,
            "failure_modes": failure_modes,
            "storage": base.storage.model_copy(update={"url": db_url, "retention_days": None}),
            "server": base.server.model_copy(update={"host": host, "port": port}),
        }
    )


def stop_budget_s(settings: Settings) -> float:
    """The longest ``Demo.stop()`` takes, broker alive or dead: the replay producer, the
    daemon's shutdown budget, Prometheus and Alertmanager, then the broker (each terminated,
    killed if it lingers)."""
    from consumers.tansu import STOP_TIMEOUT_S

    return (
        PRODUCER_STOP_S
        + shutdown_budget_s(settings)
        + 2 * 2 * PROMETHEUS_STOP_S
        + 2 * STOP_TIMEOUT_S
    )
