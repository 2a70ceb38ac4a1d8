"""The alerting half of ``casewatch demo``: a Prometheus scraping the demo's daemon with
``rules/`` loaded and an Alertmanager it sends to (``monitor.demo.prometheus_stack``, Debian's
binaries on free loopback ports), and the alerts line of the periodic summary.

Without the binaries (or without ``rules/``) the demo runs all the same: ``start`` returns the
line saying why there are no alerts and how to get them (``make services``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

import structlog

from monitor.demo.prometheus_process import ALERTMANAGER_BIN, PROMETHEUS_BIN
from monitor.demo.prometheus_stack import PrometheusStack
from monitor.demo.summary import AlertState, format_alerts
from monitor.errors import PrometheusNotInstalled, PrometheusStackError

if TYPE_CHECKING:
    from collections.abc import Sequence

log = structlog.get_logger(__name__)

RULES = Path("rules") / "casewatch.rules.yml"
RUNBOOK = "RUNBOOK.md"
# The burn rate of the page alert, per assistant: what the demo suggests graphing.
GRAPH_EXPR = "assistant:casewatch_turns_severe:ratio_rate5m"
HOW_TO_GET = (
    "`make services` installs Debian's prometheus and prometheus-alertmanager (as root); "
    "then `make run` shows the alerts"
)


def find_rules(explicit: Path | None = None, *, cwd: Path | None = None) -> Path | None:
    """``explicit``, else rules/casewatch.rules.yml under the working directory or the
    checkout; None when there is none."""
    if explicit is not None:
        return explicit if explicit.is_file() else None
    here = (cwd or Path.cwd()) / RULES
    checkout = Path(__file__).resolve().parents[2] / RULES
    return next((p for p in (here, checkout) if p.is_file()), None)


def runbook_base(rules: Path) -> str:
    """Where the demo's alerts link their runbook: the checkout's own rules/ directory, as a
    ``file://`` URL (the upstream repository's page may not be reachable from the machine, and
    its runbook may not match this checkout's rules). A rules file with no RUNBOOK.md beside it
    links the checkout's."""
    here = rules.resolve().parent
    directory = (
        here if (here / RUNBOOK).is_file() else Path(__file__).resolve().parents[2] / "rules"
    )
    return directory.as_uri()


def dashboards_base(rules: Path) -> str:
    """Where the demo's alerts link their dashboard: the JSON files in the dashboards/
    directory beside the rules' directory (else the checkout's), as a ``file://`` URL, since
    the demo starts no Grafana to open a dashboard link in."""
    here = rules.resolve().parent.parent / "dashboards"
    directory = here if here.is_dir() else Path(__file__).resolve().parents[2] / "dashboards"
    return directory.as_uri()


class DemoAlerts:
    """``start(target)`` ... ``summary()`` every interval ... ``stop()``."""

    def __init__(
        self,
        rules: Path | None,
        *,
        prometheus_bin: Path = PROMETHEUS_BIN,
        alertmanager_bin: Path = ALERTMANAGER_BIN,
    ) -> None:
        self._rules = rules
        self._prometheus_bin = prometheus_bin
        self._alertmanager_bin = alertmanager_bin
        self.stack: PrometheusStack | None = None

    @property
    def prometheus_url(self) -> str | None:
        return None if self.stack is None else self.stack.prometheus_url

    def start(self, target: str) -> str:
        """Start Prometheus (scraping ``target``) and Alertmanager; the lines to print, which
        say where to look, or why there are no alerts and how to get them."""
        if self._rules is None:
            return f"  alerts:   off (no {RULES} found: run from the casewatch checkout)"
        stack = PrometheusStack(
            [target],
            rule_files=[self._rules],
            runbook_base=runbook_base(self._rules),
            dashboards_base=dashboards_base(self._rules),
            prometheus_bin=self._prometheus_bin,
            alertmanager_bin=self._alertmanager_bin,
        )
        try:
            stack.start()
        except PrometheusNotInstalled:
            return f"  alerts:   off (Prometheus/Alertmanager not installed): {HOW_TO_GET}"
        except PrometheusStackError as exc:
            log.warning("the demo's Prometheus did not start", error=str(exc))
            return f"  alerts:   off (Prometheus did not start: {str(exc).splitlines()[0]})"
        self.stack = stack
        return (
            f"  alerts:   Prometheus {stack.ui_url('alerts')} with {self._rules} loaded, "
            f"Alertmanager {stack.alertmanager_url}\n"
            f"            severe share per assistant: "
            f"{stack.ui_url('graph')}?g0.expr={quote(GRAPH_EXPR)}"
        )

    def states(self) -> list[AlertState]:
        """The alerts pending or firing now ([] when alerting is off); raises
        PrometheusStackError when Prometheus does not answer."""
        if self.stack is None:
            return []
        return [AlertState(a.name, a.state, a.labels.get("assistant")) for a in self.stack.alerts()]

    def summary(self) -> str | None:
        """The alerts line of the periodic summary; None when alerting is off."""
        if self.stack is None:
            return None
        page = self.stack.ui_url("alerts")
        try:
            alerts: Sequence[AlertState] = self.states()
        except PrometheusStackError as exc:
            return f"  alerts: Prometheus is not answering ({exc})   ({page})"
        return format_alerts(alerts, page)

    def stop(self) -> None:
        stack, self.stack = self.stack, None
        if stack is not None:
            stack.stop()

    def kill(self) -> None:
        """SIGKILL both servers without waiting (the demo's second Ctrl-C). Signal-safe."""
        if self.stack is not None:
            self.stack.kill()
