"""Recall and precision of the detectors on the labelled corpus (the targets it must meet)."""

from __future__ import annotations

import pytest

from monitor.redaction import Pseudonymizer, RedactionPolicy, Redactor
from tests.monitor.redaction.corpus import KINDS, negatives, positives, score

TARGET_RECALL = {"email": 0.98, "card": 0.98, "iban": 0.98, "secret": 0.98, "phone": 0.95}


@pytest.fixture(scope="module")
def redactor() -> Redactor:
    return Redactor(RedactionPolicy())


def test_the_corpus_is_as_large_as_the_issue_asks() -> None:
    labelled = [kind for sample in positives() for _, kind in sample.values]
    assert len(labelled) >= 200
    assert set(labelled) == set(KINDS)
    assert all(labelled.count(kind) >= 40 for kind in KINDS)
    assert len(set(negatives())) >= 200


def test_recall_per_kind_meets_the_targets(redactor: Redactor) -> None:
    result = score(redactor)
    for kind, target in TARGET_RECALL.items():
        k = result.kinds[kind]
        assert k.recall >= target, (kind, k.recall, [v for m, v in result.missed if m == kind])


def test_no_hard_negative_is_altered(redactor: Redactor) -> None:
    altered = [
        (text, redactor.redact_text(text, Pseudonymizer()))
        for text in negatives()
        if redactor.redact_text(text, Pseudonymizer()) != text
    ]
    assert altered == []


def test_no_raw_value_survives_in_the_redacted_text(redactor: Redactor) -> None:
    for sample in positives():
        redacted = redactor.redact_text(sample.text, Pseudonymizer())
        for value, _ in sample.values:
            assert value not in redacted


def test_network_identifiers_are_redacted_only_when_configured() -> None:
    text = "Connect to db01.internal.acme.net (10.8.0.12) on port 5432."
    assert Redactor(RedactionPolicy()).redact_text(text, Pseudonymizer()) == text
    on = Redactor(RedactionPolicy(ips=True, hostnames=True))
    assert on.redact_text(text, Pseudonymizer()) == "Connect to <HOST_1> (<IP_1>) on port 5432."
