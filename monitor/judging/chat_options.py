"""Request options an OpenAI-compatible endpoint may not support (json_schema output, logprobs).

Many servers (older vLLM, llama.cpp, proxies) reject an option they do not know with a 400 or
422 that names it. ``ChatEndpoint.send_optional`` asks with the option while it is enabled and,
on the first such rejection, drops it for the rest of the endpoint's life and asks again at
once without it: one mechanism for the judge's response format and the pairwise logprobs.
"""

from __future__ import annotations

import threading

import openai

from monitor.errors import JudgeError


class OptionalParam:
    """A request option an endpoint may reject (a 400 or 422 whose message names one of
    ``words``, or a 5xx naming all of them): after the first rejection it is dropped for the
    rest of the endpoint's life."""

    def __init__(self, name: str, words: tuple[str, ...], *, enabled: bool = True) -> None:
        self.name = name
        self._words = words
        self.enabled = enabled
        self._lock = threading.Lock()

    def rejected_by(self, exc: JudgeError) -> int | None:
        """The HTTP status if ``exc`` is the endpoint rejecting this option, else None."""
        cause = exc.__cause__
        if not isinstance(cause, openai.APIStatusError):
            return None
        status = cause.status_code
        text = f"{cause.message} {cause.body}".lower()
        if status in (400, 422):
            return status if any(word in text for word in self._words) else None
        if status >= 500 and all(word in text for word in self._words):
            return status
        return None

    def drop(self) -> bool:
        """Stop asking for it; True for the one thread that dropped it (which logs it)."""
        with self._lock:
            was, self.enabled = self.enabled, False
        return was


__all__ = ["OptionalParam"]
