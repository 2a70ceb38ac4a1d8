"""OTLP decoding: what the real SDK and encoder produce reads back span for span, in both
encodings; anything else is poison with a reason."""

from __future__ import annotations

import json

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from consumers.otel.otlp import decode_spans, split_by_trace
from monitor.errors import InvalidEvent
from tests.consumers.otel.otlp_messages import encode


def _recorded() -> tuple[ReadableSpan, ...]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "bot"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("agent") as agent:
        agent.set_attribute("gen_ai.conversation.id", "c1")
        with tracer.start_as_current_span("chat") as chat:
            chat.set_attribute("gen_ai.operation.name", "chat")
            chat.set_attribute("gen_ai.usage.input_tokens", 12)
            chat.set_attribute("score", 0.5)
            chat.set_attribute("flags", [True, False])
    provider.shutdown()
    return exporter.get_finished_spans()


@pytest.mark.parametrize("encoding", ["otlp_proto", "otlp_json"])
def test_sdk_spans_decode_in_both_encodings(encoding: str) -> None:
    recorded = _recorded()
    spans = decode_spans(encode(recorded, encoding), encoding, 1 << 20)  # type: ignore[arg-type]
    by_name = {s.name: s for s in spans}
    chat, agent = by_name["chat"], by_name["agent"]
    sdk_chat = next(s for s in recorded if s.name == "chat")
    assert sdk_chat.context is not None
    assert chat.trace_id == f"{sdk_chat.context.trace_id:032x}"
    assert chat.span_id == f"{sdk_chat.context.span_id:016x}"
    assert chat.parent_span_id == agent.span_id
    assert agent.is_root
    assert chat.attributes == {
        "gen_ai.operation.name": "chat",
        "gen_ai.usage.input_tokens": 12,
        "score": 0.5,
        "flags": [True, False],
    }
    assert chat.resource["service.name"] == "bot"
    assert chat.end_ns >= chat.start_ns > 0


@pytest.mark.parametrize(
    ("value", "encoding", "reason"),
    [
        (b"", "otlp_proto", "empty"),
        (b"\xff\xff\xff", "otlp_proto", "otlp_unreadable"),
        (b"{not json", "otlp_json", "otlp_unreadable"),
        (b"[1]", "otlp_json", "otlp_unreadable"),
        (
            json.dumps(
                {"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz", "spanId": "1"}]}]}]}
            ).encode(),
            "otlp_json",
            "otlp_unreadable",
        ),
        (
            json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "x"}]}]}]}).encode(),
            "otlp_json",
            "otlp_bad_span",
        ),
        (b"x" * 300, "otlp_json", "too_large"),
    ],
)
def test_malformed_batches_are_poison_with_a_reason(
    value: bytes, encoding: str, reason: str
) -> None:
    with pytest.raises(InvalidEvent) as err:
        decode_spans(value, encoding, 200)  # type: ignore[arg-type]
    assert err.value.reason == reason


def test_otlp_json_on_a_protobuf_topic_is_poison_that_says_it_looks_like_json() -> None:
    value = encode(_recorded(), "otlp_json")
    with pytest.raises(InvalidEvent) as err:
        decode_spans(b"  " + value, "otlp_proto", 1 << 20)
    assert err.value.reason == "otlp_unreadable"
    assert "looks like JSON" in str(err.value) and "format otlp_json" in str(err.value)
    with pytest.raises(InvalidEvent) as other:
        decode_spans(b"\xff\xff\xff", "otlp_proto", 1 << 20)
    assert "JSON" not in str(other.value)  # no hint for bytes that are not JSON


@pytest.mark.parametrize("encoding", ["otlp_proto", "otlp_json"])
def test_a_batch_splits_into_one_protobuf_request_per_trace_decoding_to_the_same_spans(
    encoding: str,
) -> None:
    value = encode(_recorded() + _recorded(), encoding)  # two traces in one batch
    spans = decode_spans(value, encoding, 1_000_000)
    parts = split_by_trace(value, encoding)
    assert len(parts) == 2 and set(parts) == {s.trace_id for s in spans}
    again = [s for part in parts.values() for s in decode_spans(part, "otlp_proto", 1_000_000)]
    assert sorted(again, key=lambda s: s.span_id) == sorted(spans, key=lambda s: s.span_id)
