"""The "casewatch turns" dashboard (SQL store, Grafana's PostgreSQL data source): generated,
shaped as Grafana expects, and every query returns rows on a PostgreSQL holding the verdicts
of a live daemon (DaemonRunner on the embedded broker, fed the example turns, heuristic judge),
with Grafana's macros and variables expanded by ``tests/dashboards/sql_macros.py``."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from prometheus_client import CollectorRegistry

from consumers.tansu import EmbeddedBroker, create_topics
from dashboards import generate, turns
from monitor.config.settings import load_settings
from monitor.demo.examples import find_examples, load_examples
from monitor.demo.producer import ReplayProducer
from monitor.schema.turn import METRICS
from monitor.stream.runner import DaemonRunner
from tests.dashboards.queries import ROOT
from tests.dashboards.sql_macros import Var, expand
from tests.fixtures.broker import DLQ_SUFFIX
from tests.support.waiting import wait_for

COMMITTED = ROOT / "dashboards" / f"{turns.UID}.json"
DEADLINE_S = 300.0
CANARY = "acme-support-canary"


def _doc() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(COMMITTED.read_text(encoding="utf-8"))
    return doc


def _targets(doc: dict[str, Any]) -> list[tuple[str, str]]:
    return [(p["title"], t["rawSql"]) for p in doc["panels"] for t in p.get("targets", [])]


def test_regenerating_gives_the_committed_json() -> None:
    assert turns.render() == COMMITTED.read_text(encoding="utf-8"), (
        "run `python -m dashboards.generate`"
    )
    assert generate.main(["--check"]) == 0


def test_shape_variables_and_the_turn_link() -> None:
    doc = _doc()
    assert (doc["uid"], doc["title"], doc["timezone"]) == (turns.UID, "casewatch / Turns", "utc")
    names = {v["name"]: v for v in doc["templating"]["list"]}
    assert list(names) == ["datasource", "assistant", "metric", "band", "event_id"]
    assert names["datasource"]["query"] == turns.PG_TYPE
    assert names["assistant"]["multi"] and names["assistant"]["includeAll"]
    assert names["metric"]["query"].split(",") == ["turn", *METRICS]
    for panel in doc["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"] == {"type": turns.PG_TYPE, "uid": "${datasource}"}
            assert panel["description"]
    (table,) = [p for p in doc["panels"] if p["title"].startswith("Matching turns")]
    (override,) = table["fieldConfig"]["overrides"]
    (link,) = override["properties"][0]["value"]
    assert link["url"].startswith(f"/d/{turns.UID}/")
    assert "var-event_id=${__value.raw}" in link["url"]


def test_the_macro_helper_expands_as_grafana_does() -> None:
    start = datetime(2026, 3, 1, 10, tzinfo=UTC)
    end = start + timedelta(hours=1)
    sql = (
        "SELECT $__timeGroupAlias(t, '5m') WHERE $__timeFilter(t) AND a IN ($assistant) "
        "AND m = '${metric}' AND e = ${event_id:sqlstring} AND x BETWEEN $__timeFrom() AND "
        "$__timeTo()"
    )
    out = expand(sql, start, end, {
        "assistant": Var(["a", "b'c"], multi=True), "metric": Var(["turn"]),
        "event_id": Var(["o'neil"]),
    })  # fmt: skip
    assert out == (
        'SELECT floor(extract(epoch from t)/300)*300 AS "time" WHERE t BETWEEN '
        "'2026-03-01T10:00:00Z' AND '2026-03-01T11:00:00Z' AND a IN ('a','b''c') AND m = 'turn' "
        "AND e = 'o''neil' AND x BETWEEN '2026-03-01T10:00:00Z' AND '2026-03-01T11:00:00Z'"
    )
    with pytest.raises(KeyError):
        expand("SELECT $nope", start, end, {})


@pytest.fixture
def live_pg(tansu_broker: EmbeddedBroker, pg_url: str) -> Iterator[str]:
    """A PostgreSQL schema filled by a live daemon until it holds severe canary turns."""
    topic = f"turns.{uuid.uuid4().hex[:10]}"
    create_topics(tansu_broker.bootstrap, [topic], 2, dlq_suffix=DLQ_SUFFIX)
    settings = load_settings(
        None,
        kafka={
            "bootstrap_servers": [tansu_broker.bootstrap],
            "topics": [topic],
            "group_id": f"turns-{uuid.uuid4().hex[:8]}",
            "session_timeout_ms": 6000,
            "heartbeat_interval_ms": 1000,
            "max_poll_interval_ms": 6000,
        },
        sampling={"default_rate": 1.0},
        storage={"url": pg_url},
        server={"host": "127.0.0.1", "port": 0},
    )
    runner = DaemonRunner(settings, CollectorRegistry()).start()
    producer = ReplayProducer(
        tansu_broker.bootstrap, topic, load_examples(find_examples()), rate=100.0
    ).start()
    dsn = pg_url.replace("postgresql+psycopg://", "postgresql://", 1)
    try:

        def severe_canary_turns() -> bool:
            with psycopg.connect(dsn) as conn:
                severe = conn.execute(
                    "SELECT count(*) FROM turn_verdicts WHERE assistant = %s "
                    "AND turn_band = 'severe'", (CANARY,)
                ).fetchone()  # fmt: skip
            return severe is not None and severe[0] >= 3

        wait_for(
            severe_canary_turns,
            "three severe canary turns stored",
            timeout=DEADLINE_S,
            interval=1.0,
        )
    finally:
        producer.stop()
        runner.stop(60.0)
    yield dsn


def _run(dsn: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(sql).fetchall()  # type: ignore[arg-type]


@pytest.mark.integration
def test_every_query_returns_rows_on_a_live_daemons_store(live_pg: str) -> None:
    doc = _doc()
    # The range is the events' own: the example turns carry their own timestamps.
    span = _run(live_pg, "SELECT min(event_timestamp), max(event_timestamp) FROM turns")[0]
    start, end = span[0] - timedelta(minutes=1), span[1] + timedelta(minutes=1)
    (variable_sql,) = [v["query"] for v in doc["templating"]["list"] if v["name"] == "assistant"]
    assistants = [r[0] for r in _run(live_pg, variable_sql)]
    assert CANARY in assistants
    defaults = {
        "assistant": Var(assistants, multi=True),  # "All"
        "metric": Var(["turn"]),
        "band": Var(["severe"], multi=True),
        "event_id": Var([""]),
    }
    by_title = dict(_targets(doc))
    matching = next(t for t in by_title if t.startswith("Matching turns"))
    rows = _run(live_pg, expand(by_title[matching], start, end, defaults))
    assert rows, "no severe turn in the table"
    columns = ["time", "event_id", "assistant", "turn_band", "s_final", "metric", "band",
               "score", "justification"]  # fmt: skip
    first = dict(zip(columns, rows[0], strict=True))
    assert first["turn_band"] == "severe" and first["justification"]
    # Clicking the event id: the same dashboard with event_id set (the data link).
    picked = defaults | {"event_id": Var([first["event_id"]])}
    for title, sql in _targets(doc):
        assert _run(live_pg, expand(sql, start, end, picked)), f"{title!r} returned no row"
    # One assistant, one metric, every band: the variables narrow, never break, the queries.
    narrowed = picked | {
        "assistant": Var([CANARY], multi=True),
        "metric": Var(["hallucination"]),
        "band": Var(["severe", "moderate", "minor", "none"], multi=True),
    }
    for title, sql in _targets(doc):
        assert _run(live_pg, expand(sql, start, end, narrowed)), f"{title!r} (narrowed): no row"
