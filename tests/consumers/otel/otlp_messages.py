"""Span batches encoded as the Collector's Kafka exporter writes them, from spans the real SDK
recorded: the real OTLP encoder (opentelemetry-exporter-otlp-proto-common) builds the
``ExportTraceServiceRequest``; ``otlp_proto`` is its protobuf bytes, ``otlp_json`` its OTLP/JSON
(ids as hex, as the specification's JSON encoding and the Collector's marshaler write them)."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.sdk.trace import ReadableSpan

from consumers.otel.otlp import Span


def encode(spans: Sequence[ReadableSpan], encoding: str) -> bytes:
    request = encode_spans(spans)
    if encoding == "otlp_proto":
        return bytes(request.SerializeToString())
    document: dict[str, Any] = json_format.MessageToDict(request)
    for resource_spans in document.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return json.dumps(document).encode()


def request_of(spans: Sequence[Span], encoding: str = "otlp_proto") -> bytes:
    """casewatch's decoded spans back as one ``ExportTraceServiceRequest`` (a resource per
    distinct resource, in order), built with the official message classes: a batch the
    Collector could have written, for tests that choose which spans travel together."""
    request = ExportTraceServiceRequest()
    scopes: dict[str, Any] = {}
    for s in spans:
        key = json.dumps(dict(s.resource), sort_keys=True, default=str)
        if key not in scopes:
            resource_spans = request.resource_spans.add()
            for name, value in s.resource.items():
                resource_spans.resource.attributes.add(key=name).value.CopyFrom(_any(value))
            scopes[key] = resource_spans.scope_spans.add()
        out = scopes[key].spans.add()
        out.trace_id = bytes.fromhex(s.trace_id)
        out.span_id = bytes.fromhex(s.span_id)
        if s.parent_span_id is not None:
            out.parent_span_id = bytes.fromhex(s.parent_span_id)
        out.name = s.name
        out.start_time_unix_nano = s.start_ns
        out.end_time_unix_nano = s.end_ns
        for name, value in s.attributes.items():
            out.attributes.add(key=name).value.CopyFrom(_any(value))
    if encoding == "otlp_proto":
        return bytes(request.SerializeToString())
    document: dict[str, Any] = json_format.MessageToDict(request)
    for resource_spans in document.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                for field in ("traceId", "spanId", "parentSpanId"):
                    if field in span:
                        span[field] = base64.b64decode(span[field]).hex()
    return json.dumps(document).encode()


def _any(value: object) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    return AnyValue(string_value=str(value))
