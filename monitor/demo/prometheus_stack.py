"""A throwaway Prometheus and Alertmanager on free loopback ports, for tests and the demo.

    with PrometheusStack(["http://127.0.0.1:9464"], rule_files=[rules], webhook_url=url) as s:
        s.query('sum(rate(casewatch_turns_judged_total[1m]))')
        s.alerts()                      # what Prometheus evaluates (pending and firing)

Both run from Debian's packages (``/usr/bin/prometheus``, ``/usr/bin/prometheus-alertmanager``,
installed by ``make services``), each in a temporary directory (config, TSDB or notification
log, its own log file) removed on ``stop()``. They are never system services: each stack is
its own pair of processes, so tests run in parallel without sharing state. Alertmanager runs
without clustering (``--cluster.listen-address=``: no gossip port).

Config documents come from ``monitor.demo.prometheus_config`` (pure); this module starts,
probes (``/-/ready``), queries (the HTTP API, stdlib only) and stops the processes.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import socket
import subprocess
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import structlog
import yaml

from monitor.demo.prometheus_config import (
    ScrapeTarget,
    alertmanager_config,
    prometheus_config,
)
from monitor.errors import ConfigError, PrometheusNotInstalled, PrometheusStackError
from monitor.processes import spawn_logged, stop_process, wait_ready
from monitor.reports.alert_links import dashboards_as_files, rebase_links

log = structlog.get_logger(__name__)

PROMETHEUS_BIN = Path("/usr/bin/prometheus")
ALERTMANAGER_BIN = Path("/usr/bin/prometheus-alertmanager")
PROMTOOL_BIN = Path("/usr/bin/promtool")
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
HTTP_TIMEOUT_S = 10.0
_PORT_ATTEMPTS = 3  # a free port can be taken between probe and bind: retry with another
# Where Prometheus' web UI pages live: the React UI at the root, else the classic UI under
# /classic. Debian's build (2.42, what `make services` installs) ships only the classic UI:
# its /alerts answers 404 and /graph redirects to /classic/graph.
UI_PREFIXES = ("", "/classic")


def find_binary(path: Path) -> Path:
    """``path`` if it is an executable file, else ``PrometheusNotInstalled``."""
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise PrometheusNotInstalled(
            f"{path} is missing: run `make services` (installs Debian's 'prometheus' and "
            "'prometheus-alertmanager' packages as root)"
        )
    return path


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def _get_json(url: str, timeout_s: float = HTTP_TIMEOUT_S) -> Any:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:  # noqa: S310 -- http only
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        body = exc.read().decode(errors="replace")[:500]
        raise PrometheusStackError(f"GET {url}: HTTP {exc.code}: {body}") from exc
    except (OSError, ValueError) as exc:
        raise PrometheusStackError(f"GET {url}: {exc}") from exc


def _answers(url: str) -> bool:
    """Whether a GET of ``url`` ends in 200 (redirects followed)."""
    try:
        with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT_S) as resp:  # noqa: S310 -- http only
            return bool(resp.status == 200)
    except (OSError, ValueError):
        return False


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=1.0) as resp:  # noqa: S310
            return bool(resp.status == 200)
    except (OSError, ValueError):
        return False


class _Server:
    """One binary on a free loopback port in ``workdir``, probed until ``/-/ready``."""

    def __init__(self, name: str, binary: Path, workdir: Path, host: str) -> None:
        self.name = name
        self.binary = binary
        self.workdir = workdir
        self.host = host
        self.port: int | None = None
        self.log_path = workdir / f"{name}.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        if self.port is None:
            raise PrometheusStackError(f"{self.name} is not started")
        return f"http://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self, args_for_port: Callable[[str], list[str]], timeout_s: float) -> None:
        for attempt in range(_PORT_ATTEMPTS):
            port = _free_port(self.host)
            argv = [str(self.binary), *args_for_port(f"{self.host}:{port}")]
            self._log = self.log_path.open("ab")
            try:
                self._proc = spawn_logged(argv, self._log, cwd=self.workdir)
            except BaseException:
                self.stop()  # closes the log file: no caller's stop() follows a failed start
                raise
            self.port = port
            url = self.url
            if wait_ready(self._proc, functools.partial(_ready, url), timeout_s):
                log.info(f"{self.name} started", url=url, log=str(self.log_path))
                return
            exited = not self.running
            self.stop()
            if not exited:  # alive but never ready: another port will not help
                break
            log.warning(f"{self.name} exited at start; retrying", port=port, attempt=attempt + 1)
        raise PrometheusStackError(
            f"{self.name} did not become ready (see {self.log_path}):\n{self.log_tail()}"
        )

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            stop_process(proc, STOP_TIMEOUT_S)
        if self._log is not None:
            self._log.close()
            self._log = None
        self.port = None

    def kill(self) -> None:
        """SIGKILL without waiting (safe in a signal handler); see ``PrometheusStack.kill``."""
        proc = self._proc
        if proc is not None:
            with contextlib.suppress(OSError):
                proc.kill()

    def log_tail(self, lines: int = 20) -> str:
        with contextlib.suppress(OSError):
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
            return "\n".join(text.splitlines()[-lines:])
        return ""


@dataclass(frozen=True)
class Sample:
    """One element of an instant vector (a scalar result has no labels)."""

    labels: dict[str, str]
    value: float


@dataclass(frozen=True)
class Alert:
    """An alert as Prometheus (``/api/v1/alerts``) or Alertmanager (``/api/v2/alerts``) has it.
    ``state``: Prometheus' ``pending`` or ``firing``; Alertmanager's ``active``,
    ``suppressed`` or ``unprocessed``."""

    name: str
    state: str
    labels: dict[str, str]
    annotations: dict[str, str]


@dataclass(frozen=True)
class RuleStatus:
    """One loaded rule (``/api/v1/rules``): ``health`` is ok, err or unknown (not evaluated)."""

    group: str
    name: str
    kind: str  # "recording" | "alerting"
    health: str
    last_error: str


class PrometheusStack:
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
        self._prometheus: _Server | None = None
        self._alertmanager: _Server | None = None
        self._ui_prefix: str | None = None

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

    def ui_url(self, page: str) -> str:
        """The address of a page of Prometheus' web UI (``alerts``, ``graph``) as this build
        serves it: probed once (the React UI's ``/alerts``, else the classic ``/classic/alerts``),
        so a printed link opens the page instead of a 404."""
        base = self.prometheus_url
        if self._ui_prefix is None:
            found = next((p for p in UI_PREFIXES if _answers(f"{base}{p}/alerts")), None)
            if found is None:
                log.warning("no Prometheus UI page answered", tried=UI_PREFIXES, url=base)
            self._ui_prefix = found or ""
        return f"{base}{self._ui_prefix}/{page}"

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
        self._alertmanager = _Server("alertmanager", binary, d, self._host)
        self._alertmanager.start(
            lambda listen: [
                f"--config.file={config}",
                f"--storage.path={d / 'data'}",
                f"--web.listen-address={listen}",
                "--cluster.listen-address=",
            ],
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
        self._prometheus = _Server("prometheus", binary, d, self._host)
        self._prometheus.start(
            lambda listen: [
                f"--config.file={config}",
                f"--storage.tsdb.path={d / 'data'}",
                f"--web.listen-address={listen}",
                "--web.enable-lifecycle",
            ],
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

    # ------------------------------------------------------------ queries

    def _api(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        body = _get_json(f"{self.prometheus_url}{path}{query}")
        if not isinstance(body, dict) or body.get("status") != "success":
            error = body.get("error") if isinstance(body, dict) else body
            raise PrometheusStackError(f"{path}: {error}")
        return body["data"]

    def query(self, expr: str, at: float | None = None) -> list[Sample]:
        """An instant query; an invalid expression raises ``PrometheusStackError``."""
        params = {"query": expr} | ({"time": f"{at:.3f}"} if at is not None else {})
        data = self._api("/api/v1/query", **params)
        kind, result = data["resultType"], data["result"]
        if kind == "vector":
            return [Sample(dict(r["metric"]), float(r["value"][1])) for r in result]
        if kind == "scalar":
            return [Sample({}, float(result[1]))]
        raise PrometheusStackError(f"query {expr!r} returned a {kind}, not an instant vector")

    def query_range(
        self, expr: str, start: float, end: float, step_s: float
    ) -> list[tuple[dict[str, str], list[tuple[float, float]]]]:
        """A range query: (labels, [(unix time, value), ...]) per series."""
        data = self._api(
            "/api/v1/query_range",
            query=expr,
            start=f"{start:.3f}",
            end=f"{end:.3f}",
            step=f"{step_s:g}",
        )
        return [
            (dict(r["metric"]), [(float(t), float(v)) for t, v in r["values"]])
            for r in data["result"]
        ]

    def alerts(self) -> list[Alert]:
        """Prometheus' active alerts (pending and firing)."""
        return [
            Alert(a["labels"].get("alertname", ""), a["state"], a["labels"], a["annotations"])
            for a in self._api("/api/v1/alerts")["alerts"]
        ]

    def alertmanager_alerts(self) -> list[Alert]:
        """The alerts Alertmanager has received (and not yet seen resolved)."""
        body = _get_json(f"{self.alertmanager_url}/api/v2/alerts")
        return [
            Alert(
                a["labels"].get("alertname", ""),
                a["status"]["state"],
                a["labels"],
                a.get("annotations", {}),
            )
            for a in body
        ]

    def rules(self) -> list[RuleStatus]:
        """Every loaded rule with its evaluation health."""
        return [
            RuleStatus(
                g["name"],
                r["name"],
                "alerting" if r["type"] == "alerting" else "recording",
                r.get("health", "unknown"),
                r.get("lastError", ""),
            )
            for g in self._api("/api/v1/rules")["groups"]
            for r in g["rules"]
        ]

    def targets_up(self) -> bool:
        """Whether every scrape target has been scraped successfully (health ``up``)."""
        active = self._api("/api/v1/targets")["activeTargets"]
        return bool(active) and all(t["health"] == "up" for t in active)
