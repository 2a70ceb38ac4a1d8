"""`casewatch run --file` as a new user runs it first: three turns of their own OTel traces at
the shipped sampling defaults. The run says what it read and skipped, and why nothing was
judged, naming the setting to change."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from consumers.tansu import free_port
from monitor.config.sampling import DEFAULT_SAMPLING_RATE
from monitor.sampling.sampler import sample_point
from monitor.stream.file_state import file_sidecars
from tests.fake_judge_server import FakeJudgeServer, content
from tests.support.daemon_process import daemon_process, write_config
from tests.support.rag_traces import ANSWER, QUESTIONS, rag_traces

pytestmark = pytest.mark.integration

# Conversations the shipped rate (a tenth of them) does not sample.
CONVERSATIONS = ("conv-router", "conv-third", "conv-printer")


def _log_events(log: Path) -> list[dict[str, Any]]:
    events = []
    for line in log.read_text().splitlines():
        if line.startswith("{"):
            events.append(json.loads(line))
    return events


def test_a_first_run_at_the_default_sampling_says_nothing_was_judged_and_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The suite judges every turn (tests/conftest.py); this run has the shipped defaults.
    monkeypatch.delenv("CASEWATCH_SAMPLING", raising=False)
    assert all(sample_point(c) >= DEFAULT_SAMPLING_RATE for c in CONVERSATIONS)
    questions = [
        {**QUESTIONS[i % len(QUESTIONS)], "conversation": c} for i, c in enumerate(CONVERSATIONS)
    ]
    with FakeJudgeServer() as model:
        model.responder = lambda _request: content(ANSWER)
        messages = rag_traces(
            tmp_path, "genai", model.base_url, "otlp_json", questions, "span_only"
        )
    traces = tmp_path / "traces.jsonl"
    traces.write_bytes(b"".join(value + b"\n" for _key, value in messages))
    db = tmp_path / "otel.db"
    config = write_config(
        tmp_path, {"storage": {"url": f"sqlite:///{db}"}, "server": {"port": free_port()}}
    )
    log = tmp_path / "run.log"
    with daemon_process(config, log, "--file", str(traces), "--format", "otlp_json") as proc:
        assert proc.wait(120) == 0, proc.tail()

    events = _log_events(log)
    (start,) = [e for e in events if e["event"] == "run starting"]
    assert start["sampling_rate"] == DEFAULT_SAMPLING_RATE
    assert start["budget"] == "1000 judge calls/h, 5 USD/h"
    assert start["database"] == f"sqlite:///{db}"
    (finished,) = [e for e in events if e["event"] == "run finished"]
    assert finished["read"] == len(messages)
    assert finished["sampled"] == finished["judged"] == finished["judge_failed"] == 0
    assert finished["skipped_by_reason"] == {"not_sampled": 3}
    assert finished["dead_lettered"] == 0
    assert finished["dead_letters_to"].endswith(".dlq.jsonl")
    (warning,) = [e for e in events if e["event"].startswith("nothing was judged")]
    assert warning["level"] == "warning"
    assert warning["event"].startswith("nothing was judged: 3 turn(s) not sampled")
    assert "sampling.default_rate is 0.1" in warning["event"]
    assert "CASEWATCH_SAMPLING__DEFAULT_RATE=1.0" in warning["event"]
    offsets = file_sidecars(traces, f"sqlite:///{db}")[1]
    assert f"delete {offsets} (or use another --db) to read it again" in warning["event"]
    # The warning and the summary are the run's last words.
    assert events.index(warning) > events.index(finished)
