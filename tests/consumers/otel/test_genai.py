"""Turns read from GenAI-convention and OpenInference traces; every reason a trace gives none."""

from __future__ import annotations

import json

from consumers.otel.genai import CaseAttributes, turns_from_trace
from tests.consumers.otel.spans import TRACE, genai_trace, openinference_trace, span

CASE = CaseAttributes(subject=("case.subject",), product=("deployment.environment.product",))


def test_genai_trace_gives_one_turn_on_the_chat_span() -> None:
    turns, skipped = turns_from_trace(genai_trace(), CASE)
    assert skipped == []
    (turn,) = turns
    # The evaluated span is the chat span, not the agent (root) span.
    assert (turn.trace_id, turn.span_id) == (TRACE, "c000000000000003")
    assert turn.event_id == f"otel-{TRACE}-c000000000000003"
    # The retrieval query wins over the user message with documents inlined.
    assert turn.query == "How do I reset my router?"
    assert turn.answer == "Hold the reset button for 10 seconds."
    assert [(c.id, c.text, c.score) for c in turn.contexts] == [
        ("kb-1", "Router reset: hold the button 10 s.", 0.9),
        ("kb-2", "Warranty terms.", 0.4),
    ]
    # History: the earlier messages, without the system prompt; the conversation id sits on
    # the agent span.
    assert [(m.role, m.content) for m in turn.history] == [("user", "Hi"), ("assistant", "Hello!")]
    assert turn.conversation_id == "conv-42"
    assert turn.turn_index == 1
    assert (turn.assistant.name, turn.assistant.version, turn.assistant.model) == (
        "support-bot",
        "2.3.0",
        "gpt-test-0611",
    )
    assert turn.case.subject == "Router offline"
    assert turn.case.description == ""


def test_document_text_is_read_from_content_or_text() -> None:
    docs = [{"id": "x", "score": 1, "text": "Plain text key."}]
    (turn,), _ = turns_from_trace(genai_trace(documents=docs))
    assert turn.contexts[0].text == "Plain text key."


def test_without_retrieval_query_the_last_user_message_is_the_query() -> None:
    spans = [s for s in genai_trace() if s.attributes["gen_ai.operation.name"] != "retrieval"]
    (turn,), _ = turns_from_trace(spans)
    assert turn.query == "Context: ... Question: How do I reset my router?"
    assert turn.contexts == []


def test_openinference_trace() -> None:
    (turn,), skipped = turns_from_trace(openinference_trace())
    assert skipped == []
    assert turn.span_id == "d000000000000003"
    assert turn.query == "printer jams"
    assert turn.answer == "Open the tray and clear it."
    assert [c.id for c in turn.contexts] == ["doc-a", "doc-b"]
    assert turn.conversation_id == "sess-7"
    assert turn.assistant.model == "gpt-oi"


def test_deprecated_prompt_and_completion_attributes() -> None:
    llm = span(
        "e000000000000001",
        None,
        0,
        10,
        {
            "gen_ai.system": "openai",
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": "Where is my parcel?",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": "It ships tomorrow.",
        },
    )
    (turn,), _ = turns_from_trace([llm])
    assert (turn.query, turn.answer) == ("Where is my parcel?", "It ships tomorrow.")
    # No conversation id anywhere: the trace is the conversation.
    assert turn.conversation_id == TRACE


def test_content_capture_off_is_skipped_with_the_setting_to_turn_on() -> None:
    turns, (skip,) = turns_from_trace(genai_trace(capture=False))
    assert turns == []
    assert skip.reason == "content_not_captured"
    assert "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only" in skip.detail
    assert skip.span_id == "c000000000000003"


def test_openinference_hidden_content_is_skipped() -> None:
    turns, (skip,) = turns_from_trace(openinference_trace(hidden=True))
    assert turns == []
    assert skip.reason == "content_hidden"
    assert "OPENINFERENCE_HIDE_INPUTS" in skip.detail


def test_documents_without_text_are_skipped() -> None:
    docs = [{"id": "kb-1", "score": 0.9}]
    turns, (skip,) = turns_from_trace(genai_trace(documents=docs))
    assert turns == []
    assert skip.reason == "documents_without_text"


def test_a_trace_without_an_answer_is_skipped() -> None:
    spans = genai_trace()
    chat = spans[1]
    attrs = dict(chat.attributes)
    attrs["gen_ai.output.messages"] = json.dumps(
        [{"role": "assistant", "parts": [{"type": "tool_call", "name": "lookup"}]}]
    )
    spans[1] = span(chat.span_id, chat.parent_span_id, chat.start_ns, chat.end_ns, attrs)
    turns, (skip,) = turns_from_trace(spans)
    assert turns == []
    assert skip.reason == "no_answer"


def test_a_trace_without_genai_spans_is_skipped() -> None:
    http = span("f000000000000001", None, 0, 5, {"http.request.method": "GET"})
    turns, (skip,) = turns_from_trace([http])
    assert (turns, skip.reason, skip.span_id) == ([], "no_genai_span", None)


def test_tool_call_round_then_answer_is_one_turn_on_the_last_call() -> None:
    spans = genai_trace()
    chat = spans[1]
    first = dict(chat.attributes)
    first["gen_ai.output.messages"] = json.dumps(
        [{"role": "assistant", "parts": [{"type": "text", "content": "Let me check."}]}]
    )
    early = span("c000000000000009", chat.parent_span_id, 21, 25, first)
    (turn,), _ = turns_from_trace([*spans, early])
    assert turn.span_id == "c000000000000003"


def test_genai_spans_without_an_inference_span_are_not_called_a_non_genai_trace() -> None:
    retrieval, _, agent = genai_trace()  # the chat span went to another replica
    turns, (skip,) = turns_from_trace([agent, retrieval])
    assert (turns, skip.reason) == ([], "no_inference_span")
    assert "invoke_agent support" in skip.detail
