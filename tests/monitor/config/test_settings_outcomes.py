"""The outcomes settings: a topic of kind outcomes, its mapping, and kept unsampled turns, each
refused at load with the reason when it cannot work."""

from __future__ import annotations

import pytest

from monitor.config.settings import load_settings
from monitor.errors import ConfigError

TURNS = "support.turns"


def kafka(*topics: object) -> dict[str, object]:
    return {"topics": [TURNS, *topics]}


def test_an_outcomes_topic_is_read_apart_from_the_turns_topics() -> None:
    settings = load_settings(None, kafka=kafka({"name": "support.outcomes", "kind": "outcomes"}))
    assert settings.kafka.topic_formats == {TURNS: "casewatch"}
    assert settings.kafka.outcome_topics == {"support.outcomes": "casewatch"}
    assert settings.kafka.topic_names == [TURNS, "support.outcomes"]


def test_an_outcomes_topic_of_spans_is_refused() -> None:
    with pytest.raises(ConfigError, match="an outcomes topic has format casewatch or mapped"):
        load_settings(None, kafka=kafka({"name": "o", "kind": "outcomes", "format": "otlp_json"}))


def test_a_mapped_outcomes_topic_needs_its_mapping() -> None:
    with pytest.raises(ConfigError, match="outcome_mapping: required field"):
        load_settings(None, kafka=kafka({"name": "o", "kind": "outcomes", "format": "mapped"}))
    mapping = {
        "outcome_id": "id",
        "kind": "'feedback'",
        "assistant": "bot",
        "timestamp": "at",
        "turn_event_id": "turn",
        "thumbs": "vote",
    }
    settings = load_settings(
        None,
        kafka=kafka({"name": "o", "kind": "outcomes", "format": "mapped"}),
        outcomes={"mapping": mapping},
    )
    assert settings.kafka.outcome_topics == {"o": "mapped"}
    # A mapped outcomes topic asks nothing of the turns' own mapping.
    assert settings.mapping == {}


def test_kept_unsampled_turns_and_screening_go_together() -> None:
    # The screening processes hand the turns they finish back as kept rows.
    settings = load_settings(
        None, outcomes={"retain_unsampled": True}, daemon={"screen_processes": 1}
    )
    assert settings.outcomes.retain_unsampled and settings.daemon.screen_processes == 1
