"""What a running Prometheus and its Alertmanager answer over their HTTP APIs (stdlib only):
instant and range queries, alerts, loaded rules, scrape targets, the readiness probe
(``/-/ready``) and where this build serves its web UI.

``PrometheusQueries`` is the query side of ``monitor.demo.prometheus_stack.PrometheusStack``;
a subclass says where the two servers are (``prometheus_url``, ``alertmanager_url``).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

import structlog

from monitor.errors import PrometheusStackError

log = structlog.get_logger(__name__)

HTTP_TIMEOUT_S = 10.0
# Where Prometheus' web UI pages live: the React UI at the root, else the classic UI under
# /classic. Debian's build (2.42, what `make services` installs) ships only the classic UI:
# its /alerts answers 404 and /graph redirects to /classic/graph.
UI_PREFIXES = ("", "/classic")


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


def is_ready(url: str) -> bool:
    """Whether the Prometheus or Alertmanager at ``url`` answers ``/-/ready`` with 200."""
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=1.0) as resp:  # noqa: S310
            return bool(resp.status == 200)
    except (OSError, ValueError):
        return False


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


class PrometheusQueries:
    """Queries of the Prometheus at ``prometheus_url`` and the Alertmanager at
    ``alertmanager_url`` (both given by the subclass)."""

    _ui_prefix: str | None = None  # probed once by ui_url; a subclass resets it on a restart

    @property
    def prometheus_url(self) -> str:
        raise NotImplementedError

    @property
    def alertmanager_url(self) -> str:
        raise NotImplementedError

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
