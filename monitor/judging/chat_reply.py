"""The part of a chat-completions reply the judges read, and the request body's encoding.

``ChatEndpoint.send`` takes the HTTP response from the ``openai`` client unparsed and reads it
here. The client's own ``ChatCompletion`` is built by ``construct_type``, a Python walk over
the SDK's type hints: ~80 us of CPU per reply, ~6 % of the GIL in the daemon at 32 judge
threads (bench/README.md, "judging.py"). These models hold only what a caller uses and are
validated by pydantic-core straight from the bytes (~4 us). Unlike ``construct_type``, they
validate: a 200 whose body is not a chat completion is an error the endpoint translates
(``server_error``), not an object that fails later on attribute access.

The request body is JSON-encoded in parts, so that what never changes for a judge (model,
temperature, the response format with its JSON schema: about half the encoding cost) is
encoded once (``RequestParams``) and only the conversation per request. The bytes are those
the client would send for the whole dict (same ``json.dumps`` options as its encoder).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel


class TopLogprob(BaseModel):
    token: str
    logprob: float


class TokenLogprob(BaseModel):
    token: str
    logprob: float
    top_logprobs: list[TopLogprob] | None = None


class ChoiceLogprobs(BaseModel):
    content: list[TokenLogprob] | None = None


class ReplyMessage(BaseModel):
    content: str | None = None


class ReplyChoice(BaseModel):
    message: ReplyMessage
    finish_reason: str | None = None
    logprobs: ChoiceLogprobs | None = None


class ReplyUsage(BaseModel):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class ChatReply(BaseModel):
    """A chat completion as the judges read it; other fields are ignored."""

    choices: list[ReplyChoice] | None = None
    usage: ReplyUsage | None = None


def encode_json(value: Any) -> bytes:
    """``value`` as the openai client encodes a request body (compact, UTF-8, no NaN)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


@dataclass(frozen=True)
class RequestParams:
    """Request parameters other than ``model`` and ``messages``, encoded once."""

    values: dict[str, Any]
    # The encoded members without the braces ('"temperature":0,...'), empty when none.
    members: bytes

    @classmethod
    def of(cls, **values: Any) -> RequestParams:
        if "model" in values or "messages" in values:
            raise ValueError("model and messages are filled in by the endpoint")
        return cls(values, encode_json(values)[1:-1])


def encode_body(
    model_member: bytes, messages: list[dict[str, str]], params: RequestParams
) -> bytes:
    """The body ``{"model": ..., "messages": messages, **params.values}``, encoded;
    ``model_member`` is ``'"model":"..."'`` (``encode_model``)."""
    tail = b"," + params.members if params.members else b""
    return b"{" + model_member + b',"messages":' + encode_json(messages) + tail + b"}"


def encode_model(model: str) -> bytes:
    return b'"model":' + encode_json(model)


__all__ = ["ChatReply", "RequestParams", "encode_body", "encode_json", "encode_model"]
