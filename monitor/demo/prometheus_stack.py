"""A throwaway Prometheus and Alertmanager on free loopback ports, for tests and the demo.

    with PrometheusStack(["http://127.0.0.1:9464"], rule_files=[rules], webhook_url=url) as s:
        s.query('sum(rate(casewatch_turns_judged_total[1m]))')
        s.alerts()                      # what Prometheus evaluates (pending and firing)

Both run from Debian's packages (``/usr/bin/prometheus``, ``/usr/bin/prometheus-alertmanager``,
installed by ``make services``), each in a temporary directory (config, TSDB or notification
log, its own log file) removed on ``stop()``. They are never system services: each stack is
its own pair of processes, so tests run in parallel without sharing state. Alertmanager runs
without clustering (``--cluster.listen-address=``: no gossip port).

This module is the stack: the two servers' configuration (documents from
``monitor.demo.prometheus_config``, pure; the rule files with their links moved) and the order
they start and stop in. Each process is supervised by ``monitor.demo.prometheus_process``; the
queries are ``monitor.demo.prometheus_api``'s.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

import yaml

from monitor.demo.prometheus_api import PrometheusQueries, is_ready
from monitor.demo.prometheus_config import (
    ScrapeTarget,
    alertmanager_config,
    prometheus_config,
)
from monitor.demo.prometheus_process import (
    ALERTMANAGER_BIN,
    PROMETHEUS_BIN,
    START_TIMEOUT_S,
    ServerProcess,
    find_binary,
)
from monitor.errors import ConfigError, PrometheusStackError
from monitor.reports.alert_links import dashboards_as_files, rebase_links


class PrometheusStack(PrometheusQueries):
    """Alertmanager (with a webhook receiver at ``webhook_url``, if given) and a Prometheus
    scraping ``targets`` (``host:port`` or ``http://host:port[/path]``) with ``rule_files``
    loaded, sending its alerts to that Alertmanager. ``start()`` returns once both answer
    ``/-/ready``; ``stop()`` ends both and removes their directory (kept with ``keep_dir``).
    ``runbook_base``: the rules are loaded with their ``runbook_url`` annotations moved there
    (``monitor.reports.alert_links``; the demo points them at the checkout's own runbook).
    ``dashboards_base``: their Grafana ``dashboard_url`` annotations name the dashboard JSON
    files there instead (the demo runs no Grafana).
    """

    def __init__(
        self,
        targets: Sequence[str],
        *,
        rule_files: Sequence[Path] = (),
        webhook_url: str | None = None,
        runbook_base: str | None = None,
        dashboards_base: str | None = None,
        scrape_interval_s: float = 1.0,
        evaluation_interval_s: float = 1.0,
        host: str = "127.0.0.1",
        workdir: Path | None = None,
        keep_dir: bool = False,
        prometheus_bin: Path = PROMETHEUS_BIN,
        alertmanager_bin: Path = ALERTMANAGER_BIN,
    ) -> None:
        self._targets = [ScrapeTarget.of(t) for t in targets]
        if not self._targets:
            raise ValueError("a Prometheus stack needs at least one scrape target")
        self._rule_files = [Path(p).resolve() for p in rule_files]
        for path in self._rule_files:
            if not path.is_file():
                raise ConfigError(f"rule file {path} does not exist")
        self._webhook_url = webhook_url
        self._runbook_base = runbook_base
        self._dashboards_base = dashboards_base
        self._scrape_s = scrape_interval_s
        self._eval_s = evaluation_interval_s
        self._host = host
        self._prometheus_bin = prometheus_bin
        self._alertmanager_bin = alertmanager_bin
        self._given_dir = workdir
        self._keep_dir = keep_dir
        self._dir: Path | None = None
        self._prometheus: ServerProcess | None = None
        self._alertmanager: ServerProcess | None = None
        self._ui_prefix = None

    # ------------------------------------------------------------ lifecycle

    @property
    def workdir(self) -> Path:
        if self._dir is None:
            raise PrometheusStackError("the Prometheus stack is not started")
        return self._dir

    @property
    def prometheus_url(self) -> str:
        if self._prometheus is None:
            raise PrometheusStackError("the Prometheus stack is not started")
        return self._prometheus.url

    @property
    def alertmanager_url(self) -> str:
        if self._alertmanager is None:
            raise PrometheusStackError("the Prometheus stack is not started")
        return self._alertmanager.url

    @property
    def running(self) -> bool:
        return all(s is not None and s.running for s in (self._prometheus, self._alertmanager))

    def start(self, timeout_s: float = START_TIMEOUT_S) -> PrometheusStack:
        """Start Alertmanager, then Prometheus; a started stack is returned as it is."""
        if self._prometheus is not None:
            return self
        prometheus_bin = find_binary(self._prometheus_bin)
        alertmanager_bin = find_binary(self._alertmanager_bin)
        if self._given_dir is not None:
            self._given_dir.mkdir(parents=True, exist_ok=True)
            self._dir = self._given_dir
        else:
            self._dir = Path(tempfile.mkdtemp(prefix="casewatch-prometheus-"))
        try:
            self._start_alertmanager(alertmanager_bin, timeout_s)
            self._start_prometheus(prometheus_bin, timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_alertmanager(self, binary: Path, timeout_s: float) -> None:
        d = self.workdir / "alertmanager"
        (d / "data").mkdir(parents=True, exist_ok=True)
        config = d / "alertmanager.yml"
        config.write_text(yaml.safe_dump(alertmanager_config(self._webhook_url)))
        self._alertmanager = ServerProcess("alertmanager", binary, d, self._host)
        self._alertmanager.start(
            lambda listen: [
                f"--config.file={config}",
                f"--storage.path={d / 'data'}",
                f"--web.listen-address={listen}",
                "--cluster.listen-address=",
            ],
            is_ready,
            timeout_s,
        )

    def _start_prometheus(self, binary: Path, timeout_s: float) -> None:
        alertmanager = self.alertmanager_url.removeprefix("http://")
        d = self.workdir / "prometheus"
        (d / "data").mkdir(parents=True, exist_ok=True)
        config = d / "prometheus.yml"
        doc = prometheus_config(
            self._targets,
            rule_files=[str(p) for p in self._loaded_rules(d / "rules")],
            alertmanager=alertmanager,
            scrape_interval_s=self._scrape_s,
            evaluation_interval_s=self._eval_s,
        )
        config.write_text(yaml.safe_dump(doc, sort_keys=False))
        self._prometheus = ServerProcess("prometheus", binary, d, self._host)
        self._prometheus.start(
            lambda listen: [
                f"--config.file={config}",
                f"--storage.tsdb.path={d / 'data'}",
                f"--web.listen-address={listen}",
                "--web.enable-lifecycle",
            ],
            is_ready,
            timeout_s,
        )

    def _loaded_rules(self, directory: Path) -> list[Path]:
        """The rule files as given, or copies in ``directory`` with their runbook and
        dashboard links moved (one per file, numbered: two files may share a name)."""
        if self._runbook_base is None and self._dashboards_base is None:
            return self._rule_files
        directory.mkdir(parents=True, exist_ok=True)
        copies = []
        for i, path in enumerate(self._rule_files):
            doc = rebase_links(yaml.safe_load(path.read_text()), runbook_base=self._runbook_base)
            if self._dashboards_base is not None:
                doc = dashboards_as_files(doc, self._dashboards_base)
            copy = directory / f"{i}-{path.name}"
            copy.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))
            copies.append(copy)
        return copies

    def stop(self) -> None:
        """Stop Prometheus, then Alertmanager; remove the directory. Idempotent."""
        for server in (self._prometheus, self._alertmanager):
            if server is not None:
                server.stop()
        if self._dir is not None and self._given_dir is None and not self._keep_dir:
            shutil.rmtree(self._dir, ignore_errors=True)
        self._dir = None if self._given_dir is None else self._dir
        self._prometheus = self._alertmanager = None
        self._ui_prefix = None

    def kill(self) -> None:
        """End both processes at once (SIGKILL) without waiting or cleaning up: for an owner
        about to die (the demo's second Ctrl-C), whose servers run in sessions of their own and
        would otherwise outlive it. Safe in a signal handler."""
        for server in (self._prometheus, self._alertmanager):
            if server is not None:
                server.kill()

    def __enter__(self) -> PrometheusStack:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
