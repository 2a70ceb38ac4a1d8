"""Embeddings from an OpenAI-compatible ``/v1/embeddings`` endpoint, for the failure modes' text
features (``failure_modes.embeddings``; ``stats/failure_features.py`` reads the vectors).

The requests go through the judges' transport (``http_transport.py``: the real ``openai`` client,
the configured timeout per attempt, its errors translated), and a failed attempt that may pass
on a second try (429, 5xx, 408, a timeout, a dropped connection) is tried again up to
``max_retries`` times with a short exponential backoff (a ``Retry-After`` up to
``MAX_RETRY_AFTER_S`` is honoured). Texts go in batches of ``batch_size``; one run
(``begin_run``) embeds ``max_texts`` texts at most. Anything that keeps a run from having every
vector it asked for raises ``EmbeddingUnavailable`` (``monitor/errors.py``) with a bounded
``reason`` (``REASONS``), which the job counts before it falls back to the TF-IDF features for
that run:

- ``down``: no connection to the endpoint (refused, reset, name not resolved);
- ``timeout``: an attempt outlasted ``timeout_seconds`` (after the retries);
- ``error``: the endpoint answered an HTTP error (after the retries where it is transient);
- ``malformed``: an answer that is not one vector per text, all of one width;
- ``over_cap``: the run asked for more than ``max_texts`` texts.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from monitor.config.failure_modes import EmbeddingsConfig
from monitor.errors import (
    EmbeddingUnavailable,
    JudgeError,
    JudgeTransientError,
    UnreadableResponse,
)
from monitor.judging.http_transport import CallStats, HttpTransport, TransportConfig

REASONS: tuple[str, ...] = ("down", "timeout", "error", "malformed", "over_cap")
OPENAI_BASE_URL = "https://api.openai.com/v1"
BACKOFF_S = 0.25  # the first retry's wait, doubled each retry
MAX_RETRY_AFTER_S = 10.0


class EmbeddingsClient:
    """One endpoint's embeddings, batched and bounded per run (one job's: not thread-safe)."""

    def __init__(
        self, config: EmbeddingsConfig, *, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self._cfg = config
        self._url = (config.base_url or OPENAI_BASE_URL).rstrip("/") + "/embeddings"
        self._transport = HttpTransport(
            TransportConfig(
                base_url=config.base_url,
                timeout_seconds=config.timeout_seconds,
                api_key=config.resolve_api_key(),
            )
        )
        self._sleep = sleep
        self._used = 0
        self.requests = 0  # HTTP requests made, retries included

    def begin_run(self) -> None:
        """A new run: its ``max_texts`` budget starts again."""
        self._used = 0

    def close(self) -> None:
        self._transport.close()

    def embed(self, texts: Sequence[str]) -> np.ndarray[Any, Any]:
        """One row per text, in order (float32)."""
        if self._used + len(texts) > self._cfg.max_texts:
            raise EmbeddingUnavailable(
                "over_cap",
                f"{self._used + len(texts)} texts in this run, over "
                f"failure_modes.embeddings.max_texts ({self._cfg.max_texts})",
            )
        self._used += len(texts)
        rows: list[list[float]] = []
        size = self._cfg.batch_size
        for start in range(0, len(texts), size):
            rows.extend(self._batch(list(texts[start : start + size])))
        if not rows:
            return np.zeros((0, 0), dtype=np.float32)
        if len({len(r) for r in rows}) != 1:
            raise EmbeddingUnavailable("malformed", "vectors of differing widths")
        return np.asarray(rows, dtype=np.float32)

    def _batch(self, batch: list[str]) -> list[list[float]]:
        body: dict[str, Any] = {"model": self._cfg.model, "input": batch}
        body["encoding_format"] = "float"
        if self._cfg.dimensions is not None:
            body["dimensions"] = self._cfg.dimensions
        raw = self._post(body)
        try:
            data = json.loads(raw)["data"]
            ordered = sorted(data, key=lambda d: int(d["index"]))
            vectors = [[float(x) for x in d["embedding"]] for d in ordered]
            indices = [int(d["index"]) for d in ordered]
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbeddingUnavailable("malformed", f"unreadable answer: {exc!r}"[:200]) from exc
        if indices != list(range(len(batch))) or any(not v for v in vectors):
            detail = f"{len(vectors)} vectors for {len(batch)} texts"
            raise EmbeddingUnavailable("malformed", detail)
        return vectors

    def _post(self, body: dict[str, Any]) -> bytes:
        retries = 0
        while True:
            call = CallStats()
            try:
                raw = self._transport.post_json(self._url, body, call)
                self.requests += call.requests
                return raw
            except JudgeError as exc:
                self.requests += call.requests
                transient = isinstance(exc, JudgeTransientError) and not isinstance(
                    exc, UnreadableResponse
                )
                wait = BACKOFF_S * 2**retries
                after = getattr(exc, "retry_after", None)
                if after is not None:
                    wait = max(wait, after)
                if transient and retries < self._cfg.max_retries and wait <= MAX_RETRY_AFTER_S:
                    retries += 1
                    self._sleep(wait)
                    continue
                raise EmbeddingUnavailable(_reason(exc), str(exc)) from exc


def _reason(exc: JudgeError) -> str:
    if isinstance(exc, UnreadableResponse):
        return "malformed"
    reason = getattr(exc, "reason", "")
    if reason == "timeout":
        return "timeout"
    if reason == "connection":  # unreachable, or a transport closed under the call
        return "down"
    return "error"
