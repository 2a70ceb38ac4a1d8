"""Passages of at most 400 tokens (Pencils Down §4.2), counted with an offline tokenizer (pure).

The tokenizer is a regular expression: a token is a run of word characters (``\\w+``, Unicode
aware) or a single other non-space character. It needs no download and no model files, is
deterministic across machines, and counts within ~25% of the BPE tokenizers LLMs use on English
prose (a BPE splits long or rare words further; punctuation is one token in both). The 400-token
limit is a passage-size convention for graders, not a context-window bound, so this accuracy is
enough; the tokenizer's name is stored with every grading (``TOKENIZER``).

Ranked passages keep their id, so one longer than the limit is truncated; generated text (a
live answer) is split into paragraph-sized passages: paragraphs are packed greedily up to the
limit, and a single paragraph longer than the limit is cut into consecutive windows.
"""

from __future__ import annotations

import re

MAX_PASSAGE_TOKENS = 400
TOKENIZER = "regex-word-punct-v1"

_TOKEN = re.compile(r"\w+|[^\w\s]")
_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")


def count_tokens(text: str) -> int:
    return sum(1 for _ in _TOKEN.finditer(text))


def _token_ends(text: str) -> list[int]:
    return [m.end() for m in _TOKEN.finditer(text)]


def truncate(text: str, max_tokens: int = MAX_PASSAGE_TOKENS) -> str:
    """``text`` up to the end of its ``max_tokens``-th token (unchanged when shorter)."""
    if max_tokens < 1:
        raise ValueError("max_tokens must be >= 1")
    ends = _token_ends(text)
    if len(ends) <= max_tokens:
        return text
    return text[: ends[max_tokens - 1]]


def _windows(paragraph: str, max_tokens: int) -> list[str]:
    spans = [(m.start(), m.end()) for m in _TOKEN.finditer(paragraph)]
    return [
        paragraph[spans[i][0] : spans[min(i + max_tokens, len(spans)) - 1][1]]
        for i in range(0, len(spans), max_tokens)
    ]


def split_passages(text: str, max_tokens: int = MAX_PASSAGE_TOKENS) -> list[str]:
    """Paragraph-sized passages of at most ``max_tokens`` tokens each, in order; always at
    least one (an empty text is one empty passage, graded like any other)."""
    if max_tokens < 1:
        raise ValueError("max_tokens must be >= 1")
    passages: list[str] = []
    current: list[str] = []
    size = 0
    for paragraph in (p.strip() for p in _PARAGRAPH_BREAK.split(text)):
        n = count_tokens(paragraph)
        if n == 0:
            continue
        if size and size + n > max_tokens:
            passages.append("\n\n".join(current))
            current, size = [], 0
        if n > max_tokens:
            passages.extend(_windows(paragraph, max_tokens))
            continue
        current.append(paragraph)
        size += n
    if current:
        passages.append("\n\n".join(current))
    return passages or [text.strip()]


__all__ = ["MAX_PASSAGE_TOKENS", "TOKENIZER", "count_tokens", "split_passages", "truncate"]
