"""Series names and label matchers in PromQL expressions (enough of PromQL for rules/ and
dashboards/ to be checked against the exporter; not a parser).

String literals are blanked first, so a label value or a regex never reads as a name.
"""

from __future__ import annotations

import re

from prometheus_client import CollectorRegistry

from monitor.metrics.exporter import HISTOGRAMS, Metrics

_STRING = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`')
_NAME = re.compile(r"(?<![\w:.])([a-zA-Z_:][a-zA-Z0-9_:]*)")
_SELECTOR = re.compile(r"(?<![\w:.])([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}")
_MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")

# Labels Prometheus adds to every scraped series (`job` from the exporter arrives as
# `exported_job`), and the bucket bound of histogram series.
TARGET_LABELS = frozenset({"instance", "job", "exported_job"})


def blank_strings(expr: str) -> str:
    return _STRING.sub('""', expr)


def names(expr: str) -> set[str]:
    """Every identifier of ``expr`` that could be a metric or recording-rule name."""
    return {m.group(1) for m in _NAME.finditer(blank_strings(expr))}


def casewatch_series(expr: str) -> set[str]:
    """Raw casewatch series (``casewatch_*`` without a colon) that ``expr`` reads."""
    return {n for n in names(expr) if n.startswith("casewatch_") and ":" not in n}


def recorded_series(expr: str) -> set[str]:
    """Recording-rule names (``level:metric:operations``) that ``expr`` reads."""
    return {n for n in names(expr) if ":" in n and "casewatch" in n}


def selector_labels(expr: str) -> list[tuple[str, set[str]]]:
    """(series name, label names matched on it) for every ``name{...}`` selector."""
    out = []
    for m in _SELECTOR.finditer(blank_strings(expr)):
        out.append((m.group(1), {lm.group(1) for lm in _MATCHER.finditer(m.group(2))}))
    return out


def exported_labels() -> dict[str, frozenset[str]]:
    """Label names of every exported series name (counters with _total, histogram parts)."""
    metrics = Metrics(CollectorRegistry())
    out: dict[str, frozenset[str]] = {}
    for value in vars(metrics).values():
        # prometheus_client keeps these private; stable since 0.x and only read by tests.
        name, kind, labels = (getattr(value, a, None) for a in ("_name", "_type", "_labelnames"))
        if not isinstance(name, str) or labels is None:
            continue
        base = frozenset(labels)
        if kind == "counter":
            out[f"{name}_total"] = base
        elif name in HISTOGRAMS:
            out[f"{name}_bucket"] = base | {"le"}
            out[f"{name}_sum"] = out[f"{name}_count"] = base
        else:
            out[name] = base
    return out
