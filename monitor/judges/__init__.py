"""Judges: the protocol, the OpenAI-compatible LLM judge and the offline heuristic judge."""

from __future__ import annotations

from monitor.judges.base import FAILURE_REASONS, Judge

__all__ = ["FAILURE_REASONS", "Judge"]
