"""The commit step with the real OffsetTracker and the real file source's committer."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from prometheus_client import CollectorRegistry

from consumers.file_source import FILE_TP, FileTurnSource
from consumers.offsets import OffsetTracker
from consumers.records import TopicPartition
from monitor.clock import ManualClock
from monitor.errors import BrokerError
from monitor.exporter import Metrics
from monitor.pipeline.commit import CommitStep
from tests.monitor.pipeline.helpers import env


class _Committer:
    """Records commits; ``fail`` makes it refuse them like a broker mid-rebalance."""

    def __init__(self) -> None:
        self.commits: list[dict[TopicPartition, int]] = []
        self.fail = False

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        if self.fail:
            raise BrokerError("rebalance in progress")
        self.commits.append(dict(offsets))


def _setup(interval: float = 1.0) -> tuple[CommitStep, OffsetTracker, _Committer, ManualClock]:
    tracker = OffsetTracker()
    committer = _Committer()
    clock = ManualClock()
    step = CommitStep(committer, tracker, Metrics(CollectorRegistry()), clock, interval)
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
    step = CommitStep(committer, tracker, Metrics(registry), clock, 1.0)
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


def test_file_source_offsets_survive_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "turns.jsonl"
    data.write_text("a\nb\nc\n")
    offsets = tmp_path / "offsets.json"
    source = FileTurnSource(data, offsets_path=offsets)
    tracker = OffsetTracker()
    step = CommitStep(source, tracker, Metrics(CollectorRegistry()), ManualClock(), 1.0)
    for msg in source.poll(0.1, 10):
        tracker.track(msg.tp, msg.offset)
    step.submit(env(None, offset=0, tp=FILE_TP))
    step.submit(env(None, offset=1, tp=FILE_TP))
    step.join(0)
    source.close()
    again = FileTurnSource(data, offsets_path=offsets)
    assert [m.value for m in again.poll(0.1, 10)] == [b"c"]
    again.close()
