"""Asks a monitored assistant a probe question over HTTP (the baseline-tier job's adapter).

Two kinds (``AssistantEndpointConfig.kind``): an OpenAI-compatible chat endpoint, through the
real ``openai`` client, or any JSON API through a request template and an answer selector
(``monitor.jobs.assistant_template``), through the standard library's HTTP client. One try per
probe and run: a failure is reported as ``AssistantError`` with a bounded reason, the probe is
skipped for this run and the next run asks again (no retry loop of its own).
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from typing import Any, cast

import openai
from openai.types.chat import ChatCompletionMessageParam

from monitor.errors import CasewatchError, ConfigError
from monitor.jobs.assistant_template import TemplateError, render, select
from monitor.judging.pairwise_prompt import PairwiseQuestion
from monitor.settings import AssistantEndpointConfig

_NO_KEY = "no-key-configured"
_MAX_RESPONSE_BYTES = 4 * 1024 * 1024
# History roles an OpenAI-compatible chat accepts; support-desk agents speak as the assistant.
_CHAT_ROLES = {"user": "user", "assistant": "assistant", "agent": "assistant", "system": "system"}


class AssistantError(CasewatchError):
    """The assistant gave no usable answer. ``reason`` is a bounded label value."""

    def __init__(self, reason: str, detail: str) -> None:
        self.reason = reason
        super().__init__(f"{reason}: {detail}")


# Why a probe got no answer; "config": the endpoint is misconfigured (a ConfigError at run time).
ASSISTANT_FAILURES = ("timeout", "connection", "http_error", "bad_response", "config")


class AssistantClient:
    def __init__(self, config: AssistantEndpointConfig) -> None:
        self._config = config
        self._token = _token(config)
        self._openai: openai.OpenAI | None = None
        if config.kind == "openai":
            self._openai = openai.OpenAI(
                api_key=self._token or _NO_KEY,
                base_url=config.url,
                timeout=config.timeout_seconds,
                max_retries=0,
                default_headers=config.headers or None,
            )
        elif not config.url.startswith(("http://", "https://")):
            raise ConfigError(f"assistant endpoint url {config.url!r} must be http(s)")

    def close(self) -> None:
        if self._openai is not None:
            self._openai.close()

    def answer(self, probe_id: str, question: PairwiseQuestion) -> str:
        if self._openai is not None:
            return self._chat(question)
        return self._template(probe_id, question)

    def _chat(self, question: PairwiseQuestion) -> str:
        assert self._openai is not None  # noqa: S101 -- set for kind == "openai"
        messages: list[dict[str, str]] = []
        if self._config.system_prompt:
            messages.append({"role": "system", "content": self._config.system_prompt})
        for m in question.history:
            if m.role in _CHAT_ROLES:
                messages.append({"role": _CHAT_ROLES[m.role], "content": m.content})
        messages.append({"role": "user", "content": question.query})
        try:
            response = self._openai.chat.completions.create(
                model=self._config.model or "",
                messages=cast(list[ChatCompletionMessageParam], messages),
            )
        except openai.APITimeoutError as exc:
            raise AssistantError("timeout", "no answer within the timeout") from exc
        except openai.APIConnectionError as exc:
            raise AssistantError("connection", "cannot reach the assistant") from exc
        except openai.APIStatusError as exc:
            raise AssistantError("http_error", f"HTTP {exc.status_code}") from exc
        except openai.APIError as exc:
            raise AssistantError("bad_response", "unreadable chat completion") from exc
        text = response.choices[0].message.content if response.choices else None
        if not text or not text.strip():
            raise AssistantError("bad_response", "empty answer")
        return text

    def _template(self, probe_id: str, question: PairwiseQuestion) -> str:
        values = template_values(probe_id, question)
        try:
            body = render(self._config.body, values)
        except TemplateError as exc:
            raise ConfigError(f"assistant endpoint body: {exc}") from exc
        headers = {"Content-Type": "application/json", **self._config.headers}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        request = urllib.request.Request(  # noqa: S310 -- scheme checked in __init__
            self._config.url, data=json.dumps(body).encode(), headers=headers, method="POST"
        )
        try:
            with urllib.request.urlopen(  # noqa: S310 -- scheme checked in __init__
                request, timeout=self._config.timeout_seconds
            ) as response:
                raw = response.read(_MAX_RESPONSE_BYTES + 1)
        except urllib.error.HTTPError as exc:
            raise AssistantError("http_error", f"HTTP {exc.code}") from exc
        except TimeoutError as exc:
            raise AssistantError("timeout", "no answer within the timeout") from exc
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise AssistantError("timeout", "no answer within the timeout") from exc
            raise AssistantError("connection", f"cannot reach the assistant: {exc.reason}") from exc
        except OSError as exc:
            raise AssistantError("connection", f"cannot reach the assistant: {exc}") from exc
        if len(raw) > _MAX_RESPONSE_BYTES:
            raise AssistantError("bad_response", "answer larger than 4 MiB")
        try:
            answer = select(json.loads(raw), self._config.answer_path)
        except (ValueError, TemplateError) as exc:
            raise AssistantError("bad_response", str(exc)[:200]) from exc
        if not isinstance(answer, str) or not answer.strip():
            raise AssistantError("bad_response", f"{self._config.answer_path} is not a text")
        return answer


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


def _token(config: AssistantEndpointConfig) -> str | None:
    if config.api_key_env:
        value = os.environ.get(config.api_key_env)
        if value is None:
            raise ConfigError(f"assistant api_key_env: {config.api_key_env} is not set")
        return value
    if config.api_key_file:
        try:
            return config.api_key_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(f"assistant api_key_file: cannot read it: {exc}") from exc
    return None


__all__ = ["ASSISTANT_FAILURES", "AssistantClient", "AssistantError", "template_values"]
