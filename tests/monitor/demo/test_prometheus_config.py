"""The pure half of the Prometheus launcher: durations, config documents, tuned rule copies."""

from __future__ import annotations

from typing import Any

import pytest

from monitor.demo.prometheus_config import (
    OBJECTIVE_RECORD,
    ScrapeTarget,
    alertmanager_config,
    format_duration,
    parse_duration,
    prometheus_config,
    tune_rules,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("0s", 0), ("500ms", 0.5), ("30s", 30), ("5m", 300), ("1h30m", 5400), ("7d", 604800)],
)
def test_durations_round_trip(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds
    assert format_duration(seconds) == text


@pytest.mark.parametrize("bad", ["", "5", "m", "1.5m", "-1m", "5 m", "1x"])
def test_a_malformed_duration_is_a_value_error(bad: str) -> None:
    with pytest.raises(ValueError, match="not a Prometheus duration"):
        parse_duration(bad)


def test_a_negative_duration_cannot_be_formatted() -> None:
    with pytest.raises(ValueError, match="negative"):
        format_duration(-1)


def test_scrape_targets_from_addresses_and_urls() -> None:
    assert ScrapeTarget.of("127.0.0.1:9464") == ScrapeTarget("127.0.0.1:9464", "/metrics")
    assert ScrapeTarget.of("http://127.0.0.1:9464") == ScrapeTarget("127.0.0.1:9464")
    assert ScrapeTarget.of("http://h:1/x/metrics") == ScrapeTarget("h:1", "/x/metrics")
    for bad in ("localhost", "https://h:1", "http://h/metrics", "ftp://h:1"):
        with pytest.raises(ValueError, match="scrape target"):
            ScrapeTarget.of(bad)


def test_prometheus_config_scrapes_targets_loads_rules_and_alerts() -> None:
    doc = prometheus_config(
        [ScrapeTarget("a:1"), ScrapeTarget("b:2"), ScrapeTarget("c:3", "/m")],
        rule_files=["/r/casewatch.rules.yml"],
        alertmanager="127.0.0.1:9093",
        scrape_interval_s=1,
        evaluation_interval_s=0.5,
    )
    assert doc["global"] == {
        "scrape_interval": "1s",
        "scrape_timeout": "1s",
        "evaluation_interval": "500ms",
    }
    assert doc["rule_files"] == ["/r/casewatch.rules.yml"]
    jobs = {j["metrics_path"]: j["static_configs"][0]["targets"] for j in doc["scrape_configs"]}
    assert jobs == {"/metrics": ["a:1", "b:2"], "/m": ["c:3"]}
    assert len({j["job_name"] for j in doc["scrape_configs"]}) == 2
    am = doc["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"]
    assert am == ["127.0.0.1:9093"]
    assert "alerting" not in prometheus_config([ScrapeTarget("a:1")])
    with pytest.raises(ValueError, match="intervals"):
        prometheus_config([ScrapeTarget("a:1")], scrape_interval_s=0)


def test_alertmanager_config_routes_everything_to_the_webhook() -> None:
    doc = alertmanager_config("http://127.0.0.1:5000/hook")
    assert doc["route"]["receiver"] == "casewatch"
    assert doc["route"]["group_wait"] == "1s"
    (receiver,) = doc["receivers"]
    assert receiver["webhook_configs"] == [
        {"url": "http://127.0.0.1:5000/hook", "send_resolved": True}
    ]
    # Without a webhook: a receiver that drops notifications (Alertmanager requires one).
    assert alertmanager_config(None)["receivers"] == [{"name": "casewatch"}]
    with pytest.raises(ValueError, match="webhook URL"):
        alertmanager_config("127.0.0.1:5000")


def _rules() -> dict[str, Any]:
    return {
        "groups": [
            {
                "name": "g",
                "rules": [
                    {"record": OBJECTIVE_RECORD, "expr": "vector(0.05)"},
                    {"alert": "Slow", "expr": "up == 0", "for": "1h"},
                    {"alert": "Quick", "expr": "up == 0", "for": "30s"},
                    {"alert": "Now", "expr": "up == 0"},
                ],
            }
        ]
    }


def test_tune_rules_caps_for_and_sets_the_objective_on_a_copy() -> None:
    original = _rules()
    tuned = tune_rules(original, max_for_s=60, objective=0.1)
    rules = {r.get("alert") or r.get("record"): r for r in tuned["groups"][0]["rules"]}
    assert rules["Slow"]["for"] == "1m"
    assert rules["Quick"]["for"] == "30s"  # already shorter: unchanged
    assert "for" not in rules["Now"]
    assert rules[OBJECTIVE_RECORD]["expr"] == "vector(0.1)"
    assert original == _rules()  # the input is not modified


def test_tune_rules_rejects_bad_values() -> None:
    with pytest.raises(ValueError, match="share in"):
        tune_rules(_rules(), objective=1.5)
    with pytest.raises(ValueError, match="max_for_s"):
        tune_rules(_rules(), max_for_s=-1)
    with pytest.raises(ValueError, match="groups"):
        tune_rules({"rules": []}, max_for_s=1)
    no_objective = {"groups": [{"name": "g", "rules": []}]}
    with pytest.raises(ValueError, match="no casewatch:severe_share:objective"):
        tune_rules(no_objective, objective=0.1)
