"""What ``casewatch run`` says about itself: the start line (sampling, budget, the database with
its password masked, where dead letters go), the summary line at its interval and at the end,
and the warning naming the setting when sampling or the budget left nothing judged; and what it
says of a judge that never answers (each turn ends failed with its reason, the run ends)."""

from __future__ import annotations

import json
import threading
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from monitor.config.sampling import SamplingConfig
from monitor.config.settings import load_settings
from monitor.runtime.clock import ManualClock
from monitor.sampling.sampler import sample_point
from monitor.storage.audit import stored_verdicts
from monitor.storage.store import Store
from monitor.stream.file_state import file_sidecars
from monitor.stream.recorder import RunTally
from monitor.stream.run_summary import RunSummary, nothing_judged, sampling_fields
from monitor.stream.runner import DaemonRunner
from tests.fake_judge_server import FakeJudgeServer, Reply, scores, slow
from tests.fixtures.judge_server import fake_judge_config
from tests.support.daemon import turn_values
from tests.support.waiting import wait_for

PASSWORD = "pw-4f1c9a7e"


def _with_password(url: str) -> str:
    parts = urlsplit(url)
    netloc = parts.netloc.replace("@", f":{PASSWORD}@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


@pytest.mark.integration
def test_the_run_starts_with_one_line_of_sampling_budget_database_and_dead_letters(
    tmp_path: Path, pg_url: str
) -> None:
    url = _with_password(pg_url)  # the local server trusts its clients: the password is unused
    data = tmp_path / "turns.jsonl"
    data.write_bytes(b"\n".join(turn_values(2)) + b"\n")
    settings = load_settings(
        None,
        storage={"url": url},
        server={"port": 0},
        sampling={
            "default_rate": 0.25,
            "rates": {"helpdesk": 0.5},
            "budget_calls_per_hour": 1000,
            "budget_usd_per_hour": None,
        },
    )
    with capture_logs() as logs:
        runner = DaemonRunner(settings, CollectorRegistry(), file_path=data)
        runner.run_foreground(install_signals=False)
    (start,) = [e for e in logs if e["event"] == "run starting"]
    assert start["sampling_strategy"] == "uniform"
    assert start["sampling_rate"] == 0.25
    assert start["sampling_rates"] == {"helpdesk": 0.5}
    assert start["budget"] == "1000 judge calls/h"
    assert PASSWORD not in repr(logs)
    assert start["database"] == url.replace(PASSWORD, "***")
    assert start["source"] == f"file {data} (casewatch)"
    assert start["dead_letters_to"] == str(file_sidecars(data, url)[0])
    # Before anything is read, and once.
    first_read = next(i for i, e in enumerate(logs) if e["event"] == "first records polled")
    assert logs.index(start) < first_read


@pytest.mark.integration
def test_under_the_cascade_the_lines_say_its_floor_look_share_target_and_what_it_drew(
    tmp_path: Path,
) -> None:
    values = turn_values(3)
    data = tmp_path / "turns.jsonl"
    data.write_bytes(b"\n".join(values) + b"\n")
    settings = load_settings(
        None,
        storage={"url": f"sqlite:///{tmp_path / 'db.sqlite'}"},
        server={"port": 0},
        sampling={
            "strategy": "cascade",
            "default_rate": 0.25,
            "cascade_floor": 0.05,
            "cascade_look_share": 0.5,
            "budget_calls_per_hour": 200,
            "cascade_target_calls_per_hour": None,
        },
    )
    with capture_logs() as logs:
        runner = DaemonRunner(settings, CollectorRegistry(), file_path=data)
        runner.run_foreground(install_signals=False)
    (start,) = [e for e in logs if e["event"] == "run starting"]
    assert start["sampling_strategy"] == "cascade"
    assert start["cascade_floor"] == 0.05
    assert start["cascade_look_share"] == 0.5
    assert start["cascade_target_calls_per_hour"] == 180  # 90 % of the hourly call budget
    # The uniform rate plays no part under the cascade: not printed as if it did.
    assert "sampling_rate" not in start and "sampling_rates" not in start
    (finished,) = [e for e in logs if e["event"] == "run finished"]
    # Every turn within the look share was looked at; no rule: every sampled turn was drawn.
    points = [sample_point(json.loads(v)["conversation_id"]) for v in values]
    looked = [p for p in points if p < 0.5]
    assert finished["cheap_look_saw"] == len(looked)
    assert finished["cascade_drew"] == finished["sampled"]
    assert finished["sampled"] + finished["skipped"] == finished["read"] == 3


def test_the_uniform_start_line_names_its_strategy_and_the_summary_no_cascade_counts() -> None:
    sampling = SamplingConfig(default_rate=0.25)
    assert sampling_fields(sampling) == {"sampling_strategy": "uniform", "sampling_rate": 0.25}
    summary = RunSummary(_tally(not_sampled=1), ManualClock(), 60.0, sampling=sampling)
    assert "cheap_look_saw" not in summary.fields()
    cascade = SamplingConfig(
        strategy="cascade", cascade_floor=0.02, cascade_target_calls_per_hour=50
    )
    tally = _tally(not_sampled=3)
    tally.read, tally.sampled, tally.looked, tally.drawn = 5, 2, 5, 1
    fields = RunSummary(tally, ManualClock(), 60.0, sampling=cascade).fields()
    assert (fields["cheap_look_saw"], fields["cascade_drew"]) == (5, 1)


def _tally(**skipped: int) -> RunTally:
    tally = RunTally(read=sum(skipped.values()))
    tally.skipped.update(skipped)
    return tally


def test_a_run_skipped_whole_by_the_sampling_rate_names_the_setting() -> None:
    warning = nothing_judged(_tally(not_sampled=3), SamplingConfig())
    assert warning is not None
    assert warning.startswith("nothing was judged: 3 turn(s) not sampled")
    assert "sampling.default_rate is 0.1" in warning
    assert "CASEWATCH_SAMPLING__DEFAULT_RATE=1.0" in warning


def test_a_cascade_run_that_draws_nothing_names_the_cascade_settings_not_the_rate() -> None:
    sampling = SamplingConfig(
        strategy="cascade", cascade_floor=0.01, cascade_look_share=0.5, budget_calls_per_hour=200
    )
    warning = nothing_judged(_tally(not_sampled=7), sampling)
    assert warning is not None
    assert warning.startswith("nothing was judged: 7 turn(s) not drawn by the cascade")
    assert "sampling.cascade_floor is 0.01" in warning
    assert "sampling.cascade_look_share is 0.5" in warning
    assert "90 % of budget_calls_per_hour" in warning
    assert "default_rate" not in warning


def test_a_run_skipped_by_the_budget_names_the_budget_setting() -> None:
    sampling = SamplingConfig(default_rate=1.0, budget_calls_per_hour=5)
    warning = nothing_judged(_tally(budget_calls=4, budget_usd=1), sampling)
    assert warning is not None
    assert "4 turn(s) over the hourly judge budget (sampling.budget_calls_per_hour is 5)" in warning
    assert "1 turn(s) over the hourly judge budget (sampling.budget_usd_per_hour is 5)" in warning


def test_no_warning_once_a_turn_was_judged_or_for_other_reasons() -> None:
    judged = _tally(not_sampled=3)
    judged.judged = 1
    assert nothing_judged(judged, SamplingConfig()) is None
    failed = _tally(not_sampled=3)
    failed.judge_failed["timeout"] += 1
    assert nothing_judged(failed, SamplingConfig()) is None
    # Replayed turns already stored: nothing to change in the sampling.
    assert nothing_judged(_tally(already_judged=3), SamplingConfig()) is None


def test_the_summary_line_comes_at_its_interval_and_at_the_end() -> None:
    clock = ManualClock()
    tally = _tally(not_sampled=2)
    tally.read, tally.sampled, tally.judged = 4, 2, 1
    tally.judge_failed["timeout"] += 1
    tally.dead_lettered["not_json"] += 1
    summary = RunSummary(
        tally, clock, 60.0, sampling=SamplingConfig(), dead_letters_to="/var/dlq.jsonl"
    )
    with capture_logs() as logs:
        summary.tick()  # not yet
        clock.advance(60.0)
        summary.tick()
        summary.tick()  # the next one is 60 s away
        summary.finish()
    assert [e["event"] for e in logs] == ["run summary", "run finished"]
    assert logs[0] == {**logs[1], "event": "run summary"}
    assert logs[1] == {
        "event": "run finished",
        "log_level": "info",
        "read": 4,
        "sampled": 2,
        "judged": 1,
        "judge_failed": 1,
        "judge_failed_by_reason": {"timeout": 1},
        "skipped": 2,
        "skipped_by_reason": {"not_sampled": 2},
        "dead_lettered": 1,
        "dead_lettered_by_reason": {"not_json": 1},
        "dead_letters_to": "/var/dlq.jsonl",
        "in_progress": 0,
    }


def test_nothing_judged_is_warned_once_while_running_and_again_at_the_end() -> None:
    clock = ManualClock()
    summary = RunSummary(_tally(not_sampled=3), clock, 10.0, sampling=SamplingConfig())
    with capture_logs() as logs:
        for _ in range(3):
            clock.advance(10.0)
            summary.tick()
        summary.finish()
    warnings = [e["event"] for e in logs if e["log_level"] == "warning"]
    assert len(warnings) == 2 and warnings[0] == warnings[1]
    assert warnings[0].startswith("nothing was judged")


@pytest.mark.integration
def test_a_judge_that_never_answers_ends_the_turn_failed_counted_logged_and_summarised(
    tmp_path: Path,
) -> None:
    data = tmp_path / "turns.jsonl"
    data.write_bytes(b"\n".join(turn_values(2)) + b"\n")
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    registry = CollectorRegistry()
    # Holds every request far longer than the test (closing the server ends it).
    with FakeJudgeServer(responder=lambda _request: slow(3600)) as judge:
        config = fake_judge_config(judge, timeout_seconds=0.2, transport_retries=1)
        settings = load_settings(
            None,
            storage={"url": url},
            server={"port": 0},
            judges={"remote": config},
            judge="remote",
        )
        with capture_logs() as logs:
            runner = DaemonRunner(settings, registry, file_path=data)
            runner.run_foreground(install_signals=False)
        requests = judge.request_count

    # Each turn: the first try and one retry timed out, then the turn ended failed, its reason
    # counted and logged, and the run went on to its end (nothing left waiting).
    assert requests == 2 * 2
    assert (
        registry.get_sample_value(
            "casewatch_judge_failed_total", {"judge": "remote", "reason": "timeout"}
        )
        == 2
    )
    judged = {"assistant": "helpdesk", "band": "judge_failed"}
    assert registry.get_sample_value("casewatch_turns_judged_total", judged) == 2
    failed = [e for e in logs if e["event"] == "judge.failed"]
    assert [(e["reason"], e["attempts"]) for e in failed] == [("timeout", 2)] * 2
    (finished,) = [e for e in logs if e["event"] == "run finished"]
    assert finished["judge_failed_by_reason"] == {"timeout": 2}
    assert finished["judged"] == 0 and finished["in_progress"] == 0
    # Failed, not skipped for the sampling: no advice to change it.
    assert not [e for e in logs if str(e["event"]).startswith("nothing was judged")]
    store = Store(url)
    try:
        stored = stored_verdicts(store, limit=10)
    finally:
        store.close()
    assert sorted((v["event_id"], v["status"]) for v in stored) == [
        ("evt-0", "judge_failed"),
        ("evt-1", "judge_failed"),
    ]


@pytest.mark.integration
def test_a_summary_line_comes_while_the_turns_wait_on_the_judge(tmp_path: Path) -> None:
    data = tmp_path / "turns.jsonl"
    data.write_bytes(b"\n".join(turn_values(2)) + b"\n")
    gate = threading.Event()

    def held(_request: dict[str, Any]) -> Reply:
        gate.wait(120)  # until the test has seen the line (a hang guard past that)
        return scores(0.9)

    with FakeJudgeServer(responder=held) as judge:
        settings = load_settings(
            None,
            storage={"url": f"sqlite:///{tmp_path / 'db.sqlite'}"},
            server={"port": 0},
            judges={"remote": fake_judge_config(judge, timeout_seconds=600)},
            judge="remote",
            daemon={"summary_interval_seconds": 0.05},
        )
        with capture_logs() as logs:
            runner = DaemonRunner(settings, CollectorRegistry(), file_path=data).start()
            try:

                def waiting() -> list[MutableMapping[str, Any]]:
                    return [
                        e
                        for e in list(logs)
                        if e["event"] == "run summary" and e["in_progress"] == 2
                    ]

                wait_for(lambda: waiting(), "a summary line while both turns are at the judge")
            finally:
                gate.set()
            wait_for(lambda: not runner.alive, "the run's end")
            runner.stop(30)
    line = waiting()[0]
    assert (line["read"], line["sampled"], line["judged"]) == (2, 2, 0)
    assert line["dead_letters_to"] == str(file_sidecars(data, settings.storage.url)[0])
    (finished,) = [e for e in logs if e["event"] == "run finished"]
    assert finished["judged"] == 2
