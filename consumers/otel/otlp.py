"""OTLP trace batches → spans: the bytes the Collector's Kafka exporter writes, decoded.

The exporter writes one ``ExportTraceServiceRequest`` per Kafka message, as binary protobuf
(``otlp_proto``, its default) or as OTLP/JSON (``otlp_json``). Both are decoded with the official
message classes of ``opentelemetry-proto``, never a hand-written parser. OTLP/JSON differs from
protobuf's own JSON mapping in one place that matters here: trace and span ids are hex strings,
not base64 (opentelemetry-proto, "JSON Protobuf Encoding"), so they are converted before
``json_format`` reads the message. Unknown fields are ignored, as the specification asks of
receivers.

A message that cannot be read is ``InvalidEvent`` with a bounded reason: it goes to the
dead-letter topic like any poison record. Details name what is wrong, never the content.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from monitor.errors import InvalidEvent, truncate

if TYPE_CHECKING:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

# protobuf and the OTLP message classes (~3 MB resident) are imported by the functions that
# read a record: every daemon imports this module for its names (the dead-letter reasons, the
# span type), and only one with an OTLP topic or file reads a span.

OtlpEncoding = Literal["otlp_proto", "otlp_json"]

# Every reason decode_spans can raise (bounded label values for casewatch_dead_letter_total).
OTLP_DLQ_REASONS: tuple[str, ...] = ("empty", "too_large", "otlp_unreadable", "otlp_bad_span")

MAX_DETAIL_CHARS = 300
# Nesting of array/kvlist attribute values kept; deeper values are cut (an attribute is data
# to read, and an unbounded recursion is a way to stop a consumer).
MAX_VALUE_DEPTH = 8

AttrValue = str | bool | int | float | bytes | list[Any] | dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class Span:
    """One ended span, with its resource's attributes (shared between the spans of a batch)."""

    trace_id: str  # 32 lowercase hex digits
    span_id: str  # 16 lowercase hex digits
    parent_span_id: str | None
    name: str
    start_ns: int
    end_ns: int
    attributes: Mapping[str, AttrValue]
    resource: Mapping[str, AttrValue]

    @property
    def is_root(self) -> bool:
        return self.parent_span_id is None


def decode_spans(value: bytes | None, encoding: OtlpEncoding, max_bytes: int) -> list[Span]:
    """Every span of one ``ExportTraceServiceRequest``; ``InvalidEvent`` if it is unreadable."""
    if not value:
        raise InvalidEvent("empty", "the record has no value")
    if len(value) > max_bytes:
        raise InvalidEvent("too_large", f"{len(value)} bytes > limit {max_bytes}")
    request = _parse_json(value) if encoding == "otlp_json" else _parse_proto(value)
    spans: list[Span] = []
    for resource_spans in request.resource_spans:
        resource = attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(_span(span, resource))
    return spans


def split_by_trace(value: bytes, encoding: OtlpEncoding) -> dict[str, bytes]:
    """One ``ExportTraceServiceRequest`` per trace of the batch (protobuf, whatever
    ``encoding``), keyed by the trace id as hex: the records ``assembly.repartition``
    re-publishes keyed by trace id. Each keeps its spans' resource and scope, so it decodes to
    the same spans. Call it on a value ``decode_spans`` read (unreadable: ``InvalidEvent``)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = _parse_json(value) if encoding == "otlp_json" else _parse_proto(value)
    parts: dict[str, ExportTraceServiceRequest] = {}
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            by_trace: dict[str, list[Any]] = {}
            for span in scope_spans.spans:
                by_trace.setdefault(binascii.hexlify(span.trace_id).decode("ascii"), []).append(
                    span
                )
            for trace_id, spans in by_trace.items():
                part = parts.setdefault(trace_id, ExportTraceServiceRequest())
                out_resource = part.resource_spans.add()
                out_resource.resource.CopyFrom(resource_spans.resource)
                out_resource.schema_url = resource_spans.schema_url
                out_scope = out_resource.scope_spans.add()
                out_scope.scope.CopyFrom(scope_spans.scope)
                out_scope.schema_url = scope_spans.schema_url
                out_scope.spans.extend(spans)
    return {trace_id: part.SerializeToString() for trace_id, part in parts.items()}


def _parse_proto(value: bytes) -> ExportTraceServiceRequest:
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(value)
    except DecodeError as exc:
        detail = f"not an OTLP ExportTraceServiceRequest (protobuf): {exc}"
        if value.lstrip()[:1] == b"{":  # OTLP/JSON on a protobuf topic: a common mix-up
            detail = (
                "not an OTLP ExportTraceServiceRequest (protobuf): it looks like JSON "
                "(OTLP/JSON?): read it with format otlp_json (the topic's format, or "
                "run --file --format otlp_json)"
            )
        raise InvalidEvent("otlp_unreadable", truncate(detail, MAX_DETAIL_CHARS)) from None
    return request


_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def _parse_json(value: bytes) -> ExportTraceServiceRequest:
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    try:
        document = json.loads(value)
    except (UnicodeDecodeError, ValueError) as exc:
        detail = f"not OTLP/JSON: {type(exc).__name__} at {getattr(exc, 'pos', '?')}"
        raise InvalidEvent("otlp_unreadable", detail) from None
    if not isinstance(document, dict):
        raise InvalidEvent("otlp_unreadable", "the OTLP/JSON value is not an object")
    try:
        _hex_ids_to_base64(document)
        request = ExportTraceServiceRequest()
        json_format.ParseDict(document, request, ignore_unknown_fields=True)
        return request
    except (json_format.ParseError, ValueError, TypeError, AttributeError) as exc:
        detail = f"not an OTLP/JSON ExportTraceServiceRequest: {exc}"
        raise InvalidEvent("otlp_unreadable", truncate(detail, MAX_DETAIL_CHARS)) from None


def _hex_ids_to_base64(document: dict[str, Any]) -> None:
    # OTLP/JSON writes ids as hex; protobuf's JSON reader expects bytes fields as base64.
    for resource_spans in _items(document, "resourceSpans"):
        for scope_spans in _items(resource_spans, "scopeSpans"):
            for span in _items(scope_spans, "spans"):
                _convert(span)
                for link in _items(span, "links"):
                    _convert(link)


def _items(parent: Any, key: str) -> list[Any]:
    value = parent.get(key, []) if isinstance(parent, dict) else []
    return value if isinstance(value, list) else []


def _convert(obj: Any) -> None:
    if not isinstance(obj, dict):
        return
    for key in _ID_FIELDS:
        raw = obj.get(key)
        if isinstance(raw, str) and raw:
            try:
                obj[key] = base64.b64encode(bytes.fromhex(raw)).decode("ascii")
            except ValueError:
                raise ValueError(f"{key} is not hex") from None


def _span(span: Any, resource: Mapping[str, AttrValue]) -> Span:
    if len(span.trace_id) != 16 or not any(span.trace_id):
        raise InvalidEvent("otlp_bad_span", f"span {span.name!r:.80}: trace id is not 16 bytes")
    if len(span.span_id) != 8 or not any(span.span_id):
        raise InvalidEvent("otlp_bad_span", f"span {span.name!r:.80}: span id is not 8 bytes")
    parent = span.parent_span_id
    if parent and len(parent) != 8:
        raise InvalidEvent("otlp_bad_span", f"span {span.name!r:.80}: parent id is not 8 bytes")
    return Span(
        trace_id=binascii.hexlify(span.trace_id).decode("ascii"),
        span_id=binascii.hexlify(span.span_id).decode("ascii"),
        parent_span_id=binascii.hexlify(parent).decode("ascii") if any(parent) else None,
        name=span.name,
        start_ns=span.start_time_unix_nano,
        end_ns=span.end_time_unix_nano,
        attributes=attributes(span.attributes),
        resource=resource,
    )


def attributes(pairs: Any) -> dict[str, AttrValue]:
    """OTLP ``KeyValue`` list → plain Python values (later keys win, as in the SDK)."""
    out: dict[str, AttrValue] = {}
    for pair in pairs:
        out[pair.key] = any_value(pair.value)
    return out


def any_value(value: AnyValue, depth: int = 0) -> AttrValue:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        if depth >= MAX_VALUE_DEPTH:
            return None
        return [any_value(v, depth + 1) for v in value.array_value.values]
    if kind == "kvlist_value":
        if depth >= MAX_VALUE_DEPTH:
            return None
        kv: list[KeyValue] = list(value.kvlist_value.values)
        return {p.key: any_value(p.value, depth + 1) for p in kv}
    result: AttrValue = getattr(value, kind)
    return result
