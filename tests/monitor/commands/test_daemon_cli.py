"""`casewatch run` as a real process (SIGTERM drain, SIGKILL + restart, shutdown with the broker
gone, a second signal); `casewatch produce`."""

from __future__ import annotations

import json
import signal
import socket
from pathlib import Path
from types import FrameType

from click.testing import CliRunner

from consumers.tansu import EmbeddedBroker, create_topics, free_port
from monitor.cli import main
from monitor.config.settings import load_settings
from monitor.errors import StorageError
from monitor.storage.audit import counts
from monitor.storage.store import Store
from monitor.stream.file_state import file_sidecars
from monitor.stream.shutdown_budget import shutdown_budget_s
from tests.fake_judge_server import FakeJudgeServer
from tests.fixtures.broker import DLQ_SUFFIX, produce
from tests.support.daemon import rows_per_event, turn_values
from tests.support.daemon_process import EXIT_SLACK_S, daemon_process, kafka_config, write_config
from tests.support.http import http_get
from tests.support.kafka import committed_offset, read_topic
from tests.support.waiting import wait_for

# ---------------------------------------------------------------- produce against Tansu


def test_produce_publishes_raw_lines(
    tansu_broker: EmbeddedBroker, kafka_topic: str, tmp_path: Path
) -> None:
    data = tmp_path / "turns.jsonl"
    values = [*turn_values(3), b"{broken"]
    data.write_bytes(b"\n".join(values) + b"\n")
    args = ["produce", str(data), "--topic", kafka_topic, "--bootstrap", tansu_broker.bootstrap]
    result = CliRunner().invoke(main, [*args, "--loop", "--count", "6", "--rate", "1000"])
    assert result.exit_code == 0, result.output
    assert "produced 6 message(s)" in result.output
    got = [r.value for r in read_topic(tansu_broker.bootstrap, kafka_topic, 6)]
    assert got[:4] == values
    assert [json.loads(v)["event_id"] for v in got[4:]] == ["evt-0-r1", "evt-1-r1"]


def test_produce_names_an_unreachable_broker(tmp_path: Path) -> None:
    data = tmp_path / "turns.jsonl"
    data.write_bytes(turn_values(1)[0] + b"\n")
    port = free_port()
    args = ["produce", str(data), "--topic", "t", "--bootstrap", f"127.0.0.1:{port}"]
    result = CliRunner().invoke(main, [*args, "--connect-timeout", "0.3"])
    assert result.exit_code == 2
    assert f"127.0.0.1:{port}" in result.output


# ---------------------------------------------------------------- run: in this process


def _callers_handler(_signum: int, _frame: FrameType | None) -> None:
    """The handler of a process that runs `casewatch run` inside itself."""


def test_run_in_process_puts_back_the_signal_handlers_it_replaced(tmp_path: Path) -> None:
    """A caller running `casewatch run` in its own process (as CliRunner does) has its own
    SIGINT and SIGTERM handlers back once the run returns, not the finished daemon's."""
    data = tmp_path / "turns.jsonl"
    data.write_bytes(b"\n".join(turn_values(3)) + b"\n")
    db = tmp_path / "casewatch.db"
    config = write_config(tmp_path, {"storage": {"url": f"sqlite:///{db}"}, "server": {"port": 0}})
    stop_signals = (signal.SIGINT, signal.SIGTERM)
    before = {sig: signal.getsignal(sig) for sig in stop_signals}
    try:
        for sig in stop_signals:
            signal.signal(sig, _callers_handler)
        result = CliRunner().invoke(main, ["run", "--config", str(config), "--file", str(data)])
        after = {sig: signal.getsignal(sig) for sig in stop_signals}
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
    assert result.exit_code == 0, result.output
    assert after == {sig: _callers_handler for sig in stop_signals}
    store = Store(f"sqlite:///{db}")
    try:  # the daemon did run, with its own handlers in between
        assert rows_per_event(store) == {f"evt-{i}": 1 for i in range(3)}
    finally:
        store.close()


# ---------------------------------------------------------------- run: subprocesses


def test_run_file_source_processes_the_file_and_exits_0(tmp_path: Path) -> None:
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    data = inputs / "turns.jsonl"
    data.write_bytes(b"\n".join([*turn_values(15), b"not json"]) + b"\n")
    db = tmp_path / "casewatch.db"
    config = write_config(
        tmp_path, {"storage": {"url": f"sqlite:///{db}"}, "server": {"port": free_port()}}
    )
    with daemon_process(config, tmp_path / "run.log", "--file", str(data)) as proc:
        assert proc.wait(60) == 0, proc.tail()
    store = Store(f"sqlite:///{db}")
    assert rows_per_event(store) == {f"evt-{i}": 1 for i in range(15)}
    store.close()
    # Nothing is written beside the input: position and dead letters live with the database.
    assert [p.name for p in inputs.iterdir()] == ["turns.jsonl"]
    dlq_path, offsets_path = file_sidecars(data, f"sqlite:///{db}")
    assert dlq_path.parent == offsets_path.parent == tmp_path
    dead = [json.loads(x) for x in dlq_path.read_text().splitlines()]
    assert [d["reason"] for d in dead] == ["not_json"]
    assert json.loads(offsets_path.read_text())["offset"] == 16

    # The same file into the same database again: nothing new, and it says so.
    with daemon_process(config, tmp_path / "again.log", "--file", str(data)) as proc:
        assert proc.wait(60) == 0, proc.tail()
    said = (tmp_path / "again.log").read_text()
    assert f"resuming at line 16 of 16 from {data}; nothing new; delete {offsets_path}" in said

    # Into a new database (--db): the file is read from its first line.
    fresh = tmp_path / "fresh.db"
    with daemon_process(
        config, tmp_path / "fresh.log", "--file", str(data), "--db", str(fresh)
    ) as proc:
        assert proc.wait(60) == 0, proc.tail()
    store = Store(f"sqlite:///{fresh}")
    assert rows_per_event(store) == {f"evt-{i}": 1 for i in range(15)}
    store.close()


def test_run_rejects_a_bad_config_with_exit_2(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"daemon": {"concurrency": 0}})
    with daemon_process(config, tmp_path / "run.log") as proc:
        assert proc.wait(30) == 2
    assert "daemon.concurrency" in proc.tail()


def test_run_names_a_taken_port_with_exit_2(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        config = write_config(
            tmp_path,
            {
                "storage": {"url": f"sqlite:///{tmp_path / 'casewatch.db'}"},
                "server": {"host": "127.0.0.1", "port": port},
            },
        )
        data = tmp_path / "turns.jsonl"
        data.write_bytes(b"")
        with daemon_process(config, tmp_path / "run.log", "--file", str(data)) as proc:
            assert proc.wait(30) == 2
    assert f"casewatch: cannot listen on 127.0.0.1:{port} (" in proc.tail()
    assert "set server.port to a free port" in proc.tail()


def test_sigterm_finishes_in_flight_work_commits_and_exits_0(
    tansu_broker: EmbeddedBroker, kafka_topic: str, tmp_path: Path
) -> None:
    bootstrap = tansu_broker.bootstrap
    produce(bootstrap, kafka_topic, turn_values(60))
    port = free_port()
    with FakeJudgeServer(latency=0.3) as judge:
        config, doc = kafka_config(tmp_path, bootstrap, kafka_topic, judge, port)
        store = Store(doc["storage"]["url"])
        with daemon_process(config, tmp_path / "run.log") as proc:
            wait_for(lambda: _stored(store) >= 8, "some turns stored")
            assert http_get(port, "/healthz")[0] == 200
            wait_for(lambda: http_get(port, "/readyz")[0] == 200, "ready")
            status, metrics = http_get(port, "/metrics")
            assert status == 200 and "casewatch_turns_judged_total" in metrics
            (tmp_path / "metrics.txt").write_text(metrics)
            proc.proc.send_signal(signal.SIGTERM)
            assert proc.wait(60) == 0, proc.tail()
        requests = judge.request_count
    committed = committed_offset(bootstrap, doc["kafka"]["group_id"], kafka_topic)
    assert committed is not None and 0 < committed < 60
    # Every judge call that started was finished and stored, and everything stored is
    # committed: nothing in flight was abandoned.
    stored = rows_per_event(store)
    assert stored == {f"evt-{i}": 1 for i in range(committed)}
    assert requests == len(stored)
    store.close()


def test_sigkill_and_restart_store_every_turn_exactly_once(
    tansu_broker: EmbeddedBroker, kafka_topic: str, tmp_path: Path
) -> None:
    bootstrap = tansu_broker.bootstrap
    n = 150
    produce(bootstrap, kafka_topic, turn_values(n))
    port = free_port()
    with FakeJudgeServer(latency=0.03) as judge:
        config, doc = kafka_config(tmp_path, bootstrap, kafka_topic, judge, port)
        store = Store(doc["storage"]["url"])
        with daemon_process(config, tmp_path / "run1.log") as proc:
            wait_for(lambda: _stored(store) >= 30, "some turns stored")
            proc.proc.send_signal(signal.SIGKILL)
            assert proc.wait(10) == -signal.SIGKILL
        assert _stored(store) < n, "the kill came too late to test anything"
        with daemon_process(config, tmp_path / "run2.log") as proc:
            group = doc["kafka"]["group_id"]
            wait_for(
                lambda: committed_offset(bootstrap, group, kafka_topic) == n,
                "offsets committed to the end after the restart",
            )
            proc.proc.send_signal(signal.SIGTERM)
            assert proc.wait(60) == 0, proc.tail()
    assert rows_per_event(store) == {f"evt-{i}": 1 for i in range(n)}
    assert counts(store)["turns"] == n
    store.close()


def test_sigterm_with_the_broker_gone_exits_1_within_the_shutdown_budget(
    own_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    """The pod is told to stop while the Kafka cluster is unreachable: drain, fail to commit,
    say so in one line and exit 1, all within the configured budget (not terminationGrace)."""
    bootstrap, topic = own_broker.bootstrap, "shutdown.turns"
    create_topics(bootstrap, [topic], dlq_suffix=DLQ_SUFFIX)
    n = 500  # far more than the test lets it judge: work is in flight when the broker goes
    produce(bootstrap, topic, turn_values(n))
    with FakeJudgeServer(latency=0.3) as judge:
        config, doc = kafka_config(tmp_path, bootstrap, topic, judge, free_port(), 3)
        store = Store(doc["storage"]["url"])
        with daemon_process(config, tmp_path / "run.log") as proc:
            wait_for(lambda: _stored(store) >= 8, "some turns stored")
            own_broker.stop()
            assert _stored(store) < n, "the outage came too late to test anything"
            proc.proc.send_signal(signal.SIGTERM)
            budget = shutdown_budget_s(load_settings(config))
            assert proc.wait(budget + EXIT_SLACK_S) == 1, proc.tail()
    log = proc.log.read_text(errors="replace")
    last = log.splitlines()[-1]
    assert last.startswith("casewatch: offsets were not committed ("), last
    assert "re-read and deduplicated on restart" in last
    assert "Traceback" not in log
    store.close()


def test_judge_calls_outlasting_the_drain_do_not_hold_the_exit(
    tansu_broker: EmbeddedBroker, kafka_topic: str, tmp_path: Path
) -> None:
    produce(tansu_broker.bootstrap, kafka_topic, turn_values(20))
    with FakeJudgeServer(latency=300) as judge:  # calls that outlast the drain and the test
        config, _ = kafka_config(
            tmp_path, tansu_broker.bootstrap, kafka_topic, judge, free_port(), 1, 300
        )
        with daemon_process(config, tmp_path / "run.log") as proc:
            wait_for(lambda: judge.request_count >= 1, "a judge call in flight")
            proc.proc.send_signal(signal.SIGTERM)
            budget = shutdown_budget_s(load_settings(config))
            assert proc.wait(budget + EXIT_SLACK_S) == 0, proc.tail()
    assert "not waiting for judge calls still running" in proc.tail()


def test_a_second_sigterm_exits_at_once_without_draining(
    tansu_broker: EmbeddedBroker, kafka_topic: str, tmp_path: Path
) -> None:
    produce(tansu_broker.bootstrap, kafka_topic, turn_values(20))
    # Judge calls that outlast the test keep the drain busy for its whole (long) timeout.
    with FakeJudgeServer(latency=300) as judge:
        config, _ = kafka_config(
            tmp_path, tansu_broker.bootstrap, kafka_topic, judge, free_port(), 300
        )
        with daemon_process(config, tmp_path / "run.log") as proc:
            wait_for(lambda: judge.request_count >= 1, "a judge call in flight")
            proc.proc.send_signal(signal.SIGTERM)
            wait_for(lambda: '"draining"' in proc.log.read_text(), "draining started")
            proc.proc.send_signal(signal.SIGTERM)
            assert proc.wait(EXIT_SLACK_S) == -signal.SIGTERM, proc.tail()


def _stored(store: Store) -> int:
    try:
        return counts(store)["verdicts"]
    except StorageError:  # the daemon has not migrated the schema yet
        return 0
