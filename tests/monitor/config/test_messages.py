"""Configuration errors say what to write: YAML syntax errors name file, line and
column on one line; a list where a mapping belongs, an environment value in the wrong form and
an API key in a config file each get a message naming the fix. Through the CLI: exit 2, no
traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from monitor.cli import main
from monitor.config.settings import load_settings
from monitor.errors import ConfigError


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


def test_an_unknown_key_names_the_closest_known_one(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        "kafka:\n  bootstrap_server: ['x:9092']\nsampleing: {}\njudges:\n  j:\n    modle: m\n",
    )
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    message = str(info.value)
    assert "kafka.bootstrap_server: unknown key; did you mean bootstrap_servers?" in message
    assert "sampleing: unknown key; did you mean sampling" in message
    assert "judges.j.modle: unknown key; did you mean model?" in message  # inside a dict
    assert "Extra inputs are not permitted" not in message


def test_an_unknown_key_with_nothing_close_lists_the_section(tmp_path: Path) -> None:
    path = _file(tmp_path, "sampling:\n  zzz: 1\n")
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    assert "sampling.zzz: unknown key; known here: " in str(info.value)
    assert "default_rate" in str(info.value)


def test_a_bad_environment_value_is_reported_under_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CASEWATCH_DAEMON__CONCURRENCY", "eight")
    with pytest.raises(ConfigError) as info:
        load_settings()
    line = str(info.value).splitlines()[1].strip()
    assert line.startswith("CASEWATCH_DAEMON__CONCURRENCY (setting daemon.concurrency): ")
    assert "valid integer" in line


def test_the_same_bad_value_from_the_file_is_reported_under_its_setting(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(_file(tmp_path, "daemon:\n  concurrency: eight\n"))
    assert "\n  daemon.concurrency: Input should be a valid integer" in str(info.value)
    assert "CASEWATCH_" not in str(info.value)


def test_a_mapping_error_reads_without_pydantics_wrapping(tmp_path: Path) -> None:
    mapping = "".join(
        f"  {field}: {expression}\n"
        for field, expression in [
            ("event_id", "id"),
            ("conversation_id", "c"),
            ("timestamp", "ts"),
            ("assistant.name", "\"'bot'\""),
            ("query", "q"),
            ("answer", "'reply.['"),
        ]
    )
    path = _file(tmp_path, "kafka:\n  topics: [{name: t, format: mapped}]\nmapping:\n" + mapping)
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    message = str(info.value)
    assert "\n  mapping.answer: 'reply.[' is not a JMESPath expression" in message
    assert "Value error" not in message and "(root)" not in message


def test_a_section_variable_is_named_only_for_the_keys_it_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CASEWATCH_SAMPLING", '{"default_rate": 0.5, "zzz": 1}')
    with pytest.raises(ConfigError) as info:
        load_settings(_file(tmp_path, "sampling:\n  yyy: 1\n"))
    message = str(info.value)
    assert "CASEWATCH_SAMPLING (setting sampling.zzz): unknown key" in message
    assert "\n  sampling.yyy: unknown key" in message  # from the file, merged with the JSON
