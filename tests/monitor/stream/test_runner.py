"""``DaemonRunner``: the daemon as ``casewatch run`` and ``casewatch demo`` assemble it, on a
file source (no broker needed): panel counters reach the exporter, the retention job runs, a
taken port is a clear error, and a started runner serves its probes and stops cleanly."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from prometheus_client import CollectorRegistry

from monitor.config.settings import load_settings
from monitor.errors import ListenError
from monitor.sampling.judging_redaction import JudgingRedaction
from monitor.schema.turn import METRICS
from monitor.storage.audit import counts
from monitor.storage.store import Store
from monitor.storage.tables import turns, verdicts
from monitor.stream.file_state import file_sidecars
from monitor.stream.runner import DaemonRunner
from monitor.stream.steps.decisions import TurnDecisions
from tests.fake_judge_server import FakeJudgeServer, Reply, case_data_of, scores
from tests.fixtures.databases import make_turn, make_verdict
from tests.fixtures.judge_server import FAKE_JUDGE_KEY, fake_judge_config
from tests.support.daemon import rows_per_event, turn_values
from tests.support.daemon_process import EXIT_SLACK_S
from tests.support.file_runs import outcome_of_a_file_run
from tests.support.http import http_get
from tests.support.waiting import wait_for

CANARY = Path(__file__).resolve().parents[3] / "examples" / "judge_canary.jsonl"


def _disagree_on_hallucination(request: dict[str, object]) -> Reply:
    data = case_data_of(request)
    assert data is not None
    if request["model"] == "judge-b":
        return scores({m: 0.2 if m == "hallucination" else 0.95 for m in METRICS})
    return scores(0.9)


def test_file_runner_with_a_panel_exports_the_panel_counters(tmp_path: Path) -> None:
    n = 6
    data = tmp_path / "turns.jsonl"
    data.write_bytes(b"\n".join([*turn_values(n), b"{oops"]) + b"\n")
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    registry = CollectorRegistry()
    with FakeJudgeServer(responder=_disagree_on_hallucination) as server:
        cfg = {"transport_retries": 0, "output_retries": 0}
        settings = load_settings(
            None,
            storage={"url": url},
            server={"port": 0},
            judges={
                m: fake_judge_config(server, model=m, **cfg)
                for m in ("judge-a", "judge-b", "judge-arbiter")
            },
            panel={"primaries": ["judge-a", "judge-b"], "arbiter": "judge-arbiter"},
        )
        # A file without follow: the run ends by itself once every turn is finished.
        DaemonRunner(settings, registry, file_path=data).run_foreground(install_signals=False)

    def sample(name: str, **labels: str) -> float:
        return registry.get_sample_value(name, labels) or 0.0

    assert sample("casewatch_panel_turns_total", assistant="helpdesk", agreement="disagreed") == n
    assert sample("casewatch_arbiter_calls_total", assistant="helpdesk") == n
    assert sample("casewatch_dead_letter_total", reason="not_json") == 1
    dlq_path, offsets_path = file_sidecars(data, url)
    assert dlq_path.exists() and offsets_path.exists()
    # Kept with the database it fed, never beside the input.
    assert dlq_path.parent == offsets_path.parent == tmp_path
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("turns")) == [
        "turns.jsonl"
    ]
    store = Store(url)
    try:
        assert rows_per_event(store) == {f"evt-{i}": 1 for i in range(n)}
    finally:
        store.close()


def test_the_run_builds_one_set_of_turn_decisions_for_the_chain_and_the_canary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``prepare`` builds the chain's decisions; the pipeline and the judge canary (its file
    turns, its job) are handed them: one ``TurnDecisions`` and one redaction per process."""
    built: dict[str, int] = {"decisions": 0, "redaction": 0}
    init = TurnDecisions.__init__
    from_config = JudgingRedaction.from_config.__func__  # type: ignore[attr-defined]

    def counted_init(self: TurnDecisions, *args: Any, **kwargs: Any) -> None:
        built["decisions"] += 1
        init(self, *args, **kwargs)

    def counted_from_config(cls: type[JudgingRedaction], config: Any) -> Any:
        built["redaction"] += 1
        return from_config(cls, config)

    monkeypatch.setattr(TurnDecisions, "__init__", counted_init)
    monkeypatch.setattr(JudgingRedaction, "from_config", classmethod(counted_from_config))
    data = tmp_path / "turns.jsonl"
    data.write_bytes(b"\n".join(turn_values(3)) + b"\n")
    with FakeJudgeServer() as server:
        settings = load_settings(
            None,
            storage={"url": f"sqlite:///{tmp_path / 'db.sqlite'}"},
            server={"port": 0},
            judges={"llm": fake_judge_config(server)},
            judge="llm",
            judge_canary={"file": str(CANARY)},
            redaction={"before_judging": True},
        )
        DaemonRunner(settings, CollectorRegistry(), file_path=data).run_foreground(
            install_signals=False
        )
    assert built == {"decisions": 1, "redaction": 1}


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def test_a_taken_port_is_a_listen_error(tmp_path: Path, taken_port: int) -> None:
    data = tmp_path / "turns.jsonl"
    data.write_bytes(b"")
    settings = load_settings(
        None,
        storage={"url": f"sqlite:///{tmp_path / 'db.sqlite'}"},
        server={"host": "127.0.0.1", "port": taken_port},
    )
    with pytest.raises(ListenError, match=rf"^cannot listen on 127\.0\.0\.1:{taken_port} \("):
        DaemonRunner(settings, CollectorRegistry(), file_path=data)


def test_a_started_runner_serves_probes_purges_old_rows_and_stops(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    store = Store(url)
    store.migrate()
    old = make_turn("old")
    store.save(old, make_verdict(old))
    long_ago = datetime(2000, 1, 1, tzinfo=UTC)
    engine = sa.create_engine(url)
    with engine.begin() as conn:  # backdate: retention keys on when a row was stored
        conn.execute(sa.update(verdicts).values(stored_at=long_ago))
        conn.execute(sa.update(turns).values(stored_at=long_ago))
    engine.dispose()
    data = tmp_path / "turns.jsonl"
    data.write_bytes(b"")
    settings = load_settings(None, storage={"url": url, "retention_days": 30}, server={"port": 0})
    runner = DaemonRunner(settings, CollectorRegistry(), file_path=data, follow=True).start()
    try:
        assert runner.alive
        wait_for(lambda: counts(store)["verdicts"] == 0, "the old row purged")
        with data.open("ab") as fh:
            fh.write(b"\n".join(turn_values(3)) + b"\n")
        wait_for(lambda: counts(store)["verdicts"] == 3, "the appended turns stored")
        port = int(runner.url.rsplit(":", 1)[1])
        assert http_get(port, "/healthz")[0] == 200
        status, text = http_get(port, "/metrics")
        assert status == 200 and "casewatch_turns_consumed_total" in text
    finally:
        assert runner.stop(timeout_s=30)
    assert not runner.alive and runner.error is None
    assert runner.stop(timeout_s=30)  # idempotent
    assert counts(store)["turns"] == 3
    store.close()


# A process that builds a runner on a file source, starts it, and stops it once told to (the
# file STOP appears), then returns from main: its exit must not wait for the judge calls the
# stop abandoned (a ThreadPoolExecutor's workers would be joined at interpreter exit).
_STOP_SCRIPT = """
import json, sys, time
from pathlib import Path
from prometheus_client import CollectorRegistry
from monitor.runtime.logs import configure_logging
from monitor.config.settings import load_settings
from monitor.stream.runner import DaemonRunner
from monitor.stream.steps.decisions import TurnDecisions
from monitor.stream.shutdown_budget import shutdown_budget_s

configure_logging()  # on stderr: stdout is the result line
config = json.loads(sys.argv[1])
settings = load_settings(None, **config["settings"])
runner = DaemonRunner(
    settings, CollectorRegistry(), file_path=Path(config["data"]), follow=True
).start()
stop = Path(config["stop"])
while not stop.exists():
    time.sleep(0.05)
started = time.monotonic()
stopped = runner.stop(shutdown_budget_s(settings))
stop_s = time.monotonic() - started
result = {"stopped": stopped, "abandoned": runner.daemon.abandoned_calls, "stop_s": stop_s}
print(json.dumps(result), flush=True)
"""


def _stop_once_called(
    server: FakeJudgeServer, settings: dict[str, Any], data: Path, stop: Path, log: Path
) -> tuple[int, dict[str, Any], float]:
    """Runs _STOP_SCRIPT in a process of its own (stderr to ``log``) and stops it as soon as
    ``server`` has been called: its exit code, what it printed, and the stop's budget."""
    import json
    import subprocess
    import sys

    from monitor.stream.shutdown_budget import shutdown_budget_s

    config = {"settings": settings, "data": str(data), "stop": str(stop)}
    with log.open("w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-c", _STOP_SCRIPT, json.dumps(config)],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        try:
            wait_for(lambda: server.request_count >= 1, "a call to the judge")
            stop.touch()
            budget = shutdown_budget_s(load_settings(None, **settings))
            out, _ = proc.communicate(timeout=budget + EXIT_SLACK_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    result = json.loads(out.strip().splitlines()[-1]) if proc.returncode == 0 else {}
    return proc.returncode, result, budget


def test_a_stop_is_bounded_by_the_drain_when_a_judge_call_hangs(tmp_path: Path) -> None:

    data = tmp_path / "turns.jsonl"
    data.write_bytes(b"\n".join(turn_values(4)) + b"\n")
    stop = tmp_path / "STOP"
    with FakeJudgeServer(latency=600) as judge:  # hangs far longer than the test
        judge_config = fake_judge_config(judge, timeout_seconds=600).model_dump(mode="json")
        judges = {"remote": {**judge_config, "api_key": FAKE_JUDGE_KEY}}
        settings = {
            "judges": judges,
            "judge": "remote",
            "storage": {"url": f"sqlite:///{tmp_path / 'db.sqlite'}", "retention_days": None},
            "server": {"host": "127.0.0.1", "port": 0},
            "daemon": {"drain_timeout_seconds": 1},
        }
        log = tmp_path / "run.log"
        returncode, result, _ = _stop_once_called(judge, settings, data, stop, log)
    assert returncode == 0, log.read_text()
    assert result["stopped"] is True and result["abandoned"] >= 1


RUBRICS = """\
- id: vpn-drops
  query: VPN drops
  reviewed: true
  questions:
    - Which driver must be reinstalled?
"""


def test_the_whole_stop_stays_within_its_bound_while_a_scheduled_job_is_mid_run(
    tmp_path: Path,
) -> None:
    """The turns are judged offline and stored; the rubric job then grades them on a judge
    that never answers. A stop while that job is blocked in its call abandons it after its
    share of the budget and still returns, and the process exits, within the bound."""

    data = tmp_path / "turns.jsonl"
    data.write_bytes(b"\n".join(turn_values(2)) + b"\n")
    rubrics = tmp_path / "rubrics.yaml"
    rubrics.write_text(RUBRICS)
    stop = tmp_path / "STOP"
    log = tmp_path / "run.log"
    with FakeJudgeServer(latency=600) as grader:  # hangs far longer than the test
        grader_config = fake_judge_config(grader, timeout_seconds=600).model_dump(mode="json")
        settings = {
            "judges": {"grader": {**grader_config, "api_key": FAKE_JUDGE_KEY}},
            "storage": {"url": f"sqlite:///{tmp_path / 'db.sqlite'}", "retention_days": None},
            "server": {"host": "127.0.0.1", "port": 0},
            "daemon": {"drain_timeout_seconds": 1},
            "sampling": {"budget_calls_per_hour": 1000},
            "rubric": {
                "enabled": True,
                "rubric_file": str(rubrics),
                "judge": "grader",
                "interval_seconds": 0.2,
            },
        }
        returncode, result, budget = _stop_once_called(grader, settings, data, stop, log)
    assert returncode == 0, log.read_text()
    assert result["stopped"] is True
    assert result["stop_s"] <= budget
    # The job was still running when the stop came, and was abandoned, not waited for.
    assert "scheduled jobs still running at shutdown; abandoned" in log.read_text()


def _run_file(tmp_path: Path, data: Path, name: str, screen_processes: int) -> dict[str, object]:
    url = f"sqlite:///{tmp_path / f'{name}.sqlite'}"
    rule = {"name": "negative", "field": "feedback", "equals": "negative"}
    settings = load_settings(
        None,
        storage={"url": url},
        server={"port": 0},
        sampling={"default_rate": 0.3, "always_judge": [rule]},
        daemon={"screen_processes": screen_processes},
    )
    return outcome_of_a_file_run(settings, data, tmp_path / f"{name}.jsonl")


def test_screening_processes_change_no_outcome(tmp_path: Path) -> None:
    """The same stream with and without ``daemon.screen_processes``: the same verdicts stored,
    the same dead letters with the same reasons, the same counters (sampled, skipped by reason,
    tripwire checked and tripped, dead letters)."""
    examples = Path(__file__).resolve().parents[3] / "examples" / "turns.jsonl"
    lines = examples.read_bytes().splitlines()
    poison = [b"{oops", b"[1, 2]", b'{"event_id": "no-rest"}', b"\xff\xfe"]
    data = tmp_path / "mixed.jsonl"
    data.write_bytes(b"\n".join([*lines[:60], *poison, *lines[60:]]) + b"\n")
    inline = _run_file(tmp_path, data, "inline", 0)
    screened = _run_file(tmp_path, data, "screened", 1)
    assert screened == inline
    assert inline["stored"] and len(inline["dead"]) == len(poison)  # not a vacuous comparison
    counters = inline["counters"]
    assert isinstance(counters, dict)
    assert sum(v for k, v in counters.items() if "not_sampled" in str(k)) > 0


def test_a_judge_that_is_down_at_start_is_logged_and_named_on_readyz_and_the_daemon_runs(
    tmp_path: Path,
) -> None:
    """Like `casewatch judge`, the daemon probes its judges first; unlike it, it starts anyway
    (a judge may come back), unready, and /readyz says which judge did not answer."""
    data = tmp_path / "turns.jsonl"
    data.write_bytes(b"")
    with FakeJudgeServer() as gone:  # a judge whose server has stopped: nothing listens
        down = fake_judge_config(gone, model="judge-b")
    with FakeJudgeServer() as server:
        settings = load_settings(
            None,
            storage={"url": f"sqlite:///{tmp_path / 'db.sqlite'}"},
            server={"port": 0},
            judges={"judge-a": fake_judge_config(server, model="judge-a"), "judge-b": down},
            panel={"primaries": ["judge-a", "judge-b"]},
        )
        runner = DaemonRunner(settings, CollectorRegistry(), file_path=data, follow=True).start()
        try:
            port = int(runner.url.rsplit(":", 1)[1])
            wait_for(lambda: runner.alive, what="the daemon running")
            status, text = http_get(port, "/readyz")
            body = json.loads(text)
            assert status == 503 and body["checks"]["judges"] is False, body
            assert [line.split(" at ")[0] for line in body["judges_down"]] == ["judge 'judge-b'"]
            assert "judge-a" not in text
        finally:
            assert runner.stop(timeout_s=30)
