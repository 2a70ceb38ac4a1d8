"""docs/otel.md, "Without a Collector", run as written: examples/otel_without_collector.py's
spans, written to a file by its exporter and read by ``casewatch run --file`` (OTLP/JSON and
protobuf in base64), or sent to Kafka by its other exporter, become one judged turn per
attribute convention; the spans the page shows are the ones the example records; OTLP/JSON
read as protobuf is dead-lettered with a hint."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from consumers.otel.genai import CaseAttributes, turns_from_trace
from consumers.otel.otlp import Span, decode_spans
from consumers.tansu import EmbeddedBroker, create_topics, free_port
from tests.fixtures.broker import DLQ_SUFFIX
from tests.support.kafka import read_topic

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "otel_without_collector.py"
DOC = ROOT / "docs" / "otel.md"
BIN = Path(sys.executable).parent
CASE = CaseAttributes(subject=("support.case.subject",))
CASE_YAML = "assembly: {case_attributes: {subject: [support.case.subject]}}\n"


def _section() -> str:
    text = DOC.read_text()
    start = text.index("## Without a Collector\n")
    return text[start : text.index("\n## ", start + 1)]


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", _section(), flags=re.DOTALL)


def _shell(line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A documented line as a person runs it from the repository root: here from ``cwd``,
    with the checkout's paths made absolute."""
    line = line.replace(".venv/bin/", f"{BIN}/").replace("examples/", f"{ROOT}/examples/")
    return subprocess.run(  # noqa: S602 -- a documented command line
        line, shell=True, cwd=cwd, capture_output=True, text=True, timeout=240
    )


def _turn(db: Path, event_id: str) -> dict[str, Any]:
    done = _shell(f".venv/bin/casewatch inspect turn {event_id} --db {db} --json", db.parent)
    assert done.returncode == 0, done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def _turns(db: Path) -> dict[str, dict[str, Any]]:
    done = _shell(f".venv/bin/casewatch inspect turns --db {db} --json", db.parent)
    assert done.returncode == 0, done.stderr
    turns = {}
    for row in json.loads(done.stdout):
        turn = _turn(db, row["event_id"])
        turns[turn["conversation_id"]] = turn
    return turns


def _check_turns(turns: dict[str, dict[str, Any]]) -> None:
    """One judged turn per convention, each with the question, both documents, the answer
    and the case subject the example recorded."""
    assert set(turns) == {"conv-genai-1", "conv-openinference-1"}
    for turn in turns.values():
        assert turn["assistant"] == "acme-support" and turn["assistant_version"] == "2026.12"
        assert turn["query"].startswith("My nightly backup job fails with error E42")
        assert [c["id"] for c in turn["contexts"]] == ["kb-1042#1", "kb-1042#2"]
        assert [c["score"] for c in turn["contexts"]] == [0.91, 0.77]
        assert turn["answer"].startswith("Error E42 means the backup target is full.")
        assert turn["case"]["subject"] == "Nightly backup fails with E42"
        assert turn["verdict"] is not None and turn["verdict"]["status"] == "ok", turn["verdict"]
        assert turn["trace_id"] and turn["event_id"] == (
            f"otel-{turn['trace_id']}-{turn['span_id']}"
        )


def test_the_documented_file_recipe_judges_one_turn_per_convention(tmp_path: Path) -> None:
    (config,) = [b for b in _blocks("yaml") if b.startswith("# otel.yaml")]
    (tmp_path / "otel.yaml").write_text(config)
    (commands,) = [b for b in _blocks("sh") if "--out traces.jsonl" in b]
    for line in commands.strip().splitlines():
        done = _shell(line, tmp_path)
        assert done.returncode == 0, f"{line}\n{done.stderr}"
    _check_turns(_turns(tmp_path / "otel.db"))


def test_protobuf_lines_in_base64_are_read_with_format_otlp_proto(tmp_path: Path) -> None:
    (tmp_path / "otel.yaml").write_text("sampling: {default_rate: 1.0}\n" + CASE_YAML)
    lines = [
        ".venv/bin/python examples/otel_without_collector.py --out p.jsonl --encoding otlp_proto",
        ".venv/bin/casewatch run --file p.jsonl --format otlp_proto --db p.db --config otel.yaml",
    ]
    for line in lines:
        done = _shell(line, tmp_path)
        assert done.returncode == 0, f"{line}\n{done.stderr}"
    assert not (tmp_path / "p.jsonl").read_bytes().lstrip().startswith(b"{")
    _check_turns(_turns(tmp_path / "p.db"))


def test_otlp_json_read_as_protobuf_is_dead_lettered_with_a_hint(tmp_path: Path) -> None:
    (tmp_path / "otel.yaml").write_text("sampling: {default_rate: 1.0}\n")
    lines = [
        ".venv/bin/python examples/otel_without_collector.py --out t.jsonl",
        ".venv/bin/casewatch run --file t.jsonl --format otlp_proto --db t.db --config otel.yaml",
    ]
    for line in lines:
        done = _shell(line, tmp_path)
        assert done.returncode == 0, f"{line}\n{done.stderr}"
    (dlq,) = tmp_path.glob("t.db.t-*.dlq.jsonl")
    (record,) = [json.loads(x) for x in dlq.read_text().splitlines()]
    assert record["reason"] == "otlp_unreadable"
    assert "looks like JSON" in record["detail"] and "otlp_json" in record["detail"]


def _recorded(tmp_path: Path) -> list[Span]:
    out = tmp_path / "t.jsonl"
    done = _shell(f".venv/bin/python examples/otel_without_collector.py --out {out}", tmp_path)
    assert done.returncode == 0, done.stderr
    return [
        span
        for line in out.read_bytes().splitlines()
        for span in decode_spans(line, "otlp_json", 1 << 24)
    ]


def test_the_spans_the_page_shows_are_the_ones_the_example_records(tmp_path: Path) -> None:
    recorded = {s.name: dict(s.attributes) for s in _recorded(tmp_path)}
    shown = [span for block in _blocks("json") for span in json.loads(block)]
    assert len(shown) == len(recorded) == 6
    for span in shown:
        assert span["attributes"] == recorded[span["name"]], span["name"]
    genai = next(s for s in shown if s["name"].startswith("chat "))["attributes"]
    messages = json.loads(genai["gen_ai.input.messages"])  # a JSON string, in parts
    assert messages[-1]["role"] == "user" and messages[-1]["parts"][0]["type"] == "text"


@pytest.mark.integration
def test_the_kafka_exporter_writes_one_protobuf_message_per_trace_keyed_by_trace_id(
    tansu_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    topic = f"otlp_spans.example.{free_port()}"
    create_topics(tansu_broker.bootstrap, [topic], dlq_suffix=DLQ_SUFFIX)
    (command,) = [b.strip() for b in _blocks("sh") if "--kafka" in b]
    command = command.replace("127.0.0.1:9092", tansu_broker.bootstrap)
    done = _shell(command.replace("--topic otlp_spans", f"--topic {topic}"), tmp_path)
    assert done.returncode == 0, done.stderr
    records = read_topic(tansu_broker.bootstrap, topic, 2)
    assert len(records) == 2
    turns = []
    for record in records:
        spans = decode_spans(record.value, "otlp_proto", 1 << 24)
        assert {s.trace_id for s in spans} == {record.key.decode()}
        built, skipped = turns_from_trace(spans, CASE)
        assert skipped == []
        turns += built
    assert {t.conversation_id for t in turns} == {"conv-genai-1", "conv-openinference-1"}
    assert all(t.case.subject == "Nightly backup fails with E42" for t in turns)
    assert all(len(t.contexts) == 2 and t.answer.startswith("Error E42") for t in turns)
