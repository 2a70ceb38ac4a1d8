"""``casewatch demo``: the whole streaming pipeline on one machine, with nothing to set up.

An embedded Tansu broker, the topic ``support.turns`` (2 partitions) and its dead-letter topic,
a producer thread replaying ``examples/turns.jsonl`` in a loop (event ids made unique per loop,
timestamps refreshed, a few malformed records per loop so the dead-letter counters move), and
the real daemon (the one ``casewatch run`` starts) with the heuristic judge, or the judges of
``--config``, writing to a SQLite file and serving ``/metrics``, ``/healthz`` and ``/readyz``.

``Demo`` is the orchestration (start, run, stop, usable from tests); the daemon itself is
``monitor.stream.runner.DaemonRunner``, the one ``casewatch run`` runs, here on a thread. The
options and the settings the demo derives are ``monitor.demo.options``, what it prints around
its run ``monitor.demo.banner``, the examples and the replayed records
``monitor.demo.examples``, the producer thread ``monitor.demo.producer``; pure parts are
tested without a broker.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import structlog
from prometheus_client import CollectorRegistry

from monitor.config.settings import Settings
from monitor.demo.alerts import DemoAlerts, find_rules
from monitor.demo.banner import closing_hint, opening
from monitor.demo.baselines import pin_baselines
from monitor.demo.examples import find_examples, load_examples
from monitor.demo.failure_modes import failures_hint, mode_line, new_modes
from monitor.demo.options import DEMO_PARTITIONS, DEMO_TOPIC, DemoOptions, demo_settings
from monitor.demo.producer import ReplayProducer
from monitor.demo.regression import FLAWS_FILE, RegressionPlan, load_flaws, plan_regression
from monitor.demo.summary import AlertState, Snapshot, format_summary
from monitor.errors import DemoError, ListenError
from monitor.metrics.exporter import process_registry
from monitor.stream.runner import DaemonRunner
from monitor.stream.shutdown_budget import shutdown_budget_s

if TYPE_CHECKING:
    from consumers.tansu import EmbeddedBroker

log = structlog.get_logger(__name__)


class Demo:
    """``Demo(settings, options).start()`` ... ``stop()``; ``run()`` blocks until stopped."""

    def __init__(
        self,
        settings: Settings,
        options: DemoOptions | None = None,
        *,
        registry: CollectorRegistry | None = None,
        echo: Callable[[str], None] = print,
    ) -> None:
        self.options = options or DemoOptions()
        self._base = settings
        self.registry = registry or process_registry()
        self._echo = echo
        self._stop_requested = threading.Event()
        self._lock = threading.Lock()
        self._tmp: Path | None = None
        self._broker: EmbeddedBroker | None = None
        self._runner: DaemonRunner | None = None
        self._producer: ReplayProducer | None = None
        self._alerts: DemoAlerts | None = None
        self._regression: RegressionPlan | None = None
        self.regressed = False
        self._regressed_at: float | None = None
        self._started_at = 0.0
        self._announced: set[str] = set()  # failure modes of the canary already printed
        self.settings: Settings | None = None

    @property
    def metrics_url(self) -> str:
        if self._runner is None:
            raise DemoError("the demo is not started")
        return f"{self._runner.url}/metrics"

    @property
    def db_path(self) -> Path:
        if self.options.db_path is not None:
            return self.options.db_path
        if self._tmp is None:
            raise DemoError("the demo is not started")
        # Outside the directory cleanup() removes: the turns behind an alert outlive the demo.
        return self._tmp.with_name(self._tmp.name + ".db")

    @property
    def broker_running(self) -> bool:
        return self._broker is not None and self._broker.running

    def start(self) -> Demo:
        from consumers.tansu import EmbeddedBroker, create_topics

        examples = find_examples(self.options.examples)
        docs = load_examples(examples)
        self._tmp = Path(tempfile.mkdtemp(prefix="casewatch-demo-"))
        try:
            self._broker = EmbeddedBroker(log_path=self._tmp / "tansu.log")
            self._broker.start()
            bootstrap = self._broker.bootstrap
            db_url = f"sqlite:///{self.db_path}"
            settings = demo_settings(
                self._base, bootstrap, db_url, self.options.host, self.options.port
            )
            self.settings = settings
            create_topics(
                bootstrap, [DEMO_TOPIC], DEMO_PARTITIONS, dlq_suffix=settings.kafka.dlq_suffix
            )
            if self.options.regression_after_s is not None:
                self._regression = plan_regression(docs, load_flaws(examples.parent / FLAWS_FILE))
            replayed = self._regression.healthy if self._regression is not None else docs
            # The detectors arm on the healthy replay's own rates (a fresh database has no
            # reference window), so the injected regression is what they page on.
            settings = pin_baselines(settings, replayed)
            self.settings = settings
            self._runner = DaemonRunner(settings, self.registry).start()
            self._producer = ReplayProducer(bootstrap, DEMO_TOPIC, replayed, self.options.rate)
            self._producer.start()
            alerting = "  alerts:   off (--no-alerts)"
            if self.options.alerts:
                self._alerts = DemoAlerts(
                    find_rules(self.options.rules),
                    prometheus_bin=self.options.prometheus_bin,
                    alertmanager_bin=self.options.alertmanager_bin,
                )
                alerting = self._alerts.start(self._runner.url)
        except ListenError as exc:
            self.stop()
            raise DemoError(f"{exc}; pick another --port") from exc
        except OSError as exc:
            self.stop()
            raise DemoError(f"the demo could not start: {exc}") from exc
        except BaseException:
            self.stop()
            raise
        self._started_at = time.monotonic()
        self._echo(
            opening(
                settings,
                bootstrap=bootstrap,
                examples=examples,
                rate=self.options.rate,
                per_loop=len(docs),
                metrics_url=self.metrics_url,
                db_path=self.db_path,
                alerting=alerting,
                regression=self._regression,
                regression_after_s=self.options.regression_after_s,
                summary_interval_s=self.options.summary_interval_s,
            )
        )
        return self

    @property
    def prometheus_url(self) -> str | None:
        """Where the alerts and the rules' graphs are; None when alerting is off."""
        return None if self._alerts is None else self._alerts.prometheus_url

    def inject_regression(self) -> str | None:
        """Switch the canary to its flawed answers now; the line to print, None if there is
        no regression to inject (or it already was)."""
        plan, producer = self._regression, self._producer
        if plan is None or producer is None or self.regressed:
            return None
        producer.replace_docs(plan.regressed)
        self.regressed = True
        self._regressed_at = time.monotonic()
        elapsed = time.monotonic() - self._started_at
        return (
            f"[{elapsed:5.0f}s] regression injected: {plan.canary} now answers with its flawed "
            f"answers only; {plan.stable} stays healthy"
        )

    def alert_states(self) -> list[AlertState]:
        """The alerts pending or firing now in the demo's Prometheus ([] without one)."""
        return [] if self._alerts is None else self._alerts.states()

    @property
    def regressed_at(self) -> float | None:
        """``time.monotonic()`` when the regression was injected (None: not yet)."""
        return self._regressed_at

    def snapshot(self) -> Snapshot:
        return Snapshot.of(self.registry)

    def summary(self) -> str:
        produced = self._producer.sent if self._producer is not None else 0
        elapsed = time.monotonic() - self._started_at
        line = format_summary(self.snapshot(), elapsed, produced)
        alerts = self._alerts.summary() if self._alerts is not None else None
        return line if alerts is None else f"{line}\n{alerts}"

    def kill_broker(self) -> None:
        """End the embedded broker at once, for a demo killed by a second signal: the broker
        runs in a session of its own and would outlive it. Safe in a signal handler."""
        if self._alerts is not None:
            self._alerts.kill()
        if self._broker is not None:
            self._broker.kill()

    def request_stop(self) -> None:
        """Ask ``run`` to stop (it notices within 0.2 s). Safe from a signal handler: only
        sets a flag the main thread never waits on, so no lock it holds can be contended."""
        if not self._stop_requested.is_set():
            self._stop_requested.set()

    def run(self, duration_s: float | None = None) -> None:
        """Print a summary every interval until a stop request, ``duration_s`` or a daemon
        failure; then stop (drain, commit, stop the broker). Raises DemoError on failure, and
        OffsetsNotCommitted when the final commit failed (the broker died first)."""
        deadline = None if duration_s is None else time.monotonic() + duration_s
        next_summary = time.monotonic() + self.options.summary_interval_s
        after = self.options.regression_after_s
        regress_at = None if after is None else self._started_at + after
        try:
            while not self._stop_requested.is_set():
                if deadline is not None and time.monotonic() >= deadline:
                    break
                if self._runner is None or not self._runner.alive:
                    break
                if regress_at is not None and time.monotonic() >= regress_at:
                    regress_at = None
                    if (line := self.inject_regression()) is not None:
                        self._echo(line)
                if time.monotonic() >= next_summary:
                    self._echo(self.summary())
                    self._announce_failure_modes()
                    next_summary += self.options.summary_interval_s
                # Plain sleep, not Event.wait: a signal handler must not contend for its lock.
                time.sleep(0.2)
        finally:
            # The second Ctrl-C is offered only to someone who pressed the first.
            again = " (Ctrl-C again to quit at once)" if self._stop_requested.is_set() else ""
            if self._runner is not None and self._regression is not None:
                # The recurring causes behind the canary's failed turns, found so far.
                regressed = self._regression.canary
                self._echo(failures_hint(self.db_path, regressed, len(self._announced)))
            self._echo(f"stopping: draining in-flight turns, committing offsets ...{again}")
            self.stop()
            self._echo(self.summary())
            if self._runner is not None:  # From the alert to its turns
                canary = self._regression.canary if self._regression is not None else None
                self._echo(closing_hint(self.db_path, canary))
        if self._runner is not None:
            if self._runner.error is not None:
                raise DemoError(f"the daemon failed: {self._runner.error}")
            if self._runner.alive:
                raise DemoError("the daemon did not finish in time; its offsets were not committed")
            if (error := self._runner.commit_error) is not None:
                raise error

    def _announce_failure_modes(self) -> None:
        """One line per failure mode of the canary the failure-modes job found since the last
        summary (the regression's planted flaws, once it is injected)."""
        if self._regression is None or self.settings is None:
            return
        elapsed = time.monotonic() - self._started_at
        for mode in new_modes(self.db_path, self._regression.canary, self._announced):
            self._echo(mode_line(mode, elapsed))

    def stop(self) -> None:
        """Stop the producer, drain and close the daemon, stop the broker. Idempotent."""
        with self._lock:
            runner, settings = self._runner, self.settings
            if runner is not None:
                runner.daemon.stop()  # drains while the producer closes
            if self._producer is not None:
                self._producer.stop()
            stopped = runner is None or settings is None or runner.stop(shutdown_budget_s(settings))
            if not stopped:
                log.warning("the daemon did not finish draining in time")
            if self._alerts is not None:
                self._alerts.stop()
            if self._broker is not None:
                self._broker.stop()

    def cleanup(self) -> None:
        """Remove the temporary directory (database and broker log) once stopped."""
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> Demo:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self.cleanup()
