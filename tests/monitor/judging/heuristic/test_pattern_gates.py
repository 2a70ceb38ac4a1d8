"""The offline judge skips a pattern's scan when a cheap look says the text lacks what the
pattern needs. Each skip must lose nothing: whenever the pattern finds a match, its cheap look
says "may". Checked on every text of the example turns and on thousands of generated texts,
each read as it came and with random stretches blanked out (the identifier passes blank what
earlier passes found, and some cheap looks read the text as it came while the pattern reads
the blanked one). Given that, extraction is the same with or without the skips."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.judging.heuristic import identifiers, tokens

ROOT = Path(__file__).resolve().parents[4]

Gate = Callable[[str], object]


def _phrase(text: str) -> bool:
    return any(p in text for p in identifiers._HTTP_PHRASES)


def _win(text: str) -> bool:
    return ":\\" in text


# (name, pattern, cheap look, whether the look reads the text as it came while the pattern
# reads it blanked)
GATES: list[tuple[str, re.Pattern[str], Gate, bool]] = [
    ("inline command", identifiers._INLINE_CLI, identifiers._may_call_cli, False),
    ("HTTP phrase", identifiers._HTTP_PHRASE, _phrase, False),
    ("Windows path", identifiers._WIN_PATH, _win, False),
    ("version", identifiers._VERSION, identifiers._DOT_DIGIT.search, False),
    ("domain key", tokens._DOMAIN_KEY, tokens._SLASH_KEY.search, True),
    ("camelCase", tokens._CAMEL, tokens._CAMEL_HUMP.search, True),
    ("dotted key", tokens._DOTTED_KEY, tokens._DOT_KEY.search, False),
    ("host", tokens._HOST, tokens._DOT_LOWER.search, False),
    ("IPv4 address", tokens._IPV4, tokens._DOTTED_QUAD.search, False),
]


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _example_texts() -> list[str]:
    found: set[str] = set()
    for path in sorted((ROOT / "examples").rglob("*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                found.update(_strings(json.loads(line)))
    return sorted(found)


def _blanked(text: str, spans: list[tuple[int, int]]) -> str:
    chars = list(text)
    for start, end in spans:
        chars[start:end] = " " * len(chars[start:end])
    return "".join(chars)


def _holds(text: str, blanked: str) -> list[str]:
    broken = []
    for name, pattern, gate, reads_unblanked in GATES:
        if pattern.search(blanked) is not None and not gate(text if reads_unblanked else blanked):
            broken.append(name)
        if pattern.search(text) is not None and not gate(text):
            broken.append(name)
    return broken


def test_no_skip_loses_a_match_on_the_example_texts() -> None:
    texts = _example_texts()
    assert len(texts) > 500
    broken = {}
    for n, text in enumerate(texts):
        # Blank a stretch in the middle, a different one for each text.
        third = len(text) // 3
        spans = [(third, third + 1 + n % max(1, third))]
        if found := _holds(text, _blanked(text, spans)):
            broken[text[:80]] = found
    assert not broken


COMMAND_WORDS = (
    "kubectl systemctl az dig ping mount umount iperf3 vssadmin app-admin fooctl barcli"
    " Get-Service Set-Item Restart-Computer sudo showmount nslookup mtx iscsiadm"
)
PIECES = [
    *COMMAND_WORDS.split(),
    *("Bad Request", "Not Found", "Too Many Requests", "Gateway Timeout", "503", "404"),
    *("C:\\Temp\\a.log", "D:\\", "v2.3.1", "4.12", "10.0.0.1", ".5", "2024.1"),
    *("nginx.ingress.kubernetes.io/proxy-body-size", "a-b/c", "x.y/z9", "/var/log"),
    *("camelCase", "maxRetryCount", "iOS", "macOS", "x9Y", "aB", "build.max_context_gb"),
    *("spring.datasource.url", "db.example.com", "host.internal:8443", "a.b", "EN.us"),
    *("192.168.1.10", "1.2.3", "10.0.0.1/24", "10.0.0.1:8443", "1.22.333", "4.4."),
]
SEPARATORS = [" ", "", "\n", "\t", "  ", "\u00a0", "\u2003", "\x1c", "/", ".", "-", "(", "`", ";"]

generated = st.lists(
    st.tuples(
        st.one_of(st.sampled_from(PIECES), st.text(max_size=6)),
        st.sampled_from(SEPARATORS),
    ),
    max_size=10,
).map(lambda parts: "".join(piece + sep for piece, sep in parts))


@settings(max_examples=3000, deadline=None)
@given(generated, st.lists(st.tuples(st.integers(0, 60), st.integers(0, 8)), max_size=3))
def test_no_skip_loses_a_match_on_generated_texts(
    text: str, stretches: list[tuple[int, int]]
) -> None:
    spans = [(start, start + length) for start, length in stretches]
    assert not _holds(text, _blanked(text, spans))


@pytest.mark.parametrize(
    "text",
    [
        "then run kubectl get pods",
        "use (az login\tnow)",
        "Get-Service foo",
        "sudo\u00a0iperf3 -c host",
        "return 404 Not Found",
        "copy C:\\Temp\\x.log",
        "release 4.12",
        "set nginx.ingress.kubernetes.io/proxy-body-size",
        "the maxRetryCount key",
        "the spring.datasource.url key",
        "db.example.com",
        "reach 10.0.0.12:8443",
    ],
)
def test_each_gate_lets_its_pattern_through(text: str) -> None:
    assert any(pattern.search(text) and gate(text) for _, pattern, gate, _ in GATES)
