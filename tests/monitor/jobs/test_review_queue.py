"""The review queue against a real Label Studio server: turns pushed as tasks, annotated through
Label Studio's API as a person's submit does, pulled back as labels, and the estimate refreshed;
idempotent both ways; the server down; an annotation naming an unknown band."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from prometheus_client import CollectorRegistry

from monitor.annotation.label_studio import LabelStudioClient
from monitor.annotation.label_studio_server import LabelStudioServer
from monitor.config.settings import load_settings
from monitor.errors import ConfigError
from monitor.jobs.build import build_jobs
from monitor.jobs.inputs import read_job_inputs
from monitor.jobs.scheduler import JobScheduler
from monitor.metrics.exporter import Metrics
from monitor.reports.label_files import consensus
from monitor.runtime.clock import ManualClock
from monitor.storage import labels as label_sql
from monitor.storage.store import Store
from monitor.storage.tables import label_batches, outcome_events, review_tasks
from monitor.stream.prepare import prepare
from tests.fixtures.label_studio import free_port
from tests.support.review_queue import (
    NOW,
    TURNS,
    disputed,
    person_bands,
    review_job,
    seed_review_turns,
    severe,
)


def _queued(store: Store) -> dict[str, tuple[str, int | None]]:
    """event id -> (reason, task id) of every queued turn."""
    with store.transaction(write=False) as conn:
        rows = conn.execute(
            sa.select(review_tasks.c.event_id, review_tasks.c.reason, review_tasks.c.task_id)
        ).all()
    return {str(e): (str(r), None if t is None else int(t)) for e, r, t in rows}


def _strategies(store: Store) -> dict[str, str]:
    with store.transaction(write=False) as conn:
        rows = conn.execute(sa.select(label_batches.c.id, label_batches.c.strategy)).all()
    return {str(i): str(s) for i, s in rows}


def test_round_trip_push_annotate_pull_estimate(
    store: Store, label_studio_client: LabelStudioClient, review_project_title: str
) -> None:
    seed_review_turns(store)
    registry = CollectorRegistry()
    job = review_job(store, label_studio_client, review_project_title, registry)

    first = job.run_once()
    queued = _queued(store)
    # Every disputed turn is drawn (probability 1); every severe turn not drawn is targeted.
    assert {f"r-{i:03d}" for i in range(TURNS) if disputed(i)} <= set(queued)
    assert {f"r-{i:03d}" for i in range(TURNS) if severe(i)} <= set(queued)
    assert first.pushed == len(queued) and first.backlog == 0 and first.failures == []
    assert all(task is not None for _, task in queued.values())
    # The uncertainty draw is random: a severe turn it did not take is queued as targeted.
    drawn = {e for e, (reason, _) in queued.items() if reason == "uncertain"}
    severe_ids = {f"r-{i:03d}" for i in range(TURNS) if severe(i)}
    targeted = {"targeted"} if severe_ids - drawn else set()
    assert set(_strategies(store).values()) == {"uncertain"} | targeted

    project = job.project()
    tasks = {int(t["id"]): t for t in label_studio_client.tasks(project)}
    assert set(tasks) == {task for _, task in queued.values()}
    for task in tasks.values():
        data, meta = task["data"], task["meta"]
        assert data["query"] and data["answer"]  # the turn, shown as data
        assert "judge_bands" not in data  # never shown to the person labelling...
        assert meta["judge_bands"]["turn_band"] in {"severe", "moderate", "minor", "none"}
        if queued[data["event_id"]][0] == "uncertain":
            assert 0 < data["inclusion_probability"] <= 1
    # A person opens each task and submits a band per metric (Label Studio's annotation API).
    for task_id, task in tasks.items():
        label_studio_client.create_annotation(task_id, person_bands(task["data"]["event_id"]))

    second = job.run_once()
    assert second.stored == len(tasks) and second.refused == {} and second.pushed == 0
    batch_ids = list(_strategies(store))
    human = consensus(label_sql.stored_labels(store, batch_ids))
    assert set(human) == set(queued)
    for event_id, bands in human.items():
        assert {k: b.value for k, b in bands.items()} == person_bands(event_id)
    labelled_by = {r["labeller"] for r in label_sql.stored_labels(store, batch_ids)}
    assert labelled_by == {"reviewer@casewatch.test"}
    # The estimate was refreshed from the uncertainty-drawn batch: the disputed turns the judge
    # passed are severe to people, so the corrected rate is above the judge's own. For every
    # draw, not only on average: the disputed turns are drawn with probability 1, people call
    # every turn the judge called severe severe too, so with the tuned lambda in [0, 1] the
    # estimate is at least (disputed turns the judge passed) / turns, 4/30, above the judge's 2/30.
    corrected = registry.get_sample_value(
        "casewatch_quality_estimate",
        {"assistant": "helpdesk", "signal": "turn_band", "bound": "point"},
    )
    judge_only = registry.get_sample_value(
        "casewatch_quality_estimate",
        {"assistant": "helpdesk", "signal": "turn_band_judge_only", "bound": "point"},
    )
    assert corrected is not None and judge_only is not None and corrected > judge_only
    assert judge_only == pytest.approx(
        sum(severe(i) and not disputed(i) for i in range(TURNS)) / TURNS
    )
    # The labels-only rate is the Horvitz-Thompson mean over the frame, from the stored draw.
    (uncertain,) = [b for b, s in _strategies(store).items() if s == "uncertain"]
    probs = label_sql.item_probabilities(store, [uncertain])
    severe_to_people = [
        p for (_b, e), p in probs.items() if person_bands(e)["turn_band"] == "severe"
    ]
    labels_only = registry.get_sample_value(
        "casewatch_quality_estimate",
        {"assistant": "helpdesk", "signal": "turn_band_labels_only", "bound": "point"},
    )
    assert labels_only == pytest.approx(sum(1 / p for p in severe_to_people) / TURNS)
    stored = registry.get_sample_value("casewatch_review_annotations_total", {"outcome": "stored"})
    assert stored == len(tasks)
    # The judge against the reviewers, computed here from the tasks: the disputed turns the
    # judge passed are where they part.
    same = [
        t["meta"]["judge_bands"]["turn_band"] == person_bands(t["data"]["event_id"])["turn_band"]
        for t in tasks.values()
    ]
    assert 0 < sum(same) < len(same)
    shown = registry.get_sample_value(
        "casewatch_review_agreement", {"assistant": "helpdesk", "signal": "turn_band"}
    )
    assert shown == pytest.approx(sum(same) / len(same))
    assert second.agreement[("helpdesk", "turn_band")] == pytest.approx(sum(same) / len(same))

    # Idempotent both ways: nothing pushed twice, nothing stored twice.
    third = job.run_once()
    assert (third.pushed, third.stored, third.queued) == (0, 0, {})
    assert len(list(label_studio_client.tasks(project))) == len(tasks)
    assert len(label_sql.stored_labels(store, batch_ids)) == 2 * len(tasks)
    job.close()


def test_a_push_whose_answer_was_lost_is_adopted_not_repeated(
    store: Store, label_studio: LabelStudioServer, review_project_title: str
) -> None:
    seed_review_turns(store)
    client = LabelStudioClient(label_studio.url, label_studio.login.token)
    job = review_job(store, client, review_project_title)
    job.run_once()
    project = job.project()
    created = len(list(client.tasks(project)))
    # The server created the tasks, casewatch never heard back: the mapping is lost.
    with store.transaction(write=True) as conn:
        conn.execute(sa.update(review_tasks).values(task_id=None, project_id=None))
    restarted = review_job(
        store, LabelStudioClient(label_studio.url, label_studio.login.token), review_project_title
    )
    run = restarted.run_once()
    assert run.pushed == 0 and run.backlog == 0
    assert len(list(client.tasks(project))) == created
    assert all(task is not None for _, task in _queued(store).values())
    job.close()
    restarted.close()


def test_an_unknown_band_is_refused_with_its_reason_and_counted_once(
    store: Store, label_studio_client: LabelStudioClient, review_project_title: str
) -> None:
    seed_review_turns(store)
    registry = CollectorRegistry()
    job = review_job(store, label_studio_client, review_project_title, registry)
    job.run_once()
    task_id = next(t for _, t in _queued(store).values() if t is not None)
    # Label Studio's API takes any choice; the interface offers only the four bands.
    label_studio_client.create_annotation(task_id, {"turn_band": "catastrophic"})

    run = job.run_once()
    assert run.refused == {"unknown_band": 1} and run.stored == 0
    assert label_sql.stored_labels(store, list(_strategies(store))) == []
    refused = {"outcome": "unknown_band"}
    assert registry.get_sample_value("casewatch_review_annotations_total", refused) == 1
    with store.transaction(write=False) as conn:
        reason = conn.execute(sa.text("SELECT reason FROM review_annotations")).scalar()
    assert "band 'catastrophic' is not one of severe, moderate, minor, none" in str(reason)
    job.run_once()  # the same annotation version: not refused (nor counted) again
    assert registry.get_sample_value("casewatch_review_annotations_total", refused) == 1
    job.close()


def test_server_down_keeps_a_counted_backlog_pushed_when_it_is_back(
    store: Store, label_studio: LabelStudioServer, review_project_title: str
) -> None:
    seed_review_turns(store)
    registry = CollectorRegistry()
    nobody = LabelStudioClient(f"http://127.0.0.1:{free_port()}", "token", timeout_s=5)
    down = review_job(store, nobody, review_project_title, registry)
    run = down.run_once()
    queued = sum(run.queued.values())
    assert queued > 0 and run.pushed == 0
    assert run.failures == ["push: unreachable", "pull: unreachable"]
    assert run.backlog == queued
    assert registry.get_sample_value("casewatch_review_backlog") == queued
    failed = {"stage": "push", "reason": "unreachable"}
    assert registry.get_sample_value("casewatch_review_failures_total", failed) == 1
    down.close()

    back = review_job(
        store, LabelStudioClient(label_studio.url, label_studio.login.token), review_project_title
    )
    again = back.run_once()
    assert again.queued == {} and again.pushed == queued and again.backlog == 0
    back.close()


def test_the_daemon_runs_the_job_on_its_lease_from_the_settings(
    store: Store,
    label_studio: LabelStudioServer,
    review_project_title: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seed_review_turns(store)
    monkeypatch.setenv("REVIEW_TOKEN_FOR_TEST", label_studio.login.token)
    review = {"enabled": True, "url": label_studio.url, "token_env": "REVIEW_TOKEN_FOR_TEST",
              "project_title": review_project_title}  # fmt: skip
    settings = load_settings(storage={"url": store.url, "retention_days": None}, review=review)
    clock = ManualClock(NOW.timestamp())
    metrics = Metrics(CollectorRegistry())
    jobs = {j.name: j for j in build_jobs(settings, store, metrics, clock,
                                          inputs=read_job_inputs(settings))}  # fmt: skip
    scheduler = JobScheduler(store, metrics, clock=clock)
    scheduler.add(jobs["review_queue"])
    assert scheduler.run_once("review_queue") == "ok"
    assert _queued(store) and all(task is not None for _, task in _queued(store).values())
    for job in jobs.values():
        job.close()

    unset = review | {"token_env": "REVIEW_TOKEN_NOT_SET"}
    with pytest.raises(ConfigError, match="REVIEW_TOKEN_NOT_SET"):
        prepare(load_settings(storage={"url": store.url}, review=unset), clock)


def test_turns_users_dispute_are_queued_once(
    store: Store, label_studio: LabelStudioServer, review_project_title: str
) -> None:
    seed_review_turns(store)
    # r-001 (the judge passed it) got a thumbs down: the judge was blind to what the user saw;
    # r-002 got a thumbs up the judge agreed with, which is no dispute.
    with store.transaction(write=True) as conn:
        conn.execute(
            sa.insert(outcome_events),
            [
                {"outcome_id": f"fb-{event}", "kind": "feedback", "signal_kind": "thumbs",
                 "assistant_name": "helpdesk", "turn_event_id": event, "polarity": polarity,
                 "event_timestamp": NOW, "received_at": NOW, "agreement": agreement}
                for event, polarity, agreement in (("r-001", "negative", "judge_blind"),
                                                   ("r-002", "positive", "agree_happy"))
            ],
        )  # fmt: skip
    client = LabelStudioClient(label_studio.url, label_studio.login.token)
    job = review_job(store, client, review_project_title, severe_per_run=0, uncertain_n=0)
    run = job.run_once()
    assert run.queued == {"disagreement": 1} and run.pushed == 1
    assert _queued(store)["r-001"][0] == "disagreement"
    assert set(_strategies(store).values()) == {"targeted"}
    (task,) = list(client.tasks(job.project()))
    assert task["data"]["event_id"] == "r-001" and task["meta"]["reason"] == "disagreement"
    assert job.run_once().queued == {}  # queued once
    job.close()
