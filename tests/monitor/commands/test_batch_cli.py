import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from monitor.cli import main
from monitor.commands.batch import agreement_command, compare_command, judge_command
from tests.support.turn_lines import dump, jsonl, stable_and_canary, write_lines


def _run(command: Any, args: list[str]) -> Result:
    return CliRunner().invoke(command, [str(a) for a in args])


def _judge(src: Path, out: Path, *extra: str) -> dict[str, Any]:
    result = _run(judge_command, [src, "--out", out, "--no-progress", "--json", *extra])
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def test_commands_are_registered() -> None:
    assert {"judge", "compare", "agreement"} <= set(main.commands)


def test_judge_prints_the_summary_table(tmp_path: Path) -> None:
    src, _ = stable_and_canary(tmp_path, conversations=2)
    out, compact = tmp_path / "out.jsonl", tmp_path / "compact.jsonl"
    result = _run(judge_command, [src, "--out", out, "--compact", compact, "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "judged 4" in result.stdout
    assert "helpbot@1.4" in result.stdout and "mean S_final" in result.stdout
    assert len(jsonl(out)) == 4 and len(jsonl(compact)) == 4


def test_judge_json_summary_and_resume(tmp_path: Path) -> None:
    src, _ = stable_and_canary(tmp_path, conversations=2)
    out = tmp_path / "out.jsonl"
    first = _judge(src, out, "--concurrency", "2")
    assert (first["read"], first["judged"], first["rejected"]) == (4, 4, 0)
    assert first["per_assistant"]["helpbot@1.4"]["n"] == 4
    again = _judge(src, out)
    assert (again["judged"], again["skipped_existing"]) == (0, 4)


def test_missing_input_exits_2_with_a_message(tmp_path: Path) -> None:
    result = _run(judge_command, [tmp_path / "nope.jsonl", "--out", tmp_path / "out.jsonl"])
    assert result.exit_code == 2
    assert "nope.jsonl" in result.output and "does not exist" in result.output
    assert not (tmp_path / "out.jsonl").exists()


def test_bad_config_exits_2_naming_the_field(tmp_path: Path) -> None:
    src, _ = stable_and_canary(tmp_path, conversations=1)
    config = tmp_path / "casewatch.yaml"
    config.write_text("daemon:\n  concurrency: 0\n")
    result = _run(judge_command, [src, "--out", tmp_path / "o.jsonl", "--config", config])
    assert result.exit_code == 2
    assert "daemon.concurrency" in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--judge", "nope"], "judge 'nope' is not configured"),
        (["--config", "missing.yaml"], "does not exist"),
    ],
)
def test_config_errors_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    src, _ = stable_and_canary(tmp_path, conversations=1)
    result = _run(judge_command, [src, "--out", tmp_path / "o.jsonl", *args])
    assert result.exit_code == 2
    assert message in result.stderr


def test_missing_output_directory_exits_2(tmp_path: Path) -> None:
    src, _ = stable_and_canary(tmp_path, conversations=1)
    result = _run(judge_command, [src, "--out", tmp_path / "no" / "such" / "dir" / "o.jsonl"])
    assert result.exit_code == 2
    assert "output directory" in result.stderr


def test_compare_stable_and_canary(tmp_path: Path) -> None:
    stable, canary = stable_and_canary(tmp_path)
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _judge(stable, a)
    _judge(canary, b)

    table = _run(compare_command, [a, b])
    assert table.exit_code == 0, table.output
    assert "paired conversations: 6" in table.stdout
    assert "Wilcoxon p" in table.stdout and "hallucination" in table.stdout

    as_json = _run(compare_command, [a, b, "--json", "--weight-profile", "uniform"])
    assert as_json.exit_code == 0, as_json.output
    doc = json.loads(as_json.stdout)
    assert doc["n_pairs"] == 6 and doc["delta"] == "B - A"
    assert doc["weight_profile"] == "uniform"
    assert doc["assistants_b"] == ["helpbot@1.5-canary"]


def test_compare_refuses_a_file_without_verdicts(tmp_path: Path) -> None:
    stable, _ = stable_and_canary(tmp_path, conversations=1)  # turn events, not verdicts
    result = _run(compare_command, [stable, stable])
    assert result.exit_code == 2
    assert "holds turn events, not verdicts" in result.stderr
    other = write_lines(tmp_path / "other.jsonl", [b'{"something": "else"}'])
    result = _run(compare_command, [other, other])
    assert result.exit_code == 2
    assert "holds no verdicts" in result.stderr


def test_agreement_with_labels_and_another_judge(tmp_path: Path) -> None:
    stable, _ = stable_and_canary(tmp_path)
    judged = tmp_path / "judged.jsonl"
    _judge(stable, judged)
    # Humans who agree with the judge on every metric they labelled.
    rows = jsonl(judged)
    labels = write_lines(
        tmp_path / "labels.jsonl",
        [
            dump(
                {
                    "event_id": r["event_id"],
                    "labels": {"hallucination": r["metric_bands"]["hallucination"]},
                }
            )
            for r in rows
        ],
    )
    other = tmp_path / "other.jsonl"
    _judge(stable, other, "--config", _uniform_config(tmp_path))

    table = _run(agreement_command, [judged, "--labels", labels, "--other", other])
    assert table.exit_code == 0, table.output
    assert "judge vs human" in table.stdout and "judge vs judge" in table.stdout

    result = _run(agreement_command, [judged, "--labels", labels, "--other", other, "--json"])
    doc = json.loads(result.stdout)
    human = doc["human"]["metrics"]["hallucination"]
    assert human["n"] == len(rows) and human["accuracy"] == 1.0
    assert doc["judges"]["shared"] == len(rows)


def _uniform_config(tmp_path: Path) -> Path:
    config = tmp_path / "uniform.yaml"
    config.write_text("weight_profile: uniform\n")
    return config


def test_agreement_needs_labels_or_another_judge(tmp_path: Path) -> None:
    stable, _ = stable_and_canary(tmp_path, conversations=1)
    judged = tmp_path / "judged.jsonl"
    _judge(stable, judged)
    result = _run(agreement_command, [judged])
    assert result.exit_code == 2
    assert "--labels" in result.stderr


def test_agreement_names_a_bad_label_line(tmp_path: Path) -> None:
    stable, _ = stable_and_canary(tmp_path, conversations=1)
    judged = tmp_path / "judged.jsonl"
    _judge(stable, judged)
    labels = write_lines(tmp_path / "labels.jsonl", [b'{"event_id": "s-0-0", "labels": []}'])
    result = _run(agreement_command, [judged, "--labels", labels])
    assert result.exit_code == 2
    assert "line 1" in result.stderr


def test_compare_on_raw_turn_files_says_at_once_it_wants_judged_output(tmp_path: Path) -> None:
    """The examples' turns given to `compare` (which reads `casewatch judge --out` files): one
    line naming the file and the command to run first, not one complaint per line."""
    from monitor.cli import main

    turns = Path(__file__).resolve().parents[3] / "examples" / "turns.jsonl"
    result = CliRunner().invoke(main, ["compare", str(turns), str(turns)])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert "holds turn events, not verdicts" in lines[0]
    assert f"casewatch judge {turns} --out judged.jsonl" in lines[0]


def _judge_process(src: Path, out: Path) -> Any:
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-m", "monitor.cli", "judge", str(src), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_a_file_where_every_line_is_rejected_exits_1_each_rejection_said_once(
    tmp_path: Path,
) -> None:
    src = tmp_path / "bad.jsonl"
    src.write_text('{"event_id": "a"}\nnot json\n{"query": "q"}\n', encoding="utf-8")
    result = _judge_process(src, tmp_path / "out.jsonl")
    assert result.returncode == 1, result.stderr
    assert "rejected 3" in result.stdout
    assert "nothing was judged" in result.stderr
    for line in (1, 2, 3):  # counted from 1, each once
        assert result.stderr.count(f"line {line}: rejected") == 1, result.stderr
    assert "dead-lettered" not in result.stderr  # no second, machine-shaped copy
    assert "line 0" not in result.stderr and '"offset": 0' not in result.stderr


def test_a_file_with_one_judgeable_line_still_exits_0(tmp_path: Path) -> None:
    src, _ = stable_and_canary(tmp_path, conversations=1)
    with src.open("a", encoding="utf-8") as fh:
        fh.write("not json\n")
    result = _judge_process(src, tmp_path / "out.jsonl")
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("rejected (not_json)") == 1
