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
from opentelemetry.sdk.trace import ReadableSpan


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
