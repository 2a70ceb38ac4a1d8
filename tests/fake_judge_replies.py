"""Replies of the fake judge server (tests/fake_judge_server.py) and helpers to read its
requests. Pure: building a reply does no I/O; the server renders it.

Factories: ``scores`` (valid), ``content`` (any text), ``malformed``, ``missing_metric``,
``out_of_range``, ``extra_keys``, ``http_error``, ``rate_limited`` (429 + Retry-After),
``server_error``, ``auth_error``, ``slow`` (a client timeout), ``disconnect``,
``reject_json_schema`` (400 only to json_schema requests), ``llama_cpp_rejects_json_schema``
(the 500 llama-cpp-python's server answers instead), ``reject_inline_schema``,
``loading_model`` (503), ``truncated`` (cut at max_tokens) and ``with_logprobs``.

Pairwise (DICE): ``pairwise(decide)`` answers stage-1 requests with an analysis and
stage-2 requests (those asking for logprobs or carrying the single-token instruction) with
whatever ``decide(pair)`` returns: a ``{token: logprob}`` map (a logprob reply), a bare label
(no logprobs) or a whole ``Reply``. ``pair`` is the fenced pair data of the request
(``answer_a``, ``answer_b``, ``query``, ...), so a responder can decide by content.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from monitor.judging.prompt import unfence
from monitor.schema.turn import METRICS


@dataclass(frozen=True)
class Reply:
    """One scripted HTTP answer.

    With ``status`` 200 and no ``body``, the server wraps ``content`` into a chat completion
    (with ``usage`` and optional ``logprobs``); otherwise ``body`` is sent as the JSON body.
    """

    status: int = 200
    content: str | None = None
    body: Mapping[str, Any] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0  # extra seconds before answering, on top of the server latency
    usage: tuple[int, int] | None = None  # (prompt, completion) tokens; None = estimated
    logprobs: list[dict[str, Any]] | None = None  # choices[0].logprobs.content
    finish_reason: str = "stop"
    disconnect: bool = False  # close the connection without answering


Responder = Callable[[dict[str, Any]], Reply]
ScriptEntry = Reply | Responder


def score_document(
    score: float | Mapping[str, float] = 0.9, justification: str | None = None
) -> dict[str, dict[str, Any]]:
    """A valid judge reply as a dict: one uniform score, or a score per metric."""
    doc = {}
    for metric in METRICS:
        value = score if isinstance(score, int | float) else score[metric]
        text = justification or f"{metric}: scored {value} by the fake judge."
        doc[metric] = {"score": value, "justification": text}
    return doc


def content(text: str, **kwargs: Any) -> Reply:
    """A completion whose message content is ``text`` (any string, valid or not)."""
    return Reply(content=text, **kwargs)


def scores(
    score: float | Mapping[str, float] = 0.9,
    justification: str | None = None,
    **kwargs: Any,
) -> Reply:
    """A valid judge reply."""
    return content(json.dumps(score_document(score, justification)), **kwargs)


def malformed(**kwargs: Any) -> Reply:
    """Truncated JSON."""
    return content('{"hallucination": {"score": 0.9, "justification": "cut o', **kwargs)


def missing_metric(metric: str = "resolution_alignment", score: float = 0.9) -> Reply:
    doc = score_document(score)
    del doc[metric]
    return content(json.dumps(doc))


def out_of_range(metric: str = "hallucination", value: float = 1.5) -> Reply:
    doc = score_document(0.9)
    doc[metric]["score"] = value
    return content(json.dumps(doc))


def extra_keys(extra: Mapping[str, Any] | None = None) -> Reply:
    doc: dict[str, Any] = score_document(0.9)
    doc.update(extra or {"overall": {"score": 0.9, "justification": "not a metric"}})
    return content(json.dumps(doc))


def http_error(
    status: int,
    message: str = "error",
    *,
    error_type: str = "server_error",
    param: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    body = {"error": {"message": message, "type": error_type, "param": param, "code": None}}
    return Reply(status=status, body=body, headers=dict(headers or {}))


def rate_limited(retry_after: float | None = 1.0) -> Reply:
    headers = {} if retry_after is None else {"Retry-After": f"{retry_after:g}"}
    return http_error(429, "Rate limit reached", error_type="rate_limit_error", headers=headers)


def server_error(status: int = 500) -> Reply:
    return http_error(status, "The server had an error while processing your request.")


def auth_error(message: str = "Incorrect API key provided.") -> Reply:
    return http_error(401, message, error_type="invalid_request_error")


def slow(delay: float, reply: Reply | None = None) -> Reply:
    """``reply`` (default: valid scores) after ``delay`` seconds: a client timeout."""
    return replace(reply or scores(), delay=delay)


def disconnect() -> Reply:
    """Drop the connection without answering: a connection error on the client."""
    return Reply(disconnect=True)


def reject_json_schema(then: Reply | None = None) -> Responder:
    """400 to a request using ``response_format: json_schema``; ``then`` to any other."""
    rejection = http_error(
        400,
        "Invalid parameter: 'response_format' of type 'json_schema' is not supported with "
        "this model.",
        error_type="invalid_request_error",
        param="response_format",
    )
    return _refusing_json_schema(rejection, then)


def _refusing_json_schema(rejection: Reply, then: Reply | None) -> Responder:
    def respond(request: dict[str, Any]) -> Reply:
        if response_format_type(request) == "json_schema":
            return rejection
        return then or scores()

    return respond


def llama_cpp_rejects_json_schema(then: Reply | None = None) -> Responder:
    """llama-cpp-python's server (0.3.x) to a ``json_schema`` request: its request model
    allows only ``text`` and ``json_object``, and its error handler answers every exception,
    that validation error included, with a 500 quoting pydantic's message. ``then`` (default:
    valid scores) answers any other request."""
    rejection = http_error(
        500,
        "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', "
        "'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', "
        "'ctx': {'expected': \"'text' or 'json_object'\"}}\n",
        error_type="internal_server_error",
    )
    return _refusing_json_schema(rejection, then)


def reject_inline_schema(then: Reply | None = None) -> Responder:
    """A strict server that knows neither json_schema nor a ``schema`` inside JSON mode (a 400
    naming the parameter), answering plain JSON mode with ``then``."""
    unknown = http_error(
        400,
        "Unrecognized request argument supplied: response_format.schema",
        error_type="invalid_request_error",
        param="response_format",
    )

    def respond(request: dict[str, Any]) -> Reply:
        fmt = request.get("response_format") or {}
        if response_format_type(request) == "json_schema" or "schema" in fmt:
            return unknown
        return then or scores()

    return respond


def loading_model() -> Reply:
    """503 while the model loads, as llama.cpp's own server answers (llama-cpp-python's loads
    before it listens: its clients see refused connections instead)."""
    body = {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}
    return Reply(status=503, body=body)


def truncated(text: str = '{"hallucination": {"score": 0.9, "justification": "The answer') -> Reply:
    """A reply cut at the request's max_tokens: ``finish_reason`` length, invalid JSON."""
    return content(text, finish_reason="length")


def with_logprobs(
    top_logprobs: Mapping[str, float], token: str | None = None, **kwargs: Any
) -> Reply:
    """A one-token completion (the most likely of ``top_logprobs`` unless ``token``) carrying
    ``choices[0].logprobs.content[0].top_logprobs``, as pairwise decisions read them."""
    chosen = token or max(top_logprobs, key=lambda t: top_logprobs[t])
    top = [
        {"token": t, "logprob": lp, "bytes": list(t.encode())}
        for t, lp in sorted(top_logprobs.items(), key=lambda kv: -kv[1])
    ]
    entry = {
        "token": chosen,
        "logprob": top_logprobs.get(chosen, -9.0),
        "bytes": list(chosen.encode()),
        "top_logprobs": top,
    }
    return Reply(content=chosen, logprobs=[entry], **kwargs)


# ---------------------------------------------------------------- request helpers


def response_format_type(request: Mapping[str, Any]) -> str | None:
    fmt = request.get("response_format")
    return fmt.get("type") if isinstance(fmt, Mapping) else None


def case_data_of(request: Mapping[str, Any]) -> dict[str, Any] | None:
    """The fenced turn data of a judge request (for responders that score by content)."""
    for message in reversed(request.get("messages", [])):
        text = message.get("content")
        if message.get("role") == "user" and isinstance(text, str) and "<untrusted" in text:
            try:
                return unfence(text)
            except ValueError:
                return None
    return None


def is_decision_request(request: Mapping[str, Any]) -> bool:
    """A pairwise stage-2 request: asks for logprobs or ends with the one-token question."""
    from monitor.judging.pairwise_prompt import STAGE2_INSTRUCTION

    if request.get("logprobs"):
        return True
    messages = request.get("messages", [])
    return any(m.get("content") == STAGE2_INSTRUCTION for m in messages)


def pair_data_of(request: Mapping[str, Any]) -> dict[str, Any] | None:
    """The fenced pair data (question and both answers) of a pairwise request."""
    return case_data_of(request)


PairDecision = Mapping[str, float] | str | Reply


def pairwise(
    decide: Callable[[dict[str, Any]], PairDecision],
    analysis: str = "A: fully correct.\nB: partially correct.\nFinal judgment: A",
) -> Responder:
    """A responder for the two-stage pairwise judge (see the module docstring)."""

    def respond(request: dict[str, Any]) -> Reply:
        if not is_decision_request(request):
            return content(analysis)
        decision = decide(pair_data_of(request) or {})
        if isinstance(decision, Reply):
            return decision
        if isinstance(decision, str):
            return content(decision)
        return with_logprobs(decision)

    return respond


def default_responder(request: dict[str, Any]) -> Reply:
    return scores(0.9)


def render_completion(request: Mapping[str, Any], reply: Reply, n: int) -> dict[str, Any]:
    """The chat-completion body of a 200 ``reply`` to ``request`` (the n-th served)."""
    text = reply.content or ""
    if reply.usage is not None:
        prompt_tokens, completion_tokens = reply.usage
    else:  # ~4 characters a token: enough for cost and budget arithmetic
        chars = sum(len(str(m.get("content", ""))) for m in request.get("messages", []))
        prompt_tokens, completion_tokens = chars // 4 + 1, len(text) // 4 + 1
    choice: dict[str, Any] = {
        "index": 0,
        "message": {"role": "assistant", "content": text},
        "finish_reason": reply.finish_reason,
        "logprobs": None if reply.logprobs is None else {"content": reply.logprobs},
    }
    return {
        "id": f"chatcmpl-fake-{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", "fake-judge"),
        "choices": [choice],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


# ---------------------------------------------------------------- rubric grading (Pencils Down)


def rubric_grade(grade: int | str, answer: str = "", **kwargs: Any) -> Reply:
    """A rubric self-rating reply in the requested JSON shape (``grade`` may be invalid)."""
    return content(json.dumps({"answer": answer, "grade": grade}), **kwargs)


def rubric_questions(questions: list[str], **kwargs: Any) -> Reply:
    """A question-generation reply in the requested JSON shape."""
    return content(json.dumps({"questions": questions}), **kwargs)


def rubric_data_of(request: Mapping[str, Any]) -> dict[str, Any] | None:
    """The fenced {question, context} of a grading request (or {query} of a generation one)."""
    return case_data_of(request)


def keyword_grader(keywords: Mapping[str, str]) -> Responder:
    """Grades like a careful model: 5 with the matching text when the context holds the
    keyword listed for the question, else 0 with an empty answer. Generation requests get
    ten questions derived from the query."""

    def respond(request: dict[str, Any]) -> Reply:
        data = rubric_data_of(request) or {}
        if "query" in data:
            return rubric_questions([f"Question {i} about {data['query']}?" for i in range(10)])
        question, context = str(data.get("question", "")), str(data.get("context", ""))
        keyword = keywords.get(question)
        if keyword is not None and keyword.lower() in context.lower():
            return rubric_grade(5, keyword)
        return rubric_grade(0, "")

    return respond


def _plain(text: str) -> str:
    return " ".join(text.replace("`", " ").lower().split())


def gold_answer_grader(gold: Mapping[str, str]) -> Responder:
    """A deterministic stand-in for an LLM rubric grader, keyed on the question text: grade 5
    (JSON, the gold answer as the extracted answer) when the context contains the question's
    gold answer (case, whitespace and backticks ignored); "3 <words>" (the number path) when
    at least half of the gold answer's words appear; else "unanswerable" (grade 0)."""

    def respond(request: dict[str, Any]) -> Reply:
        data = rubric_data_of(request) or {}
        answer = gold.get(str(data.get("question", "")))
        context = _plain(str(data.get("context", "")))
        if answer is None:
            return content("unanswerable")
        if _plain(answer) in context:
            return rubric_grade(5, answer)
        words = _plain(answer).split()
        found = [w for w in words if w in context.split()]
        if words and len(found) * 2 >= len(words):
            return content("3 " + " ".join(found))
        return content("unanswerable")

    return respond
