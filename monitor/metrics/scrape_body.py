"""The ``/metrics`` body: prometheus_client's exposition, byte for byte, at a fraction of the cost.

At the full label set (``bench/scrape.py``: ~17k series, ~31k samples) prometheus_client spends
over half a second per scrape building a ``Sample`` namedtuple and a labels dict for every
sample, then validating, escaping and formatting each one again (``collect()`` and the text
formatting are about half each). The text of a sample is ``name{labels} value`` and only the
value ever changes, so ``Exposition`` keeps, per family, each series' lines as a %-template
(labels escaped and sorted once), the MutexValues holding its floats, and the value objects
its cached chunk was rendered from:

- a family whose value objects are all still the ones it was rendered from (``is``:
  prometheus_client stores a new float on every ``inc``/``set``/``observe``) reuses its chunk;
- any other family is rendered again with one ``%`` over all its values (a single C call).

Every render reads every current value: a scrape never sees an older value than
prometheus_client's own render would, and no update path needs to flag anything.

The fast path covers plain ``Counter``, ``Gauge`` and ``Histogram`` wrappers (every metric of
``monitor.metrics.exporter``) in the single-process value mode, without exemplars, in the text
format
(0.0.4 and 1.0.0) and OpenMetrics 1.0.0, with names that no escaping scheme rewrites. Anything
else (process/platform collectors of the default registry, custom collectors, target_info, the
``dots`` escaping, ...) is collected and formatted by prometheus_client itself, in registry
order, so the body stays exactly what ``make_wsgi_app`` would serve (tests compare the bytes).

The fast path reads private attributes of prometheus_client (``PRIVATE_ATTRIBUTES``). A release
that renames one must cost speed, never the scrape: an ``Exposition`` resolves every name on
real objects when it is built, and on a name missing there, or an ``AttributeError`` or
``TypeError`` while the fast path renders, it serves prometheus_client's own encoder for the
negotiated format from then on (the library's bytes, OpenMetrics included), logs one warning and
reports the reason once (``casewatch_exposition_fallback_total``). Errors raised by a collector
that prometheus_client renders anyway are not the fast path's: they propagate, as they would
from the library's own app.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from itertools import accumulate, chain, compress, repeat
from operator import attrgetter, contains, is_not, not_
from typing import Any

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client import metrics as client_metrics
from prometheus_client import values as client_values
from prometheus_client.exposition import choose_encoder, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics import exposition as openmetrics
from prometheus_client.utils import floatToGoString

from monitor.errors import NotRenderableFast

log = structlog.get_logger(__name__)

# The private prometheus_client attributes read below, in one place: pyproject pins
# prometheus-client to the minor version they were written against, the byte-for-byte tests
# (tests/monitor/metrics/test_scrape_body.py) catch a change of meaning, and a test resolves each
# one on
# real objects, so an upgrade that renames one fails there first. An entry starts with a module
# or the kind of object it is read from (``.child``: a labelled series, ``.function``: a gauge
# after ``set_function``).
PRIVATE_ATTRIBUTES: tuple[str, ...] = (
    "prometheus_client.metrics._use_created",
    "prometheus_client.values.ValueClass",
    "prometheus_client.values.MutexValue",
    "CollectorRegistry._lock",
    "CollectorRegistry._collector_to_names",
    "CollectorRegistry._target_info",
    "CollectorRegistry._target_info_metric",
    "Counter._name",
    "Counter._labelnames",
    "Counter._get_metric",
    "Counter._is_parent",
    "Counter._lock",
    "Counter._metrics",
    "Counter.child._labelvalues",
    "Counter.child._value",
    "Gauge.child._value",
    "Gauge.function._child_samples",
    "Histogram._upper_bounds",
    "Histogram.child._buckets",
    "Histogram.child._sum",
    "MutexValue._value",
    "MutexValue._exemplar",
)


def missing_private_attributes() -> list[str]:
    """The entries of ``PRIVATE_ATTRIBUTES`` this prometheus_client lacks, each resolved on a
    module or on a real object of its kind (built in a throwaway registry); a kind that cannot
    even be built counts its entries as missing."""
    missing = []
    owners: dict[str, object] = {}
    try:
        registry = CollectorRegistry()
        # A series without labels is its own child: it holds what a labelled child holds.
        series = Counter("s", "s", registry=registry)
        function = Gauge("f", "f", registry=registry)
        function.set_function(lambda: 1.0)
        owners = {
            "CollectorRegistry": registry,
            "Counter": Counter("c", "c", ["l"], registry=registry),
            "Counter.child": series,
            "Gauge.child": Gauge("g", "g", registry=registry),
            "Gauge.function": function,
            "Histogram": Histogram("h", "h", ["l"], registry=registry),
            "Histogram.child": Histogram("hs", "hs", registry=registry),
            "MutexValue": getattr(series, "_value", None),
        }
    except Exception:  # a library that cannot build them: every object-owned name is unknown
        log.debug("prometheus_client objects could not be built to resolve names", exc_info=True)
    for dotted in PRIVATE_ATTRIBUTES:
        owner, attribute = dotted.rsplit(".", 1)
        if owner.startswith("prometheus_client."):
            obj: object = importlib.import_module(owner)
        else:
            obj = owners.get(owner)
        if obj is None or not hasattr(obj, attribute):
            missing.append(dotted)
    return missing


# Why an ``Exposition`` left the fast path (the reason label of the fallback counter): a private
# name missing when it was built, or an AttributeError/TypeError while rendering.
MISSING_ATTRIBUTE = "missing_attribute"
RENDER_ERROR = "render_error"
FALLBACK_REASONS: tuple[str, ...] = (MISSING_ATTRIBUTE, RENDER_ERROR)
# What a renamed or retyped private attribute raises inside the fast path.
_LIBRARY_CHANGED = (AttributeError, TypeError)

Encoder = Callable[[Any], bytes]
_go_float: Callable[[float], str] = floatToGoString  # how prometheus_client writes a value

# Legacy names (no colon: OpenMetrics' underscore escaping rewrites ':' in sample names) render
# identically under every escaping scheme except ``dots``.
_PLAIN_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_SAME_LINES_ESCAPINGS = frozenset(
    {openmetrics.UNDERSCORES, openmetrics.ALLOWUTF8, openmetrics.VALUES}
)
_EOF = b"# EOF\n"
_VALUE = attrgetter("_value")  # a MutexValue's float, read as its get() would (sans lock)
_HOLDER = attrgetter("_value")  # a Counter's or Gauge's MutexValue
_SUM = attrgetter("_sum")
_DICT = attrgetter("__dict__")
_EXEMPLAR = attrgetter("_exemplar")
_BUCKETS = attrgetter("_buckets")
_FLOAT = frozenset({float})
_BELOW_1E6 = (1e6).__gt__  # False for NaN and +Inf too; applied to abs() for -Inf


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


def _value_text(v: float) -> str:
    # floatToGoString's result, without its float() call and three comparisons for the usual
    # finite float below 1e6 (from 1e6 on, Go writes an exponent where Python does not).
    if type(v) is float and v - v == 0.0 and v < 1e6:
        return repr(v)
    return _go_float(v)


def _formattable(values: list[Any]) -> list[Any]:
    """``values`` ready for a ``%s`` template: a finite float below 1e6 as itself (its ``%s`` is
    its repr, floatToGoString's text), anything else (NaN, infinities, 1e6 and above, which Go
    writes with an exponent) as floatToGoString's text. Without a Python-level loop over the
    values, unless they are not all floats."""
    if not set(map(type, values)) <= _FLOAT:
        return list(map(_value_text, values))
    total = sum(values)  # finite: no NaN, no infinity (an overflow only takes the long way)
    if total - total == 0.0 and (not values or max(values) < 1e6):
        return values
    odd = list(compress(range(len(values)), map(not_, map(_BELOW_1E6, map(abs, values)))))
    if not odd:
        return values
    values = list(values)
    for i in odd:
        values[i] = _go_float(values[i])
    return values


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
        text_name = metric.name + "_total" if metric.type == "counter" else metric.name
        text_doc = metric.documentation.replace("\\", r"\\").replace("\n", r"\n")
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
            self.bounds_text = [_go_float(b) for b in wrapper._upper_bounds]
            self.with_sum = wrapper._upper_bounds[0] >= 0
        # In the wrapper's series order: the children, the value objects the chunk was rendered
        # from (see render) and each series' lines as a %-template (``name{labels} %s\n``; a
        # histogram's buckets, _count and _sum).
        self.children: list[Any] = []
        self.holders: list[Any] = []  # a series' MutexValue (histograms: buckets, then sums)
        self.values: list[Any] = []
        self.templates: list[str] = []
        self.template = ""  # all of them joined: one % renders the family
        self.chunk = b""

    def render(self) -> bytes:
        """The family's sample lines: the cached ones unless a value changed, else all of
        them again with a single % (one C call for thousands of values: formatting only the
        changed series, one Python-level step each, costs more once a few hundred changed)."""
        wrapper = self.wrapper
        if wrapper._is_parent():
            with wrapper._lock:
                children = list(wrapper._metrics.values())
        else:
            children = [wrapper]
        if self.gauge and any(map(contains, map(_DICT, children), repeat("_child_samples"))):
            raise NotRenderableFast(self.name)  # set_function(): the value is computed on collect
        realigned = children != self.children  # identity per element: added or removed
        if realigned:
            self._realign(children)
        values = list(map(_VALUE, self.holders))
        # By identity: every inc/set/observe stores a new float, and equal values may still
        # render differently (0.0 and -0.0).
        if not realigned and not any(map(is_not, values, self.values)):
            return self.chunk
        # Exemplars (Counter.inc / Histogram.observe only) are written in OpenMetrics.
        if not self.gauge and any(map(_EXEMPLAR, self.holders)):
            raise NotRenderableFast(self.name)
        if self.histogram:
            width = len(self.bounds_text)
            counts = width * len(children)
            flat: list[Any] = []
            for start, total in zip(range(0, counts, width), values[counts:], strict=True):
                # Cumulative counts summed in prometheus_client's order (0.0 + b0 + b1 ...),
                # so the floats, hence their text, are identical. The leading 0.0 goes to the
                # template's "%.0s"; then the buckets, _count (the last bucket) and _sum.
                flat += accumulate(values[start : start + width], initial=0.0)
                flat.append(flat[-1])
                flat.append(total)
        else:
            flat = values
        self.chunk = (self.template % tuple(_formattable(flat))).encode()
        self.values = values
        return self.chunk

    def _realign(self, children: list[Any]) -> None:
        """Series were added or removed: carry the known ones over, template the new ones."""
        known = dict(zip(self.children, self.templates, strict=True))
        templates = [known.get(c) or self._template(c._labelvalues) for c in children]
        self.children, self.templates, self.template = children, templates, "".join(templates)
        # The MutexValues holding the floats (never replaced for the life of a child).
        if self.histogram:
            buckets = chain.from_iterable(map(_BUCKETS, children))
            self.holders = [*buckets, *map(_SUM, children)]
        else:
            self.holders = list(map(_HOLDER, children))

    def _template(self, key: tuple[str, ...]) -> str:
        labels = dict(zip(self.labelnames, key, strict=True))
        if not self.histogram:
            prefixes = [_prefix(self.sample_name, labels)]
        else:
            prefixes = [
                _prefix(self.name + "_bucket", {**labels, "le": le}) for le in self.bounds_text
            ]
            prefixes.append(_prefix(self.name + "_count", labels))
            if self.with_sum:
                prefixes.append(_prefix(self.name + "_sum", labels))
        lines = "".join(p.replace("%", "%%") + "%s\n" for p in prefixes)
        if not self.histogram:
            return lines
        if not self.with_sum:  # a histogram with negative buckets has no _sum line
            lines += "%.0s"
        return "%.0s" + lines


class _Families:
    """Already collected families, in the shape prometheus_client's encoders read."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return self._families


def _client_version() -> str:
    try:
        return importlib.metadata.version("prometheus-client")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _fast_path_for(collector: object) -> bool:
    if type(collector) not in (Counter, Gauge, Histogram):
        return False
    wrapper: Any = collector
    return all(_PLAIN_NAME.match(n) for n in (wrapper._name, *wrapper._labelnames))


class Exposition:
    """Renders a registry for ``/metrics``; one instance per registry, shared by all scrapes.

    ``on_fallback`` is told, once, why this instance left the fast path for prometheus_client's
    own encoder (one of ``FALLBACK_REASONS``); it is not called under any lock of this class.
    """

    def __init__(
        self,
        registry: CollectorRegistry,
        on_fallback: Callable[[str], None] | None = None,
    ) -> None:
        self._registry = registry
        self._on_fallback = on_fallback
        # collector -> its cached rendering, or None: rendered by prometheus_client.
        self._families: dict[object, _Family | None] = {}
        self._lock = threading.Lock()  # renders mutate the caches: one at a time
        self._fallback: str | None = None  # set once, never cleared: the reason
        self._fallback_lock = threading.Lock()
        missing = missing_private_attributes()
        if missing:
            self._fall_back(MISSING_ATTRIBUTE, missing=missing)

    @property
    def fallback(self) -> str | None:
        """Why every render is prometheus_client's own (None: the fast path is in use)."""
        return self._fallback

    def render(self, fmt: Format = TEXT) -> bytes:
        if self._fallback is None and fmt.fast:
            body = self._render_fast(fmt)
            if body is not None:
                return body
        return fmt.encoder(self._registry)

    def _render_fast(self, fmt: Format) -> bytes | None:
        """The body, or None: prometheus_client renders this one (a rare setup, or the fast
        path just failed and was left for good)."""
        try:
            # Created samples and multi-process values are rare setups: leave them to the client.
            if (
                client_metrics._use_created
                or client_values.ValueClass is not client_values.MutexValue
            ):
                return None
            registry: Any = self._registry
            with registry._lock:
                collectors = list(registry._collector_to_names)
                target_info = registry._target_info_metric() if registry._target_info else None
        except _LIBRARY_CHANGED as exc:
            self._fall_back(RENDER_ERROR, error=exc)
            return None
        chunks: list[bytes] = []
        if target_info is not None:
            chunks.append(self._client_render(fmt, [target_info]))
        broken: BaseException | None = None
        with self._lock:
            families: dict[object, _Family | None] = {}
            for collector in collectors:
                try:
                    family = self._family(collector)
                    body = None if family is None else family.render()
                except NotRenderableFast:
                    family, body = None, None
                except _LIBRARY_CHANGED as exc:
                    broken = exc
                    break
                if family is not None and body is not None:
                    chunks.append(family.om_header if fmt.openmetrics else family.text_header)
                    chunks.append(body)
                else:  # outside the try: a collector's own error is not the fast path's
                    chunks.append(self._client_render(fmt, collector.collect()))
                families[collector] = family
            else:
                self._families = families  # unregistered collectors dropped
        if broken is not None:
            self._fall_back(RENDER_ERROR, error=broken)
            return None
        if fmt.openmetrics:
            chunks.append(_EOF)
        return b"".join(chunks)

    def _family(self, collector: object) -> _Family | None:
        if collector in self._families:
            return self._families[collector]
        return _Family(collector) if _fast_path_for(collector) else None

    def _fall_back(
        self, reason: str, *, missing: list[str] | None = None, error: BaseException | None = None
    ) -> None:
        with self._fallback_lock:
            if self._fallback is not None:
                return  # another scrape got there first: said once
            self._fallback = reason
        log.warning(
            "metrics exposition: prometheus_client's private attributes are not the ones "
            "monitor/metrics/scrape_body.py was written for; every scrape is now rendered by "
            "prometheus_client's own encoder (same text, slower at many series): install the "
            "prometheus-client version pyproject.toml pins",
            reason=reason,
            missing=missing,
            error=None if error is None else repr(error),
            prometheus_client=_client_version(),
        )
        if self._on_fallback is not None:
            self._on_fallback(reason)

    @staticmethod
    def _client_render(fmt: Format, families: Iterable[Metric]) -> bytes:
        body = fmt.encoder(_Families(families))
        if fmt.openmetrics and body.endswith(_EOF):
            body = body[: -len(_EOF)]
        return body
