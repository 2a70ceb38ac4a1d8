"""The commit step with the real OffsetTracker and the real file source's committer."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from prometheus_client import CollectorRegistry

from consumers.file_source import FILE_TP, FileTurnSource
from consumers.offsets import OffsetTracker
from consumers.records import TopicPartition
from monitor.errors import BrokerError
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import ManualClock
from monitor.stream.recorder import StreamRecorder
from monitor.stream.steps.commit import FINAL_COMMIT_MIN_S, CommitStep
from tests.monitor.stream.steps.helpers import env


class _Committer:
    """Records commits; ``fail`` makes it refuse them like a broker mid-rebalance."""

    def __init__(self) -> None:
        self.commits: list[dict[TopicPartition, int]] = []
        self.timeouts: list[float | None] = []
        self.fail = False

    def commit(self, offsets: Mapping[TopicPartition, int], timeout_s: float | None = None) -> None:
        self.timeouts.append(timeout_s)
        if self.fail:
            raise BrokerError("rebalance in progress")
        self.commits.append(dict(offsets))


def _setup(interval: float = 1.0) -> tuple[CommitStep, OffsetTracker, _Committer, ManualClock]:
    tracker = OffsetTracker()
    committer = _Committer()
    clock = ManualClock()
    step = CommitStep(
        committer, tracker, StreamRecorder(Metrics(CollectorRegistry())), clock, interval
    )
    return step, tracker, committer, clock


def test_commits_only_below_unfinished_work() -> None:
    step, tracker, committer, _ = _setup()
    for off in range(4):
        tracker.track(FILE_TP, off)
    step.submit(env(None, offset=0, tp=FILE_TP))
    step.submit(env(None, offset=2, tp=FILE_TP))  # 1 still in flight
    step.poll()
    assert committer.commits == [{FILE_TP: 1}]


def test_commits_are_throttled_and_forced_on_join() -> None:
    step, tracker, committer, clock = _setup(interval=5.0)
    for off in range(3):
        tracker.track(FILE_TP, off)
    step.submit(env(None, offset=0, tp=FILE_TP))
    step.poll()
    step.submit(env(None, offset=1, tp=FILE_TP))
    step.poll()  # within the interval: no commit
    assert committer.commits == [{FILE_TP: 1}]
    clock.advance(5.0)
    step.poll()
    assert committer.commits[-1] == {FILE_TP: 2}
    step.submit(env(None, offset=2, tp=FILE_TP))
    step.join(0)
    assert committer.commits[-1] == {FILE_TP: 3}


def test_a_refused_commit_is_retried_and_counted() -> None:
    tracker = OffsetTracker()
    committer = _Committer()
    registry = CollectorRegistry()
    clock = ManualClock()
    step = CommitStep(committer, tracker, StreamRecorder(Metrics(registry)), clock, 1.0)
    tracker.track(FILE_TP, 0)
    step.submit(env(None, offset=0, tp=FILE_TP))
    committer.fail = True
    assert step.commit() is False
    assert registry.get_sample_value("casewatch_commit_failures_total") == 1
    committer.fail = False
    clock.advance(1.0)
    step.poll()
    assert committer.commits == [{FILE_TP: 1}]
    assert registry.get_sample_value("casewatch_offsets_committed_total", {"topic": "file"}) == 1


def test_after_stop_periodic_only_the_join_commits_with_at_least_its_minimum_time() -> None:
    step, tracker, committer, clock = _setup(interval=1.0)
    for off in range(3):
        tracker.track(FILE_TP, off)
    step.submit(env(None, offset=0, tp=FILE_TP))
    step.stop_periodic()
    clock.advance(10.0)
    step.poll()  # due, but a stopping daemon must not wait on a periodic commit
    assert committer.commits == []
    step.submit(env(None, offset=1, tp=FILE_TP))
    step.join(0.5)  # the drain used up its budget: the final commit still gets its minimum
    assert committer.commits == [{FILE_TP: 2}]
    assert committer.timeouts == [FINAL_COMMIT_MIN_S]
    assert step.final_error is None
    step.submit(env(None, offset=2, tp=FILE_TP))
    step.join(60.0)  # a longer remainder is passed on as it is
    assert committer.timeouts[-1] == 60.0


def test_a_failed_final_commit_is_kept_for_the_caller() -> None:
    step, tracker, committer, _ = _setup()
    tracker.track(FILE_TP, 0)
    step.submit(env(None, offset=0, tp=FILE_TP))
    committer.fail = True
    step.join(1.0)
    assert isinstance(step.final_error, BrokerError)
    assert "rebalance in progress" in str(step.final_error)
    committer.fail = False
    step.join(1.0)
    assert step.final_error is None and committer.commits == [{FILE_TP: 1}]


def test_file_source_offsets_survive_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "turns.jsonl"
    data.write_text("a\nb\nc\n")
    offsets = tmp_path / "offsets.json"
    source = FileTurnSource(data, offsets_path=offsets)
    tracker = OffsetTracker()
    step = CommitStep(
        source, tracker, StreamRecorder(Metrics(CollectorRegistry())), ManualClock(), 1.0
    )
    for msg in source.poll(0.1, 10):
        tracker.track(msg.tp, msg.offset)
    step.submit(env(None, offset=0, tp=FILE_TP))
    step.submit(env(None, offset=1, tp=FILE_TP))
    step.join(0)
    source.close()
    again = FileTurnSource(data, offsets_path=offsets)
    assert [m.value for m in again.poll(0.1, 10)] == [b"c"]
    again.close()
