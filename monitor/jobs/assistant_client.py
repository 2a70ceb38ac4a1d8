"""Asks a monitored assistant a probe question over HTTP (the baseline-tier job's adapter).

Two kinds (``AssistantEndpointConfig.kind``): an OpenAI-compatible chat endpoint, or any JSON
API through a request template and an answer selector (``monitor.jobs.assistant_template``).
Both go through the HTTP transport the judges' endpoint is built on,
``monitor.judging.http_transport.HttpTransport`` (one client stack, one translation of HTTP
failures); this module maps its errors, by type and reason, to the bounded reasons of
``AssistantError``. One try per probe and run: a failure skips the probe for this
run and the next run asks again (no retry loop of its own). The bearer token comes from the
config, read once when the settings were built.
"""

from __future__ import annotations

import json
from typing import Any

from monitor.config.baseline import AssistantEndpointConfig
from monitor.errors import (
    AssistantError,
    ConfigError,
    JudgeError,
    TemplateError,
    UnreadableResponse,
)
from monitor.jobs.assistant_template import render, select
from monitor.judging.chat_endpoint import content_of
from monitor.judging.chat_reply import RequestParams, encode_model
from monitor.judging.http_transport import CallStats, HttpTransport, TransportConfig
from monitor.judging.pairwise_prompt import PairwiseQuestion

_MAX_RESPONSE_BYTES = 4 * 1024 * 1024
# History roles an OpenAI-compatible chat accepts; support-desk agents speak as the assistant.
_CHAT_ROLES = {"user": "user", "assistant": "assistant", "agent": "assistant", "system": "system"}


# Why a probe got no answer; "config": the endpoint is misconfigured (a ConfigError at run time).
ASSISTANT_FAILURES = ("timeout", "connection", "http_error", "bad_response", "config")


def check_endpoint(config: AssistantEndpointConfig) -> None:
    """ConfigError when the endpoint cannot be asked: a template URL that is not http(s), a
    bearer token that could not be read."""
    if config.kind == "template" and not config.url.startswith(("http://", "https://")):
        raise ConfigError(f"assistant endpoint url {config.url!r} must be http(s)")
    config.resolve_api_key()


class AssistantClient:
    def __init__(self, config: AssistantEndpointConfig, *, name: str = "assistant") -> None:
        check_endpoint(config)
        self._config = config
        self.name = name
        # One try per probe and run: the transport has no retries of its own.
        self._transport = HttpTransport(
            TransportConfig(
                base_url=config.url if config.kind == "openai" else None,
                timeout_seconds=config.timeout_seconds,
                api_key=config.resolve_api_key(),
                headers=dict(config.headers),
                anonymous=True,
            )
        )
        self._model_member = encode_model(config.model or "")
        self._no_params = RequestParams.of()

    def close(self) -> None:
        self._transport.close()

    def answer(self, probe_id: str, question: PairwiseQuestion) -> str:
        try:
            if self._config.kind == "openai":
                return self._chat(question)
            return self._template(probe_id, question)
        except JudgeError as exc:
            raise _assistant_error(exc) from exc

    def _chat(self, question: PairwiseQuestion) -> str:
        messages: list[dict[str, str]] = []
        if self._config.system_prompt:
            messages.append({"role": "system", "content": self._config.system_prompt})
        for m in question.history:
            if m.role in _CHAT_ROLES:
                messages.append({"role": _CHAT_ROLES[m.role], "content": m.content})
        messages.append({"role": "user", "content": question.query})
        reply = self._transport.chat(self._model_member, messages, self._no_params, CallStats())
        text = content_of(reply)
        if not text.strip():
            raise AssistantError("bad_response", "empty answer")
        return text

    def _template(self, probe_id: str, question: PairwiseQuestion) -> str:
        values = template_values(probe_id, question)
        try:
            body = render(self._config.body, values)
        except TemplateError as exc:
            raise ConfigError(f"assistant endpoint body: {exc}") from exc
        raw = self._transport.post_json(self._config.url, body, CallStats())
        if len(raw) > _MAX_RESPONSE_BYTES:
            raise AssistantError("bad_response", "answer larger than 4 MiB")
        try:
            answer = select(json.loads(raw), self._config.answer_path)
        except (ValueError, TemplateError) as exc:
            raise AssistantError("bad_response", str(exc)[:200]) from exc
        if not isinstance(answer, str) or not answer.strip():
            raise AssistantError("bad_response", f"{self._config.answer_path} is not a text")
        return answer


def _assistant_error(exc: JudgeError) -> AssistantError:
    """The transport's bounded failure reasons, as an assistant's."""
    reason = getattr(exc, "reason", "")
    if reason in ("timeout", "connection"):
        return AssistantError(reason, str(exc))
    unreadable = isinstance(exc, UnreadableResponse)
    return AssistantError("bad_response" if unreadable else "http_error", str(exc))


def template_values(probe_id: str, question: PairwiseQuestion) -> dict[str, Any]:
    return {
        "probe_id": probe_id,
        "query": question.query,
        "history": [{"role": m.role, "content": m.content} for m in question.history],
        "contexts": [{"id": c.id, "text": c.text} for c in question.contexts],
        "case.subject": question.case.subject,
        "case.description": question.case.description,
        "case.product": question.case.product,
        "case.environment": question.case.environment,
    }


__all__ = ["ASSISTANT_FAILURES", "AssistantClient", "AssistantError", "template_values"]
