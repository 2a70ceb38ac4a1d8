"""Store against real databases: every test taking ``store``/``db_url`` runs on SQLite and PG."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

import monitor.storage.retention as retention_module
from monitor.config.storage import StorageConfig
from monitor.errors import StorageError, UnstorableRow
from monitor.runtime.clock import ManualClock
from monitor.schema.turn import METRICS, TurnEvent, Verdict
from monitor.storage.audit import counts, has_verdict, stored_event, stored_verdicts
from monitor.storage.engine import normalize_url, redact_url
from monitor.storage.retention import purge_older_than
from monitor.storage.store import Store
from monitor.storage.tables import job_leases
from tests.fixtures import refused_rows
from tests.fixtures.databases import make_turn, make_verdict

DAY = 86_400.0


def _run_threads(n: int, target: Callable[[], None]) -> None:
    threads = [threading.Thread(target=target) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_save_round_trips_every_audit_field(db_url: str) -> None:
    clock = ManualClock(start=1_800_000_000.0)
    store = Store(db_url, clock=clock)
    store.migrate()
    turn = make_turn("evt-1", feedback={"rating": "negative"}, producer_extra={"k": "v"})
    verdict = make_verdict(turn)

    assert store.save(turn, verdict) is True

    assert counts(store) == {"turns": 1, "verdicts": 1, "judgments": 2}
    [row] = stored_verdicts(store)
    assert row["event_id"] == "evt-1"
    assert row["conversation_id"] == "conv-evt-1"
    assert row["turn_index"] == 2
    assert (row["assistant_name"], row["assistant_version"], row["assistant_model"]) == (
        "helpdesk",
        "1.4.2",
        "gpt-x",
    )
    # Timezone-aware on both backends; the instant survives a non-UTC producer offset.
    assert row["event_timestamp"] == turn.timestamp
    assert row["event_timestamp"].tzinfo is not None
    assert row["stored_at"] == datetime.fromtimestamp(1_800_000_000.0, tz=UTC)
    assert row["judge_config_hash"] == "cfg-a"
    assert row["status"] == "ok"
    assert row["failure_reason"] is None
    assert row["weight_profile"] == "default"
    assert row["s_final"] == pytest.approx(verdict.s_final)
    assert row["final_band"] == "moderate"
    assert row["turn_band"] == "moderate"
    assert row["metric_scores"] == pytest.approx(verdict.metric_scores)
    assert row["metric_bands"] == {m: "moderate" for m in METRICS}
    assert row["arbitrated"] is True
    assert row["arbitration_trigger"] == "any_band"

    stored = row["judgments"]
    assert [j["judge"] for j in stored] == ["primary", "secondary"]
    for got, want in zip(stored, verdict.judgments, strict=True):
        assert want.scores is not None
        assert got["scores"] == want.scores.model_dump(mode="json")
        for field in (
            "kind",
            "model",
            "role",
            "status",
            "failure_reason",
            "failure_detail",
            "raw_output",
            "prompt_version",
            "prompt_hash",
            "attempts",
            "input_tokens",
            "output_tokens",
            "cost_usd",
            "latency_seconds",
        ):
            assert got[field] == getattr(want, field), field
    store.close()


def test_full_event_is_kept_for_audit_including_unknown_fields(store: Store) -> None:
    turn = make_turn("evt-1", producer_extra={"k": "v"})
    store.save(turn, make_verdict(turn))
    event = stored_event(store, "evt-1")
    assert event is not None
    assert TurnEvent.model_validate(event) == turn
    assert event["producer_extra"] == {"k": "v"}
    assert stored_event(store, "evt-unknown") is None


def test_saving_the_same_event_and_config_twice_is_a_noop(store: Store) -> None:
    turn = make_turn()
    assert store.save(turn, make_verdict(turn)) is True
    assert store.save(turn, make_verdict(turn)) is False
    assert counts(store) == {"turns": 1, "verdicts": 1, "judgments": 2}


def test_a_new_judge_config_adds_a_verdict_for_the_same_turn(store: Store) -> None:
    turn = make_turn()
    assert store.save(turn, make_verdict(turn, config_hash="cfg-a"))
    assert store.save(turn, make_verdict(turn, config_hash="cfg-b"))
    assert counts(store) == {"turns": 1, "verdicts": 2, "judgments": 4}
    assert has_verdict(store, "evt-1", "cfg-a")
    assert has_verdict(store, "evt-1", "cfg-b")
    assert not has_verdict(store, "evt-1", "cfg-c")


def test_judge_failed_verdict_is_stored_with_its_reason_and_no_scores(store: Store) -> None:
    turn = make_turn()
    verdict = make_verdict(turn, failed=True)
    assert store.save(turn, verdict)
    [row] = stored_verdicts(store)
    assert row["status"] == "judge_failed"
    assert row["failure_reason"] == "invalid_output"
    assert row["s_final"] is None
    assert row["final_band"] is None and row["turn_band"] is None
    assert row["metric_scores"] == {} and row["metric_bands"] == {}
    [judgment] = row["judgments"]
    assert judgment["status"] == "judge_failed"
    assert judgment["scores"] is None
    assert judgment["failure_detail"] == "hallucination: field required"
    assert judgment["raw_output"] == '{"hallucination": '
    assert judgment["attempts"] == 3


def test_save_many_is_idempotent_including_duplicates_inside_a_batch(store: Store) -> None:
    a, b, c, d = (make_turn(f"evt-{x}") for x in "abcd")
    first: list[tuple[TurnEvent, Verdict]] = [
        (a, make_verdict(a)),
        (b, make_verdict(b, failed=True)),
        (a, make_verdict(a)),
        (c, make_verdict(c)),
    ]
    assert store.save_many(first) == 3
    assert counts(store) == {"turns": 3, "verdicts": 3, "judgments": 5}

    second = [(t, make_verdict(t)) for t in (a, b, c, d)]
    assert store.save_many(second) == 1
    assert counts(store) == {"turns": 4, "verdicts": 4, "judgments": 7}
    assert store.save_many([]) == 0


def test_save_many_rejects_a_verdict_paired_with_another_turn(store: Store) -> None:
    a, b = make_turn("evt-a"), make_turn("evt-b")
    with pytest.raises(ValueError, match="evt-a"):
        store.save_many([(b, make_verdict(a))])
    assert counts(store)["turns"] == 0


def test_existing_returns_only_events_judged_under_that_config(store: Store) -> None:
    turns = [make_turn(f"evt-{i}") for i in range(3)]
    store.save_many([(t, make_verdict(t, config_hash="cfg-a")) for t in turns[:2]])
    store.save(turns[2], make_verdict(turns[2], config_hash="cfg-b"))
    ids = [f"evt-{i}" for i in range(1200)]  # more than one IN chunk
    assert store.existing(ids, "cfg-a") == {"evt-0", "evt-1"}
    assert store.existing(iter(ids), "cfg-b") == {"evt-2"}
    assert store.existing([], "cfg-a") == set()


def test_verdicts_filters_by_assistant_newest_first_and_limits(store: Store) -> None:
    for i, name in enumerate(["alpha", "beta", "alpha"]):
        turn = make_turn(f"evt-{i}", assistant=name)
        store.save(turn, make_verdict(turn))
    assert [r["event_id"] for r in stored_verdicts(store, assistant="alpha")] == ["evt-2", "evt-0"]
    assert [r["event_id"] for r in stored_verdicts(store, limit=1)] == ["evt-2"]
    assert stored_verdicts(store, assistant="nobody") == []


def test_purge_deletes_only_rows_stored_before_the_cutoff(db_url: str) -> None:
    clock = ManualClock(start=1_800_000_000.0)
    store = Store(db_url, clock=clock)
    store.migrate()
    a, b, c = make_turn("evt-a"), make_turn("evt-b"), make_turn("evt-c")
    store.save_many([(a, make_verdict(a)), (b, make_verdict(b, failed=True))])
    clock.advance(10 * DAY)
    # evt-a is judged again under a new config: its turn row must survive the purge.
    store.save_many([(a, make_verdict(a, config_hash="cfg-b")), (c, make_verdict(c))])
    assert counts(store) == {"turns": 3, "verdicts": 4, "judgments": 7}

    cutoff = datetime.fromtimestamp(clock.time(), tz=UTC) - timedelta(days=5)
    assert purge_older_than(store, cutoff) == 2

    assert counts(store) == {"turns": 2, "verdicts": 2, "judgments": 4}
    remaining = {(r["event_id"], r["judge_config_hash"]) for r in stored_verdicts(store)}
    assert remaining == {("evt-a", "cfg-b"), ("evt-c", "cfg-a")}
    assert purge_older_than(store, cutoff) == 0
    store.close()


def test_purge_works_through_more_rows_than_one_batch(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(retention_module, "_PURGE_BATCH", 3)
    clock = ManualClock(start=1_800_000_000.0)
    store = Store(sqlite_url, clock=clock)
    store.migrate()
    turns = [make_turn(f"evt-{i}") for i in range(7)]
    store.save_many([(t, make_verdict(t, failed=True)) for t in turns])
    deleted = purge_older_than(store, datetime.fromtimestamp(clock.time() + 1, tz=UTC))
    assert deleted == 7
    assert counts(store) == {"turns": 0, "verdicts": 0, "judgments": 0}
    store.close()


def test_concurrent_saves_of_one_event_store_exactly_one_verdict(store: Store) -> None:
    turn = make_turn()
    verdict = make_verdict(turn)
    barrier = threading.Barrier(4)
    results: list[bool] = []
    errors: list[BaseException] = []

    def worker() -> None:
        barrier.wait()
        try:
            results.append(store.save(turn, verdict))
        except BaseException as exc:
            errors.append(exc)

    _run_threads(4, worker)
    assert errors == []
    assert sorted(results) == [False, False, False, True]
    assert counts(store) == {"turns": 1, "verdicts": 1, "judgments": 2}


def test_concurrent_overlapping_batches_neither_deadlock_nor_double_store(db_url: str) -> None:
    # Separate Stores, like replicas of one consumer group replaying the same partition.
    stores = [Store(db_url) for _ in range(4)]
    stores[0].migrate()
    pairs = [(t, make_verdict(t)) for t in (make_turn(f"evt-{i:03}") for i in range(60))]
    barrier = threading.Barrier(len(stores))
    new: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def worker(s: Store, seed: int) -> None:
        batch = pairs[:]
        random.Random(seed).shuffle(batch)
        barrier.wait()
        try:
            n = s.save_many(batch)
            with lock:
                new.append(n)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(s, i)) for i, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sum(new) == 60
    assert counts(stores[0]) == {"turns": 60, "verdicts": 60, "judgments": 120}
    for s in stores:
        s.close()


def test_unreachable_database_pings_false_and_save_raises_a_clear_error() -> None:
    store = Store("postgresql+psycopg://postgres:hunter2@127.0.0.1:1/x")
    assert store.ping() is False
    assert store.last_error
    turn = make_turn()
    with pytest.raises(StorageError) as info:
        store.save(turn, make_verdict(turn))
    message = str(info.value)
    assert "127.0.0.1:1" in message
    assert "reachable" in message
    assert "hunter2" not in message
    assert info.value.__cause__ is not None
    store.close()


def test_ping_is_true_for_a_reachable_database(db_url: str) -> None:
    store = Store(db_url)
    assert store.ping() is True
    assert store.last_error is None
    store.close()


def test_an_unmigrated_database_tells_the_operator_to_upgrade(db_url: str) -> None:
    store = Store(db_url)
    turn = make_turn()
    with pytest.raises(StorageError, match="casewatch db upgrade"):
        store.save(turn, make_verdict(turn))
    store.close()


@pytest.mark.parametrize(
    "url",
    [
        "mysql://u@h/db",
        "not a url",
        "sqlite+nosuchdriver:///x.db",
        "sqlite://",
        "sqlite:///:memory:",
    ],
    ids=str,
)
def test_unusable_urls_raise_storage_error(url: str) -> None:
    with pytest.raises(StorageError, match=r"storage\.url"):
        Store(url)


def test_from_config_and_url_helpers(tmp_path: object) -> None:
    store = Store.from_config(StorageConfig(url=f"sqlite:///{tmp_path}/x.db"))
    assert store.ping()
    store.close()
    assert normalize_url("postgres://u@h/db") == "postgresql+psycopg://u@h/db"
    assert normalize_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"
    assert normalize_url("postgresql+psycopg://u@h/db") == "postgresql+psycopg://u@h/db"
    assert "s3cret" not in redact_url("postgresql://u:s3cret@h/db")


# ---------------------------------------------------------------- rows the database refuses


def test_refused_rows_are_isolated_and_the_rest_of_the_batch_is_stored(store: Store) -> None:
    kinds = refused_rows.kinds(store.dialect)
    good = [(t, make_verdict(t)) for t in (make_turn(f"ok-{i:02d}") for i in range(12))]
    bad = [refused_rows.refused_pair(store.dialect, k, f"bad-{k}") for k in kinds]
    # Bad rows at the start, in the middle and at the end of the batch.
    batch = [bad[0], *good[:6], *bad[1:-1], *good[6:], bad[-1]] if len(bad) > 1 else [*good, *bad]

    result = store.save_batch(batch)

    assert result.inserted == len(good)
    assert sorted(r.item[0].event_id for r in result.refused) == sorted(f"bad-{k}" for k in kinds)
    for refused in result.refused:
        assert refused.message  # the database's (or driver's) own words
        assert "storage.url" not in refused.message
    assert counts(store)["verdicts"] == len(good)
    assert store.existing([t.event_id for t, _ in good], "cfg-a") == {t.event_id for t, _ in good}


@pytest.mark.parametrize("kind_index", range(5))
def test_each_kind_of_refusal_names_the_event_and_is_not_an_outage(
    store: Store, kind_index: int
) -> None:
    kinds = refused_rows.kinds(store.dialect)
    if kind_index >= len(kinds):
        pytest.skip(f"{store.dialect} refuses {len(kinds)} kinds here")
    kind = kinds[kind_index]
    turn, verdict = refused_rows.refused_pair(store.dialect, kind, f"evt-{kind}")

    with pytest.raises(UnstorableRow) as info:
        store.save(turn, verdict)

    assert f"evt-{kind}" in str(info.value)
    assert "storage.url" not in str(info.value)
    assert info.value.row == f"evt-{kind}"
    assert counts(store) == {"turns": 0, "verdicts": 0, "judgments": 0}


def test_an_outage_is_still_a_storage_error_not_a_refusal(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'db.sqlite'}")  # no schema: like a broken database
    try:
        turn = make_turn("evt-1")
        with pytest.raises(StorageError) as info:
            store.save_batch([(turn, make_verdict(turn))])
        assert not isinstance(info.value, UnstorableRow)
        assert "db upgrade" in str(info.value)
    finally:
        store.close()


def test_an_event_id_the_database_cannot_look_up_is_reported_absent(store: Store) -> None:
    # PostgreSQL refuses a NUL even in a WHERE clause; SQLite takes it. Either way the look-up
    # answers for the other ids instead of failing the whole batch forever.
    turn = make_turn("evt-1")
    store.save(turn, make_verdict(turn))
    assert store.existing(["evt-1", "evt\x00bad", "evt-2"], "cfg-a") == {"evt-1"}


def test_upsert_updates_the_named_columns_or_keeps_the_row(store: Store) -> None:
    # The one conflict clause both dialects run: a lease taken, refused to another owner while
    # it holds, and an insert that keeps the row it finds.
    now = datetime(2026, 1, 1, tzinfo=UTC)
    later = datetime(2026, 1, 2, tzinfo=UTC)

    def take(owner: str, at: datetime) -> None:
        row = {"job": "drift", "owner": owner, "acquired_at": at, "expires_at": at}
        stmt = store.upsert(
            job_leases,
            ["job"],
            ["owner", "acquired_at", "expires_at"],
            where=job_leases.c.expires_at < at,
            values=row,
        )
        with store.transaction(write=True) as conn:
            conn.execute(stmt)

    def owner() -> str:
        with store.transaction(write=False) as conn:
            return str(conn.execute(sa.select(job_leases.c.owner)).scalar_one())

    take("a", now)
    take("b", now)  # the lease has not expired before now: the row stays a's
    assert owner() == "a"
    take("b", later)
    assert owner() == "b"
    keep = store.upsert(
        job_leases,
        ["job"],
        values={"job": "drift", "owner": "c", "acquired_at": later, "expires_at": later},
    )
    with store.transaction(write=True) as conn:
        conn.execute(keep)
    assert owner() == "b"
