"""The ``redaction`` settings section: defaults, refusals naming the key, the key's sources."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.config.settings import load_settings
from monitor.errors import ConfigError


def test_defaults_redact_for_judges_storage_and_dead_letters_but_keep_network_ids() -> None:
    red = load_settings().redaction
    assert red.enabled and red.before_judging and red.stored_turns and red.dead_letter
    assert red.active
    policy = red.policy()
    assert policy.emails and policy.phones and policy.cards and policy.ibans and policy.secrets
    assert not policy.ips and not policy.hostnames
    assert policy.key is None


def test_a_pattern_that_does_not_compile_is_refused_naming_its_key() -> None:
    with pytest.raises(ConfigError, match=r"redaction\.patterns\.member_id: .*does not compile"):
        load_settings(redaction={"patterns": {"member_id": r"MBR-(\d+"}})


def test_a_pattern_matching_nothing_at_all_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"redaction\.patterns\.blank: .*empty string"):
        load_settings(redaction={"patterns": {"blank": r"\d*"}})


def test_pattern_names_are_bounded_label_values_distinct_from_builtins() -> None:
    with pytest.raises(ConfigError, match=r"redaction\.patterns"):
        load_settings(redaction={"patterns": {"Member ID": "x"}})
    with pytest.raises(ConfigError, match="email name built-in kinds"):
        load_settings(redaction={"patterns": {"email": "x"}})


def test_an_unknown_phone_region_is_refused() -> None:
    with pytest.raises(ConfigError, match="phone_region"):
        load_settings(redaction={"phone_region": "XX"})


def test_raw_storage_with_redacted_judging_is_refused_not_ignored() -> None:
    with pytest.raises(ConfigError, match="stored_turns"):
        load_settings(redaction={"stored_turns": False})
    red = load_settings(redaction={"stored_turns": False, "before_judging": False}).redaction
    assert not red.active


def test_the_key_comes_from_the_environment_or_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PSEUDO_KEY", "k" * 32)
    settings = load_settings(redaction={"key_env": "PSEUDO_KEY"})
    assert settings.redaction.policy().key == b"k" * 32
    assert "k" * 32 in settings.secret_values()  # kept out of the logs
    key_file = tmp_path / "key"
    key_file.write_text("f" * 32 + "\n")
    assert load_settings(redaction={"key_file": str(key_file)}).redaction.policy().key == (
        b"f" * 32
    )
    with pytest.raises(ConfigError, match="MISSING_KEY is not set"):
        load_settings(redaction={"key_env": "MISSING_KEY"}).redaction.policy()
    monkeypatch.setenv("SHORT_KEY", "short")
    with pytest.raises(ConfigError, match="at least 16 bytes"):
        load_settings(redaction={"key_env": "SHORT_KEY"}).redaction.policy()
