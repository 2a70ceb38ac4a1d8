"""Configuration files for a local Prometheus and Alertmanager, and test/demo copies of rules/.

Pure functions (no I/O): ``prometheus_config`` and ``alertmanager_config`` build the documents
``monitor.demo.prometheus_stack`` writes before starting the binaries; ``tune_rules`` rewrites
a loaded rules document for a short-lived Prometheus (a test or the demo), which cannot wait the
production ``for:`` durations (minutes to hours) nor the objective's volume guards.

Durations use Prometheus' own syntax (``1h30m``, ``5m``, ``500ms``); ``parse_duration`` and
``format_duration`` convert to and from seconds.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

_UNITS: dict[str, float] = {
    "ms": 0.001,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
    "w": 604800.0,
    "y": 31536000.0,
}
_DURATION = re.compile(r"^(?:\d+(?:ms|s|m|h|d|w|y))+$")
_PART = re.compile(r"(\d+)(ms|s|m|h|d|w|y)")

# The recording rule holding the severe-share objective (rules/casewatch.rules.yml).
OBJECTIVE_RECORD = "casewatch:severe_share:objective"


def parse_duration(text: str) -> float:
    """Seconds in a Prometheus duration (``"1h30m"`` -> 5400.0); ValueError when malformed."""
    if not _DURATION.match(text):
        raise ValueError(f"not a Prometheus duration: {text!r} (e.g. 30s, 5m, 1h30m)")
    return sum(int(n) * _UNITS[unit] for n, unit in _PART.findall(text))


def format_duration(seconds: float) -> str:
    """A Prometheus duration for ``seconds`` (whole milliseconds): 90 -> ``"1m30s"``."""
    if seconds < 0:
        raise ValueError(f"a duration cannot be negative, got {seconds}")
    ms = round(seconds * 1000)
    if ms == 0:
        return "0s"
    out = []
    for unit in ("d", "h", "m", "s", "ms"):
        size = round(_UNITS[unit] * 1000)
        if ms >= size:
            out.append(f"{ms // size}{unit}")
            ms %= size
    return "".join(out)


@dataclass(frozen=True)
class ScrapeTarget:
    """``host:port`` and the path its metrics are served on."""

    address: str
    metrics_path: str = "/metrics"

    @classmethod
    def of(cls, target: str) -> ScrapeTarget:
        """From ``host:port`` or a URL (``http://host:port`` or ``http://host:port/metrics``)."""
        if "://" not in target:
            if ":" not in target:
                raise ValueError(f"scrape target {target!r} is not host:port or a URL")
            return cls(target)
        parts = urlsplit(target)
        if parts.scheme != "http" or not parts.hostname or parts.port is None:
            raise ValueError(f"scrape target {target!r} must be http://host:port[/path]")
        path = parts.path if parts.path not in ("", "/") else "/metrics"
        return cls(f"{parts.hostname}:{parts.port}", path)


def prometheus_config(
    targets: Sequence[ScrapeTarget],
    *,
    rule_files: Sequence[str] = (),
    alertmanager: str | None = None,
    scrape_interval_s: float = 1.0,
    evaluation_interval_s: float = 1.0,
    job: str = "casewatch",
) -> dict[str, Any]:
    """prometheus.yml: one scrape job over ``targets`` (grouped by metrics path), the rule
    files, and the Alertmanager at ``alertmanager`` (``host:port``) when given."""
    if scrape_interval_s <= 0 or evaluation_interval_s <= 0:
        raise ValueError("scrape and evaluation intervals must be > 0")
    by_path: dict[str, list[str]] = {}
    for target in targets:
        by_path.setdefault(target.metrics_path, []).append(target.address)
    scrape = format_duration(scrape_interval_s)
    doc: dict[str, Any] = {
        "global": {
            "scrape_interval": scrape,
            "scrape_timeout": scrape,
            "evaluation_interval": format_duration(evaluation_interval_s),
        },
        "rule_files": list(rule_files),
        "scrape_configs": [
            {
                "job_name": job if len(by_path) == 1 else f"{job}{i}",
                "metrics_path": path,
                "static_configs": [{"targets": addresses}],
            }
            for i, (path, addresses) in enumerate(sorted(by_path.items()))
        ],
    }
    if alertmanager is not None:
        doc["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]}
    return doc


def alertmanager_config(
    webhook_url: str | None,
    *,
    group_by: Sequence[str] = ("alertname", "assistant"),
    group_wait_s: float = 1.0,
    group_interval_s: float = 1.0,
    repeat_interval_s: float = 3600.0,
) -> dict[str, Any]:
    """alertmanager.yml: every alert to one receiver, a webhook when ``webhook_url`` is given
    (resolved notifications included), otherwise a receiver that drops them."""
    receiver: dict[str, Any] = {"name": "casewatch"}
    if webhook_url is not None:
        if not webhook_url.startswith(("http://", "https://")):
            raise ValueError(f"webhook URL {webhook_url!r} must be http(s)://...")
        receiver["webhook_configs"] = [{"url": webhook_url, "send_resolved": True}]
    return {
        "route": {
            "receiver": "casewatch",
            "group_by": list(group_by),
            "group_wait": format_duration(group_wait_s),
            "group_interval": format_duration(group_interval_s),
            "repeat_interval": format_duration(repeat_interval_s),
        },
        "receivers": [receiver],
    }


def tune_rules(
    doc: dict[str, Any],
    *,
    max_for_s: float | None = None,
    objective: float | None = None,
) -> dict[str, Any]:
    """A copy of a rules document (``{"groups": [...]}``) for a short-lived Prometheus.

    ``max_for_s`` caps every alert's ``for:`` (windows and thresholds are unchanged: a test
    copy fires on the same expressions as production, only sooner). ``objective`` replaces the
    severe-share objective (the ``casewatch:severe_share:objective`` recording rule).
    """
    if max_for_s is not None and max_for_s < 0:
        raise ValueError(f"max_for_s must be >= 0, got {max_for_s}")
    if objective is not None and not 0 < objective < 1:
        raise ValueError(f"the objective is a share in (0, 1), got {objective}")
    out = copy.deepcopy(doc)
    groups = out.get("groups")
    if not isinstance(groups, list):
        raise ValueError("a rules document has a 'groups' list")
    found_objective = False
    for group in groups:
        for rule in group.get("rules", []):
            has_for = "alert" in rule and "for" in rule
            if max_for_s is not None and has_for and parse_duration(str(rule["for"])) > max_for_s:
                rule["for"] = format_duration(max_for_s)
            if objective is not None and rule.get("record") == OBJECTIVE_RECORD:
                rule["expr"] = f"vector({objective:g})"
                found_objective = True
    if objective is not None and not found_objective:
        raise ValueError(f"no {OBJECTIVE_RECORD} recording rule to set the objective on")
    return out
