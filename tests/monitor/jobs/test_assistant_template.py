"""Request templates and JSONPath-like answer selectors for JSON API assistants."""

from __future__ import annotations

import pytest

from monitor.errors import TemplateError
from monitor.jobs.assistant_template import parse_path, render, select


def test_whole_placeholders_keep_their_type_and_inline_ones_become_text() -> None:
    history = [{"role": "user", "content": "hi"}]
    template = {
        "messages": "{{history}}",
        "q": "Q: {{ query }} ({{case.product}})",
        "n": 3,
        "nested": ["{{query}}", {"k": True}],
    }
    values = {"history": history, "query": "why?", "case.product": None}
    assert render(template, values) == {
        "messages": history,
        "q": "Q: why? ()",
        "n": 3,
        "nested": ["why?", {"k": True}],
    }


def test_unknown_placeholder_is_an_error() -> None:
    with pytest.raises(TemplateError, match=r"unknown placeholder \{\{qeury\}\}"):
        render({"q": "{{qeury}}"}, {"query": "x"})


def test_selectors() -> None:
    doc = {"choices": [{"message": {"content": "ok"}}], "data": {"the answer": "yes"}}
    assert select(doc, "$.choices[0].message.content") == "ok"
    assert select(doc, "$.data['the answer']") == "yes"
    assert parse_path("$") == []
    with pytest.raises(TemplateError, match=r"no item \[1\]"):
        select(doc, "$.choices[1]")
    with pytest.raises(TemplateError, match="no key 'answer'"):
        select(doc, "$.data.answer")
    with pytest.raises(TemplateError, match=r"must start with '\$'"):
        parse_path("data.answer")
    with pytest.raises(TemplateError, match="cannot read"):
        parse_path("$.data..x")
