"""The ``/metrics`` body: prometheus_client's exposition, byte for byte, at a fraction of the cost.

At the full label set (``bench/scrape.py``: ~17k series, ~31k samples) prometheus_client spends
over half a second per scrape building a ``Sample`` namedtuple and a labels dict for every
sample, then formatting each one again (its ``collect()`` and ``generate_latest`` are about half
each). The text of one sample is ``name{labels} value``, and only the value ever changes, so
``Exposition`` keeps, per series, its rendered line(s) next to the value object they were
rendered from:

- a series whose value object is still the one it was rendered from (``is``: prometheus_client
  replaces the float on every ``inc``/``set``/``observe``) reuses its line; a changed one
  re-renders only its value (the ``name{labels} `` prefix is built once per series);
- a family none of whose series changed reuses its whole encoded chunk.

Nothing is cached across a value change, so every render reads every current value: a scrape
never sees an older value than prometheus_client's own render would.

The fast path covers plain ``Counter``, ``Gauge`` and ``Histogram`` wrappers (every metric of
``monitor.exporter``) in the single-process value mode, without exemplars, in the text format
(0.0.4 and 1.0.0) and OpenMetrics 1.0.0, with names that no escaping scheme rewrites. Anything
else (process/platform collectors of the default registry, custom collectors, target_info, the
``dots`` escaping, ...) is collected and formatted by prometheus_client itself, in registry
order, so the body stays exactly what ``make_wsgi_app`` would serve (tests compare the bytes).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from itertools import accumulate
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client import metrics as client_metrics
from prometheus_client import values as client_values
from prometheus_client.exposition import choose_encoder, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics import exposition as openmetrics
from prometheus_client.utils import floatToGoString

Encoder = Callable[[Any], bytes]

# Legacy names (no colon: OpenMetrics' underscore escaping rewrites ':' in sample names) render
# identically under every escaping scheme except ``dots``.
_PLAIN_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_SAME_LINES_ESCAPINGS = frozenset(
    {openmetrics.UNDERSCORES, openmetrics.ALLOWUTF8, openmetrics.VALUES}
)
_EOF = b"# EOF\n"


@dataclass(frozen=True)
class Format:
    """One negotiated exposition format (what prometheus_client's ``choose_encoder`` picks)."""

    content_type: str
    encoder: Encoder  # prometheus_client's own, for everything the fast path does not cover
    openmetrics: bool
    fast: bool  # whether this module's sample lines are exactly the encoder's


def negotiate(accept: str | None) -> Format:
    """The format prometheus_client would answer an ``Accept`` header with."""
    encoder, content_type = choose_encoder(accept or "")
    func: Any = encoder.func if isinstance(encoder, partial) else encoder
    keywords: dict[str, Any] = encoder.keywords if isinstance(encoder, partial) else {}
    escaping = keywords.get("escaping", openmetrics.UNDERSCORES)
    is_openmetrics = func is openmetrics.generate_latest
    fast = (
        (func is generate_latest or is_openmetrics)
        and escaping in _SAME_LINES_ESCAPINGS
        and keywords.get("version", "1.0.0") == "1.0.0"
    )
    return Format(content_type, encoder, is_openmetrics, fast)


TEXT = negotiate("")  # text format 0.0.4, what a client without an Accept header gets


class _Unsupported(Exception):
    """A family the fast path cannot render exactly (an exemplar, a ``set_function`` gauge)."""


def _value_text(v: float) -> str:
    # floatToGoString's result, without its float() call and three comparisons for the usual
    # finite float below 1e6 (from 1e6 on, Go writes an exponent where Python does not).
    if type(v) is float and v - v == 0.0 and v < 1e6:
        return repr(v)
    return floatToGoString(v)


def _label_value(v: str) -> str:
    return v.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _prefix(name: str, labels: dict[str, str]) -> str:
    """``name{k="v",...} `` with labels sorted by name, as prometheus_client writes them."""
    if not labels:
        return name + " "
    inner = ",".join(f'{k}="{_label_value(v)}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}} "


class _Family:
    """The cached rendering of one Counter, Gauge or Histogram wrapper."""

    def __init__(self, wrapper: Any) -> None:
        metric: Metric = wrapper._get_metric()
        self.wrapper = wrapper
        self.name: str = wrapper._name
        self.labelnames: tuple[str, ...] = tuple(wrapper._labelnames)
        self.histogram = metric.type == "histogram"
        self.gauge = metric.type == "gauge"
        doc = metric.documentation
        text_name = metric.name + "_total" if metric.type == "counter" else metric.name
        text_doc = doc.replace("\\", r"\\").replace("\n", r"\n")
        self.text_header = (
            f"# HELP {text_name} {text_doc}\n# TYPE {text_name} {metric.type}\n".encode()
        )
        om_doc = text_doc.replace('"', r"\"")
        om_header = f"# HELP {metric.name} {om_doc}\n# TYPE {metric.name} {metric.type}\n"
        if metric.unit:
            om_header += f"# UNIT {metric.name} {metric.unit}\n"
        self.om_header = om_header.encode()
        self.sample_name = self.name + "_total" if metric.type == "counter" else self.name
        if self.histogram:
            self.bounds_text = [floatToGoString(b) for b in wrapper._upper_bounds]
            self.with_sum = wrapper._upper_bounds[0] >= 0
        # labelvalues -> [child, value object(s) it was rendered from, rendered text]
        self.series: dict[tuple[str, ...], list[Any]] = {}
        self.chunk = b""

    def render(self) -> bytes:
        wrapper = self.wrapper
        if wrapper._is_parent():
            with wrapper._lock:
                items = list(wrapper._metrics.items())
        else:
            items = [((), wrapper)]
        series = self.series
        changed = len(series) != len(items)
        texts: list[str] = []
        append = texts.append
        if self.histogram:
            for key, child in items:
                entry = series.get(key)
                raw = [b._value for b in child._buckets]
                total = child._sum._value
                if entry is None or entry[0] is not child:
                    entry = series[key] = [child, None, None, "", self._histogram_template(key)]
                if entry[2] is not total or entry[1] != raw:
                    entry[3] = self._histogram_text(child, entry[4], raw, total)
                    entry[1], entry[2] = raw, total
                    changed = True
                append(entry[3])
        else:
            gauge = self.gauge
            for key, child in items:
                if gauge and "_child_samples" in child.__dict__:
                    raise _Unsupported(self.name)  # set_function(): the value is computed
                entry = series.get(key)
                value = child._value._value
                if entry is None or entry[0] is not child:
                    entry = series[key] = [child, None, "", self._prefix(key)]
                if entry[1] is not value:
                    if child._value._exemplar is not None:
                        raise _Unsupported(self.name)
                    # _value_text inlined: this line runs for every changed series.
                    if type(value) is float and value - value == 0.0 and value < 1e6:
                        entry[2] = entry[3] + repr(value) + "\n"
                    else:
                        entry[2] = entry[3] + floatToGoString(value) + "\n"
                    entry[1] = value
                    changed = True
                append(entry[2])
        if changed:
            if len(series) != len(items):  # series removed since the last render
                self.series = {key: series[key] for key, _ in items}
            self.chunk = "".join(texts).encode()
        return self.chunk

    def _prefix(self, key: tuple[str, ...]) -> str:
        return _prefix(self.sample_name, dict(zip(self.labelnames, key, strict=True)))

    def _histogram_template(self, key: tuple[str, ...]) -> str:
        """The series' lines with a ``{}`` per value: buckets, count, then sum (if any)."""
        labels = dict(zip(self.labelnames, key, strict=True))
        names = [_prefix(self.name + "_bucket", {**labels, "le": le}) for le in self.bounds_text]
        names.append(_prefix(self.name + "_count", labels))
        if self.with_sum:
            names.append(_prefix(self.name + "_sum", labels))
        return "".join(n.replace("{", "{{").replace("}", "}}") + "{}\n" for n in names)

    def _histogram_text(self, child: Any, template: str, raw: list[float], total: float) -> str:
        if any(b._exemplar is not None for b in child._buckets):
            raise _Unsupported(self.name)
        # Cumulative counts summed in prometheus_client's order (0.0 + b0 + b1 ...), so the
        # floats, hence their text, are identical.
        cumulative = list(accumulate(raw, initial=0.0))[1:]
        values = (
            [*cumulative, cumulative[-1], total] if self.with_sum else [*cumulative, cumulative[-1]]
        )
        return template.format(*map(_value_text, values))


class _Families:
    """Already collected families, in the shape prometheus_client's encoders read."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return self._families


def _fast_path_for(collector: object) -> bool:
    if type(collector) not in (Counter, Gauge, Histogram):
        return False
    wrapper: Any = collector
    return all(_PLAIN_NAME.match(n) for n in (wrapper._name, *wrapper._labelnames))


class Exposition:
    """Renders a registry for ``/metrics``; one instance per registry, shared by all scrapes."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry
        # collector -> its cached rendering, or None: rendered by prometheus_client.
        self._families: dict[object, _Family | None] = {}
        self._lock = threading.Lock()  # renders mutate the caches: one at a time

    def render(self, fmt: Format = TEXT) -> bytes:
        # Created samples and multi-process values are rare setups: leave them to the client.
        if (
            not fmt.fast
            or client_metrics._use_created
            or client_values.ValueClass is not client_values.MutexValue
        ):
            return fmt.encoder(self._registry)
        registry: Any = self._registry
        with registry._lock:
            collectors = list(registry._collector_to_names)
            target_info = registry._target_info_metric() if registry._target_info else None
        chunks: list[bytes] = []
        if target_info is not None:
            chunks.append(self._client_render(fmt, [target_info]))
        with self._lock:
            families: dict[object, _Family | None] = {}
            for collector in collectors:
                if collector in self._families:
                    family = self._families[collector]
                else:
                    family = _Family(collector) if _fast_path_for(collector) else None
                if family is not None:
                    try:
                        body = family.render()
                    except _Unsupported:
                        family = None
                    else:
                        chunks.append(family.om_header if fmt.openmetrics else family.text_header)
                        chunks.append(body)
                if family is None:
                    chunks.append(self._client_render(fmt, collector.collect()))
                families[collector] = family
            self._families = families  # unregistered collectors dropped
        if fmt.openmetrics:
            chunks.append(_EOF)
        return b"".join(chunks)

    @staticmethod
    def _client_render(fmt: Format, families: Iterable[Metric]) -> bytes:
        body = fmt.encoder(_Families(families))
        if fmt.openmetrics and body.endswith(_EOF):
            body = body[: -len(_EOF)]
        return body
