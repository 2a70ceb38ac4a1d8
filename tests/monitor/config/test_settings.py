from pathlib import Path

import pytest

from monitor.config.settings import load_settings
from monitor.errors import ConfigError
from monitor.judging.config_hash import judge_config_hash
from monitor.judging.heuristic import judge as heuristic_judge


def test_defaults_use_the_offline_heuristic_judge(monkeypatch: pytest.MonkeyPatch) -> None:
    s = load_settings()
    assert s.judge == "heuristic"
    assert s.judge_config("heuristic").kind == "heuristic"
    assert sum(s.weights().values()) == pytest.approx(1.0)


def test_yaml_file_and_env_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "casewatch.yaml"
    cfg.write_text(
        "judge: primary\n"
        "judges:\n"
        "  primary:\n"
        "    base_url: http://127.0.0.1:1/v1\n"
        "    model: gpt-x\n"
        "    api_key_env: MY_JUDGE_KEY\n"
        "    price_input_per_mtok: 1.5\n"
        "weight_profile: uniform\n"
    )
    monkeypatch.setenv("MY_JUDGE_KEY", "sk-test-secret-123")
    monkeypatch.setenv("CASEWATCH_WEIGHT_PROFILE", "retrieval-heavy")
    s = load_settings(cfg)
    assert s.judge == "primary"
    assert s.weight_profile == "retrieval-heavy"  # env beats the file
    assert s.judges["primary"].resolve_api_key() == "sk-test-secret-123"
    assert "sk-test-secret-123" in s.secret_values()
    assert "sk-test-secret-123" not in repr(s)


def test_api_key_from_file(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text("file-secret-value\n")
    s = load_settings(judges={"j": {"model": "m", "api_key_file": str(key)}}, judge="j")
    assert s.judges["j"].resolve_api_key() == "file-secret-value"


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        ({"weight_profile": "nope"}, "weight_profile"),
        ({"judges": {"j": {"model": "m", "timeout_seconds": -1}}}, "judges.j.timeout_seconds"),
        ({"judge": "missing"}, "not configured"),
        ({"weight_profiles": {"mine": {"hallucination": 1.0}}}, "weight_profiles.mine"),
        ({"critical_metrics": ["tone"]}, "critical_metrics"),
        ({"kafka": {"topics": []}}, "kafka.topics"),
        # The detectors' false-alarm budget and shifts have bounds (a budget of 1e12 days once
        # sent the calibration's chain past the machine's memory).
        ({"detection": {"false_alarm_days": 1e12}}, "detection.false_alarm_days"),
        ({"detection": {"false_alarm_days": 0}}, "detection.false_alarm_days"),
        ({"detection": {"shifts": [1.0, 2.0]}}, "shifts must be distinct multiples > 1"),
        ({"detection": {"shifts": [2.0, 50.0]}}, "<= 20"),
        ({"detection": {"shifts": [2.0, 2.0]}}, "distinct"),
        (
            {"detection": {"baselines": {"shop": {"tone_severe": 0.1}}}},
            "detection.baselines.shop.tone_severe: not a watched signal",
        ),
    ],
)
def test_bad_config_names_the_field(overrides: dict[str, object], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle.replace(".", r"\.")):
        load_settings(**overrides)


def test_missing_config_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "absent.yaml")


def test_judge_config_hash_changes_with_the_judge_but_not_the_key() -> None:
    a = load_settings(judges={"j": {"model": "m1", "api_key": "k1"}}, judge="j")
    b = load_settings(judges={"j": {"model": "m1", "api_key": "k2"}}, judge="j")
    c = load_settings(judges={"j": {"model": "m2", "api_key": "k1"}}, judge="j")
    assert judge_config_hash(a) == judge_config_hash(b)
    assert judge_config_hash(a) != judge_config_hash(c)


def test_a_changed_heuristic_algorithm_changes_the_judge_config_hash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The heuristic has no prompt; its ALGORITHM_VERSION is what a change bumps, so it
    # must re-judge replayed turns instead of reusing the old heuristic's verdicts.
    settings = load_settings()  # the default judge is the heuristic
    before = judge_config_hash(settings)
    monkeypatch.setattr(heuristic_judge, "ALGORITHM_VERSION", "heuristic-v999")
    assert judge_config_hash(settings) != before
    monkeypatch.undo()
    assert judge_config_hash(settings) == before


def test_the_shipped_sampling_defaults_are_a_tenth_under_an_hourly_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A monitor that may call a paid API samples and caps its calls by default.
    monkeypatch.delenv("CASEWATCH_SAMPLING")  # the suite judges everything (tests/conftest.py)
    sampling = load_settings().sampling
    assert sampling.default_rate == 0.1
    assert sampling.budget_calls_per_hour == 1000
    assert sampling.budget_usd_per_hour == 5.0


def test_group_instance_id_from_the_environment_and_empty_means_dynamic(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A chart passes the pod name; an unset value (empty string) keeps dynamic membership.
    assert load_settings().kafka.group_instance_id is None
    monkeypatch.setenv("CASEWATCH_KAFKA__GROUP_INSTANCE_ID", "casewatch-0")
    assert load_settings().kafka.group_instance_id == "casewatch-0"
    monkeypatch.setenv("CASEWATCH_KAFKA__GROUP_INSTANCE_ID", "")
    assert load_settings().kafka.group_instance_id is None


@pytest.mark.parametrize("bad", ["pod 0", "pod/0", ".", "..", "x" * 250])
def test_a_group_instance_id_kafka_would_refuse_is_a_config_error(bad: str) -> None:
    with pytest.raises(ConfigError, match=r"kafka(\.|: .*)group_instance_id"):
        load_settings(kafka={"group_instance_id": bad})


# ---------------------------------------------------------------- drift


def test_drift_defaults_and_a_pinned_reference_period() -> None:
    s = load_settings(
        drift={
            "reference_period": {"start": "2026-03-01T00:00:00", "end": "2026-03-08T00:00:00Z"},
            "labels": ["channel"],
        }
    )
    assert s.drift.recent_window_seconds == 3600
    assert s.drift.reference_window_seconds == 7 * 86400
    assert s.drift.reference_period is not None
    start, end = s.drift.reference_period.bounds()
    assert start.tzinfo is not None and (end - start).days == 7  # naive start taken as UTC


@pytest.mark.parametrize(
    ("drift", "needle"),
    [
        (
            {"reference_period": {"start": "2026-03-08T00:00:00Z", "end": "2026-03-01T00:00:00Z"}},
            r"end \(2026-03-01T00:00:00\+00:00\) must be after start",
        ),
        ({"reference_period": {"start": "2026-03-01T00:00:00Z"}}, "reference_period.end"),
        ({"alpha": 1.5}, r"drift\.alpha"),
        ({"min_turns": 1}, r"drift\.min_turns"),
        ({"labels": ["bad key!"]}, "is not a label key"),
        ({"labels": ["a-b", "a_b"]}, "map to the same signal input_label_a_b"),
        ({"min_effect": {"ks_d": 2}}, r"drift\.min_effect\.ks_d"),
    ],
)
def test_bad_drift_config_is_refused_with_a_clear_message(
    drift: dict[str, object], needle: str
) -> None:
    with pytest.raises(ConfigError, match=needle):
        load_settings(drift=drift)


def test_repartition_adds_each_otlp_topics_repartition_topic_to_the_group() -> None:
    settings = load_settings(
        None,
        kafka={"topics": ["turns", {"name": "spans", "format": "otlp_json"}]},
        assembly={"repartition": True},
    )
    assert settings.kafka.topic_formats == {
        "turns": "casewatch",
        "spans": "otlp_json",
        "spans.casewatch-by-trace": "otlp_proto",
    }
    off = load_settings(None, kafka={"topics": [{"name": "spans", "format": "otlp_json"}]})
    assert off.kafka.topic_names == ["spans"]


def test_a_repartition_topic_name_past_kafkas_limit_is_refused() -> None:
    with pytest.raises(ConfigError, match="repartition_suffix"):
        load_settings(
            None,
            kafka={"topics": [{"name": "s" * 240, "format": "otlp_proto"}]},
            assembly={"repartition": True},
        )


def test_settle_seconds_must_be_below_idle_seconds() -> None:
    with pytest.raises(ConfigError, match="settle_seconds"):
        load_settings(None, assembly={"settle_seconds": 30, "idle_seconds": 30})
