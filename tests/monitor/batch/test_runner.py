import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from monitor.batch.runner import run_batch
from monitor.batch.verdict_files import default_rejects_path, read_verdicts
from monitor.config.settings import load_settings
from monitor.judging.evaluator import Evaluator, build_evaluator
from monitor.redaction.config import RedactionConfig
from monitor.schema.turn import TurnEvent, Verdict
from tests.fake_judge_server import FakeJudgeServer, malformed
from tests.fixtures.judge_server import fake_judge_config
from tests.support.turn_lines import dump, jsonl, turn, write_lines


@pytest.fixture
def heuristic() -> Iterator[Evaluator]:
    evaluator = build_evaluator(load_settings(), concurrency=8)  # run_batch's default
    yield evaluator
    evaluator.close()


def test_bad_lines_are_rejected_and_the_rest_judged(
    tmp_path: Path, heuristic: Evaluator, capsys: pytest.CaptureFixture[str]
) -> None:
    src = write_lines(
        tmp_path / "in.jsonl",
        [
            dump(turn("e1", "c1", 0)),
            b"{not json",
            dump(turn("e2", "c1", 1)),
            b"",  # blank lines are not records
            json.dumps({"event_id": "e9", "turn_index": -1}).encode(),
            b'{"event_id": "\xff\xfe"}',
            dump(turn("e3", "c2", 0)),
            dump(turn("e1", "c1", 0)),  # replayed: judged once
        ],
    )
    out, compact = tmp_path / "out.jsonl", tmp_path / "compact.jsonl"
    summary = run_batch(src, out, compact, heuristic, concurrency=2)

    assert (summary.read, summary.judged, summary.rejected) == (7, 3, 3)
    assert (summary.duplicates, summary.skipped_existing, summary.judge_failed) == (1, 0, 0)
    tally = summary.per_assistant["helpbot@1.4"]
    assert tally.n == 3 and tally.mean_s_final is not None and sum(tally.bands.values()) == 3

    verdicts = [Verdict.model_validate(d) for d in jsonl(out)]
    assert sorted(v.event_id for v in verdicts) == ["e1", "e2", "e3"]
    assert all(v.status == "ok" and v.judgments for v in verdicts)
    assert all(v.judge_config_hash == heuristic.config_hash for v in verdicts)
    rows = jsonl(compact)
    assert sorted(r["event_id"] for r in rows) == ["e1", "e2", "e3"]
    assert rows[0]["case_subject"] == "VPN error 809" and rows[0]["context_ids"] == ["kb-1"]

    rejects = jsonl(default_rejects_path(out))
    assert [(r["line"], r["reason"]) for r in rejects] == [
        (2, "not_json"),
        (5, "schema"),
        (6, "bad_utf8"),
    ]
    assert "turn_index" in rejects[1]["detail"]
    assert rejects[0]["raw"] == "{not json"
    err = capsys.readouterr().err
    assert "line 2: rejected (not_json)" in err and "line 6: rejected (bad_utf8)" in err


def test_resume_skips_judged_turns_and_appends_nothing_twice(
    tmp_path: Path, heuristic: Evaluator
) -> None:
    src = write_lines(
        tmp_path / "in.jsonl", [dump(turn(f"e{i}", f"c{i % 2}", i)) for i in range(4)]
    )
    out, compact = tmp_path / "out.jsonl", tmp_path / "compact.jsonl"
    assert run_batch(src, out, compact, heuristic, concurrency=3).judged == 4

    again = run_batch(src, out, compact, heuristic, concurrency=3)
    assert (again.read, again.skipped_existing, again.judged) == (4, 4, 0)
    assert len(jsonl(out)) == 4 and len(jsonl(compact)) == 4

    with src.open("ab") as f:
        f.write(dump(turn("e4", "c0", 4)) + b"\n")
    more = run_batch(src, out, compact, heuristic, concurrency=3)
    assert (more.skipped_existing, more.judged) == (4, 1)
    ids = [d["event_id"] for d in jsonl(out)]
    assert sorted(ids) == ["e0", "e1", "e2", "e3", "e4"]
    assert [d["event_id"] for d in jsonl(compact)].count("e4") == 1


def test_resume_cuts_a_line_left_half_written_by_a_crash(
    tmp_path: Path, heuristic: Evaluator
) -> None:
    src = write_lines(tmp_path / "in.jsonl", [dump(turn("e1")), dump(turn("e2"))])
    out = tmp_path / "out.jsonl"
    run_batch(src, out, None, heuristic)
    lines = out.read_bytes().splitlines(keepends=True)
    out.write_bytes(lines[0] + lines[1][:40])  # the crash: e2's line cut mid-write

    summary = run_batch(src, out, None, heuristic)
    assert (summary.skipped_existing, summary.judged) == (1, 1)
    assert sorted(d["event_id"] for d in jsonl(out)) == ["e1", "e2"]


def test_a_new_judge_configuration_judges_again(tmp_path: Path, heuristic: Evaluator) -> None:
    src = write_lines(tmp_path / "in.jsonl", [dump(turn("e1"))])
    out = tmp_path / "out.jsonl"
    run_batch(src, out, None, heuristic)
    uniform = build_evaluator(load_settings(weight_profile="uniform"), concurrency=8)
    assert uniform.config_hash != heuristic.config_hash
    assert run_batch(src, out, None, uniform).judged == 1
    loaded = read_verdicts(out)
    assert loaded.superseded == 1
    assert [v.weight_profile for v in loaded.verdicts] == ["uniform"]  # the newest wins


def test_judge_failed_turns_are_written_not_dropped(
    tmp_path: Path, fake_judge: FakeJudgeServer
) -> None:
    fake_judge.responder = lambda request: malformed()
    settings = load_settings(
        judge="fake",
        judges={"fake": fake_judge_config(fake_judge, output_retries=1)},
    )
    evaluator = build_evaluator(settings, concurrency=3)
    src = write_lines(tmp_path / "in.jsonl", [dump(turn(f"e{i}")) for i in range(3)])
    out, compact = tmp_path / "out.jsonl", tmp_path / "compact.jsonl"
    try:
        summary = run_batch(src, out, compact, evaluator, concurrency=3)
    finally:
        evaluator.close()

    assert (summary.judged, summary.judge_failed) == (3, 3)
    assert summary.per_assistant["helpbot@1.4"].mean_s_final is None
    verdicts = [Verdict.model_validate(d) for d in jsonl(out)]
    assert {(v.status, v.failure_reason) for v in verdicts} == {("judge_failed", "invalid_output")}
    judgment = verdicts[0].judgments[0]
    assert judgment.attempts == 2 and judgment.raw_output  # the audit trail is kept
    assert {r["status"] for r in jsonl(compact)} == {"judge_failed"}


class _Tracking:
    """The real evaluator, observed: how many turns are being judged at once."""

    def __init__(self, inner: Evaluator, crash_on: str = "") -> None:
        self.inner = inner
        self.crash_on = crash_on
        self.in_flight = self.max_in_flight = 0
        self._lock = threading.Lock()

    @property
    def config_hash(self) -> str:
        return self.inner.config_hash

    @property
    def weight_profile(self) -> str:
        return self.inner.weight_profile

    def evaluate(self, turn: TurnEvent) -> Verdict:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if turn.event_id == self.crash_on:
                raise RuntimeError("evaluator bug")
            return self.inner.evaluate(turn)
        finally:
            with self._lock:
                self.in_flight -= 1

    def close(self) -> None:
        self.inner.close()


def test_turns_are_judged_concurrently_up_to_the_limit(tmp_path: Path) -> None:
    with FakeJudgeServer(latency=0.05) as server:
        settings = load_settings(judge="fake", judges={"fake": fake_judge_config(server)})
        tracking = _Tracking(build_evaluator(settings, concurrency=4))
        src = write_lines(tmp_path / "in.jsonl", [dump(turn(f"e{i}")) for i in range(16)])
        try:
            summary = run_batch(src, tmp_path / "out.jsonl", None, tracking, concurrency=4)
        finally:
            tracking.close()
    assert summary.judged == 16 and summary.judge_failed == 0
    assert tracking.max_in_flight == 4


def test_an_evaluator_crash_is_recorded_as_internal(tmp_path: Path, heuristic: Evaluator) -> None:
    src = write_lines(tmp_path / "in.jsonl", [dump(turn("e1")), dump(turn("e2"))])
    out = tmp_path / "out.jsonl"
    summary = run_batch(src, out, None, _Tracking(heuristic, crash_on="e2"))
    assert (summary.judged, summary.judge_failed) == (2, 1)
    failed = [d for d in jsonl(out) if d["status"] == "judge_failed"]
    assert [(d["event_id"], d["failure_reason"]) for d in failed] == [("e2", "internal")]


def test_concurrency_must_be_positive(tmp_path: Path, heuristic: Evaluator) -> None:
    with pytest.raises(ValueError, match="concurrency"):
        run_batch(tmp_path / "in.jsonl", tmp_path / "out.jsonl", None, heuristic, concurrency=0)


def test_read_verdicts_skips_unreadable_lines(tmp_path: Path, heuristic: Evaluator) -> None:
    src = write_lines(tmp_path / "in.jsonl", [dump(turn("e1"))])
    out = tmp_path / "out.jsonl"
    run_batch(src, out, None, heuristic)
    with out.open("a") as f:
        f.write('{"event_id": "broken"}\n')
    loaded = read_verdicts(out)
    assert [v.event_id for v in loaded.verdicts] == ["e1"]
    assert [n for n, _ in loaded.bad_lines] == [2]


def test_a_turn_too_large_to_redact_is_rejected_never_judged_raw(
    tmp_path: Path, heuristic: Evaluator
) -> None:
    src = write_lines(
        tmp_path / "in.jsonl",
        [dump(turn("e1")), dump(turn("e2", answer="Open UDP 500 and 4500. " * 40))],
    )
    out = tmp_path / "out.jsonl"
    redaction = RedactionConfig(max_chars=400)
    summary = run_batch(src, out, None, heuristic, redaction=redaction)
    assert (summary.read, summary.judged, summary.rejected) == (2, 1, 1)
    assert [d["event_id"] for d in jsonl(out)] == ["e1"]
    rejects = jsonl(default_rejects_path(out))
    assert [(r["line"], r["reason"]) for r in rejects] == [(2, "redaction_too_large")]


def test_a_replayed_line_already_in_out_is_skipped_each_time_and_tallied_once(
    tmp_path: Path, heuristic: Evaluator
) -> None:
    src = write_lines(tmp_path / "in.jsonl", [dump(turn("e1")), dump(turn("e2"))])
    out = tmp_path / "out.jsonl"
    run_batch(src, out, None, heuristic)
    with src.open("ab") as f:
        f.write(dump(turn("e1")) + b"\n" + dump(turn("e3")) + b"\n" + dump(turn("e3")) + b"\n")
    again = run_batch(src, out, None, heuristic)
    assert (again.read, again.skipped_existing, again.judged, again.duplicates) == (5, 3, 1, 1)
    assert again.per_assistant["helpbot@1.4"].n == 3  # e1, e2 and e3, each once
