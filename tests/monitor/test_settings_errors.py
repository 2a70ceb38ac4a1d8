"""Configuration errors say what to write: YAML syntax errors name file, line and
column on one line; a list where a mapping belongs, an environment value in the wrong form and
an API key in a config file each get a message naming the fix. Through the CLI: exit 2, no
traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from monitor.cli import main
from monitor.errors import ConfigError
from monitor.settings import load_settings


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "casewatch.yaml"
    path.write_text(text)
    return path


def test_a_yaml_syntax_error_names_file_line_and_column(tmp_path: Path) -> None:
    path = _file(tmp_path, "kafka:\n  topics: [a\n  group_id: x\n")
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    message = str(info.value)
    assert message.startswith(f"{path}:3:11: YAML syntax error: ")
    assert "\n" not in message


def test_a_list_at_the_top_says_a_mapping_of_sections_is_expected(tmp_path: Path) -> None:
    path = _file(tmp_path, "- kafka\n- storage\n")
    with pytest.raises(ConfigError, match="top level must be a mapping of sections"):
        load_settings(path)


def test_a_list_where_a_section_belongs_says_what_to_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An environment value for the section would win over the file's list (a run with the
    # broker quirks forced off sets one: tests/fixtures/broker.py).
    monkeypatch.delenv("CASEWATCH_KAFKA__BROKER_QUIRKS", raising=False)
    path = _file(tmp_path, "kafka:\n  - bootstrap_servers\n")
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    assert "kafka: expected a mapping of settings" in str(info.value)
    assert "got a list" in str(info.value)


def test_an_environment_list_in_the_wrong_form_says_a_json_list_is_expected(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CASEWATCH_KAFKA__BOOTSTRAP_SERVERS", "host:9092")
    with pytest.raises(ConfigError) as info:
        load_settings()
    message = str(info.value)
    assert "CASEWATCH_KAFKA__BOOTSTRAP_SERVERS: expected a JSON list" in message
    assert """CASEWATCH_KAFKA__BOOTSTRAP_SERVERS='["host:9092"]'""" in message


def test_the_json_list_form_is_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CASEWATCH_KAFKA__BOOTSTRAP_SERVERS", '["a:9092", "b:9092"]')
    assert load_settings().kafka.bootstrap_servers == ["a:9092", "b:9092"]


def test_an_api_key_in_a_config_file_is_refused_with_the_alternatives(tmp_path: Path) -> None:
    path = _file(tmp_path, "judges:\n  j:\n    model: m\n    api_key: sk-live-123\n")
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    message = str(info.value)
    assert "judges.j.api_key" in message and "api_key_env" in message
    assert "api_key_file" in message
    assert "sk-live-123" not in message


@pytest.mark.parametrize(
    "command",
    [
        ["db", "upgrade"],
        ["drift"],
        ["judge", "{turns}", "--out", "{turns}.out"],
        ["run", "--file", "{turns}"],
    ],
)
def test_every_command_reports_a_yaml_syntax_error_on_one_line_with_exit_2(
    tmp_path: Path, command: list[str]
) -> None:
    path = _file(tmp_path, "storage: {url: [\n")
    turns = tmp_path / "turns.jsonl"
    turns.write_text("")
    args = [a.replace("{turns}", str(turns)) for a in command]
    result = CliRunner().invoke(main, [*args, "--config", str(path)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and f"{path}:" in lines[0] and "YAML syntax error" in lines[0]
