"""Passages of at most 400 tokens with the offline regex tokenizer."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from monitor.judging.passages import count_tokens, split_passages, truncate


def test_tokens_are_words_and_single_punctuation() -> None:
    assert count_tokens("Run `backupctl catalog unlock --force`, then E4021 clears.") == 14
    assert count_tokens("") == 0
    assert count_tokens("Größe 10 GiB") == 3  # Unicode word characters


def test_truncate_keeps_the_first_tokens_verbatim() -> None:
    text = "one two, three four"
    assert truncate(text, 3) == "one two,"
    assert truncate(text, 10) == text
    with pytest.raises(ValueError, match="max_tokens"):
        truncate(text, 0)


def test_paragraphs_are_packed_up_to_the_limit() -> None:
    paragraphs = ["a b c", "d e f", "g h i"]
    assert split_passages("\n\n".join(paragraphs), max_tokens=6) == ["a b c\n\nd e f", "g h i"]


def test_a_long_paragraph_is_cut_into_windows() -> None:
    words = " ".join(f"w{i}" for i in range(10))
    assert split_passages(f"intro\n\n{words}", max_tokens=4) == [
        "intro",
        "w0 w1 w2 w3",
        "w4 w5 w6 w7",
        "w8 w9",
    ]


def test_an_empty_answer_is_one_empty_passage() -> None:
    assert split_passages("") == [""]
    assert split_passages("  \n\n ") == [""]


def test_the_default_limit_is_400_tokens() -> None:
    text = " ".join(["word"] * 1000)
    passages = split_passages(text)
    assert [count_tokens(p) for p in passages] == [400, 400, 200]
    assert count_tokens(truncate(text)) == 400


@given(st.text(alphabet=st.sampled_from("ab .,\n"), max_size=300), st.integers(1, 20))
def test_no_passage_exceeds_the_limit_and_no_token_is_lost(text: str, limit: int) -> None:
    passages = split_passages(text, limit)
    assert all(count_tokens(p) <= limit for p in passages)
    assert sum(count_tokens(p) for p in passages) == count_tokens(text)
