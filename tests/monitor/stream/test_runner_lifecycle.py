"""``DaemonRunner``'s one lifecycle: whatever fails (building a later job, starting the
services), what was opened before is closed, the probe server included (its port is free
again), and the canary's judges too when the canary itself fails to build."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from monitor.config.settings import Settings, load_settings
from monitor.jobs.detection import DetectionJob
from monitor.jobs.judge_canary import JudgeCanaryJob
from monitor.jobs.retention import RetentionJob
from monitor.jobs.scheduler import JobScheduler
from monitor.judging.heuristic.judge import HeuristicJudge
from monitor.storage.store import Store
from monitor.stream.runner import DaemonRunner


class BuildFailed(Exception):
    """What the test makes a job's building raise."""


def _settings(tmp_path: Path) -> Settings:
    # Retention, the judge canary (on the store's labelled turns) and detection: three jobs,
    # built in that order; the canary judges with the heuristic panel of the defaults.
    return load_settings(
        None,
        storage={"url": f"sqlite:///{tmp_path / 'db.sqlite'}", "retention_days": 30},
        server={"host": "127.0.0.1", "port": 0},
    )


def _input(tmp_path: Path) -> Path:
    data = tmp_path / "turns.jsonl"
    data.write_bytes(b"")
    return data


def _record_closes(monkeypatch: pytest.MonkeyPatch, closed: list[str], *classes: type) -> None:
    """Each class's real ``close``, noting its name first."""
    for cls in classes:
        original: Callable[[Any], None] = getattr(cls, "close")  # noqa: B009 -- any class

        def close(self: Any, _original: Callable[[Any], None] = original, _cls: type = cls) -> None:
            closed.append(_cls.__name__)
            _original(self)

        monkeypatch.setattr(cls, "close", close)


def _fail(monkeypatch: pytest.MonkeyPatch, cls: type) -> None:
    def refuse(self: Any, *args: Any, **kwargs: Any) -> None:
        raise BuildFailed(f"{cls.__name__} failed to build")

    monkeypatch.setattr(cls, "__init__", refuse)


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_a_later_job_failing_to_build_closes_the_jobs_built_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed: list[str] = []
    _record_closes(monkeypatch, closed, RetentionJob, JudgeCanaryJob, HeuristicJudge, Store)
    _fail(monkeypatch, DetectionJob)
    with pytest.raises(BuildFailed):
        DaemonRunner(_settings(tmp_path), CollectorRegistry(), file_path=_input(tmp_path))
    assert "RetentionJob" in closed and "JudgeCanaryJob" in closed
    # The canary closes its judges; the store is closed after the jobs that use it.
    assert "HeuristicJudge" in closed[closed.index("JudgeCanaryJob") :]
    assert closed[-1] == "Store"


def test_a_canary_failing_to_build_closes_the_judges_it_was_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed: list[str] = []
    _record_closes(monkeypatch, closed, RetentionJob, HeuristicJudge)
    _fail(monkeypatch, JudgeCanaryJob)
    settings = _settings(tmp_path)
    judges = len(list(settings.effective_panel().roles()))
    with pytest.raises(BuildFailed):
        DaemonRunner(settings, CollectorRegistry(), file_path=_input(tmp_path))
    # The canary's judges first (last built, first closed), then the job built before it.
    assert closed[:judges] == ["HeuristicJudge"] * judges
    assert closed[judges] == "RetentionJob"


@pytest.mark.parametrize("threaded", [False, True], ids=["foreground", "thread"])
def test_services_failing_to_start_close_everything_the_probe_port_included(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threaded: bool
) -> None:
    closed: list[str] = []
    _record_closes(monkeypatch, closed, RetentionJob, Store)

    def refuse(self: JobScheduler) -> None:
        raise BuildFailed("the scheduler failed to start")

    monkeypatch.setattr(JobScheduler, "start", refuse)
    runner = DaemonRunner(_settings(tmp_path), CollectorRegistry(), file_path=_input(tmp_path))
    port = runner.server.port
    with pytest.raises(BuildFailed):
        if threaded:
            runner.start()
        else:
            runner.run_foreground(install_signals=False)
    assert _port_free(port)
    assert "RetentionJob" in closed and closed[-1] == "Store"


def test_a_finished_run_frees_the_probe_port(tmp_path: Path) -> None:
    runner = DaemonRunner(_settings(tmp_path), CollectorRegistry(), file_path=_input(tmp_path))
    port = runner.server.port
    assert not _port_free(port)
    runner.run_foreground(install_signals=False)
    assert _port_free(port)
