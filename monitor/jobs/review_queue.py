"""The review queue: turns sent to people on a Label Studio server, their labels brought back
(docs/review-queue.md).

Each run, on the lease like every job:

1. **queue** (the store only): per assistant, a Poisson draw by uncertainty over the scored
   turns since its previous draw (``monitor.stats.active_sampling``; each drawn turn keeps its
   inclusion probability, so the estimates weight its label), then the turns the judge called
   severe and those a user's feedback disputes (unhappy with a turn the judge passed, happy
   with one it failed) that no review batch holds yet (``targeted`` batches: labels for
   agreement, never an estimate). Queued turns wait in the backlog (``review_tasks`` rows
   without a task id).
2. **push**: the backlog, oldest first, becomes tasks of the casewatch project (created on the
   server with the labelling interface when missing). A task shows the turn as data (Label
   Studio's ``Text`` renders it as text, never markup) and carries the judge's bands in its
   ``meta``, which the labelling interface does not show: a label anchored on the judge would
   flatter it. The first push after a start adopts tasks the server already has for queued turns
   (a push whose answer was lost), so a turn never becomes two tasks.
3. **pull**: the project's annotated tasks; each annotation version not pulled before is
   stored as human labels of its batch (``save_labels``: replaced, never doubled) or refused
   with its reason (an unknown band or metric, an unreadable or empty annotation, a task
   casewatch did not push), counted in ``casewatch_review_annotations_total`` either way.
4. **refresh**: when labels were stored, the estimates are recomputed (the quality estimate
   job's ``run_once``, handed over by ``build_jobs``); each run exports, per assistant and
   signal, the share of reviewed turns whose judge band the reviewers gave
   (``casewatch_review_agreement``: over the turns sent for review, severe and unsure ones, so
   not the judge's agreement on all traffic).

The server down or slow: the run logs it once (and once more when it answers again), counts
the failure by stage and reason, keeps every queued turn in the backlog
(``casewatch_review_backlog``) and tries again next run; the daemon's judging never waits on it.
"""

from __future__ import annotations

import json
import secrets
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog

from monitor.annotation.label_studio import LabelStudioClient
from monitor.config.review import ReviewConfig
from monitor.errors import AnnotationServerError
from monitor.jobs.recorders import ReviewQueueRecorder
from monitor.metrics.exporter import Metrics
from monitor.reports.label_files import (
    LABEL_KEYS,
    consensus,
    label_studio_config,
    label_studio_task,
    parse_label_studio,
)
from monitor.runtime.clock import Clock, SystemClock
from monitor.stats.active_sampling import (
    inclusion_probabilities,
    poisson_draw,
    turn_uncertainty,
)
from monitor.stats.agreement import band_agreement
from monitor.storage import labels as label_sql
from monitor.storage import review_queue as queue_sql
from monitor.storage.store import Store

log = structlog.get_logger(__name__)


@dataclass
class ReviewRun:
    """What one run did."""

    queued: dict[str, int] = field(default_factory=dict)  # reason -> turns
    pushed: int = 0
    stored: int = 0  # annotation versions stored as labels
    refused: dict[str, int] = field(default_factory=dict)  # outcome -> annotation versions
    failures: list[str] = field(default_factory=list)  # "push: reason" / "pull: reason"
    backlog: int = 0
    agreement: dict[tuple[str, str], float] = field(default_factory=dict)  # (assistant, signal)


def refusal(reason: str) -> str:
    """The bounded outcome of a refused annotation, from ``parse_label_studio``'s reason."""
    if "band" in reason and "is not one of" in reason:
        return "unknown_band"
    if "unknown metric" in reason:
        return "unknown_metric"
    if "unknown batch" in reason or "is not in batch" in reason:
        return "unknown_turn"
    return "unreadable"


class ReviewQueueJob:
    name = "review_queue"

    def __init__(
        self,
        config: ReviewConfig,
        store: Store,
        metrics: Metrics,
        client: LabelStudioClient,
        *,
        weights: Mapping[str, float],
        critical: Sequence[str],
        refresh: Callable[[], object] | None = None,
        clock: Clock | None = None,
    ) -> None:
        """``client``: the job's from now on (closed by ``close``). ``refresh``: called after a
        pull stored labels (the estimates)."""
        self._cfg = config
        self._store = store
        self._rec = ReviewQueueRecorder(metrics)
        self._client = client
        self._weights = dict(weights)
        self._critical = list(critical)
        self._refresh = refresh
        self._clock = clock or SystemClock()
        self.interval_seconds = config.interval_seconds
        self._project: int | None = None
        self._adopted = False
        self._down: str | None = None  # why the server failed last, while it does
        self.last_run = ReviewRun()

    def close(self) -> None:
        self._client.close()

    def run(self) -> None:
        self.run_once()

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self._clock.time(), tz=UTC)

    def run_once(self) -> ReviewRun:
        run = ReviewRun()
        now = self._now()
        self._queue(run, now)
        self._server(run, "push", lambda: self._push(run))
        self._server(run, "pull", lambda: self._pull(run))
        if run.stored and self._refresh is not None:
            self._refresh()
        self._agreement(run)
        run.backlog = queue_sql.backlog_size(self._store)
        self._rec.backlog(run.backlog)
        log.info("review queue run", queued=run.queued, pushed=run.pushed, stored=run.stored,
                 refused=run.refused, failures=run.failures, backlog=run.backlog)  # fmt: skip
        self.last_run = run
        return run

    def _server(self, run: ReviewRun, stage: str, step: Callable[[], None]) -> None:
        """One stage talking to the server: a failure is counted and logged once, until the
        server answers again."""
        try:
            step()
        except AnnotationServerError as exc:
            self._rec.failed(stage, exc.reason)
            run.failures.append(f"{stage}: {exc.reason}")
            if self._down is None:
                log.warning("review queue: the annotation server failed; pushes are retried "
                            "next run", stage=stage, reason=exc.reason, error=str(exc))  # fmt: skip
            self._down = exc.reason
            return
        if self._down is not None and stage == "pull":
            log.info("review queue: the annotation server answers again", url=self._client.url)
            self._down = None

    def _agreement(self, run: ReviewRun) -> None:
        """Per assistant and signal, the share of reviewed turns whose band the judge gave
        when the turn was queued (the reviewers' consensus band)."""
        review_batches: dict[str, list[str]] = defaultdict(list)
        for b in label_sql.batches(self._store):
            if str(b["id"]).startswith(queue_sql.BATCH_PREFIX):
                review_batches[str(b["assistant"])].append(str(b["id"]))
        for assistant, ids in sorted(review_batches.items()):
            human = consensus(label_sql.stored_labels(self._store, ids))
            if not human:
                continue
            judge: dict[str, dict[str, str]] = {}
            for (_batch, event_id), bands in label_sql.batch_items(self._store, ids).items():
                judge.setdefault(event_id, bands)
            for signal in LABEL_KEYS:
                pairs = [
                    (labels[signal].value, judge[e][signal])
                    for e, labels in human.items()
                    if signal in labels and signal in judge.get(e, {})
                ]
                if not pairs:
                    continue
                share = band_agreement(signal, [h for h, _ in pairs], [j for _, j in pairs])
                if share.accuracy is not None:
                    run.agreement[(assistant, signal)] = share.accuracy
                    self._rec.agreement(assistant, signal, share.accuracy)

    # ------------------------------------------------------------------ queue

    def _queue(self, run: ReviewRun, now: datetime) -> None:
        if self._cfg.uncertain_per_run > 0:
            for assistant in queue_sql.assistants(self._store):
                self._draw_uncertain(run, assistant, now)
        severe = queue_sql.severe_unqueued(self._store, self._cfg.severe_per_run)
        self._targeted(run, severe, "severe", now)
        disputed = queue_sql.disputed_by_users_unqueued(
            self._store, self._cfg.disagreements_per_run
        )
        self._targeted(run, disputed, "disagreement", now)

    def _targeted(
        self,
        run: ReviewRun,
        picked: list[tuple[str, label_sql.FrameRow]],
        reason: str,
        now: datetime,
    ) -> None:
        """Turns picked for what the judge (or a user) said: one targeted batch per assistant."""
        by_assistant: dict[str, list[label_sql.FrameRow]] = defaultdict(list)
        for assistant, row in picked:
            by_assistant[assistant].append(row)
        for assistant, rows in sorted(by_assistant.items()):
            batch = self._batch_row(assistant, now, 0, None, None, len(rows), len(rows))
            queue_sql.queue_batch(self._store, batch | {"strategy": label_sql.TARGETED}, rows,
                                  [None] * len(rows), reason, now)  # fmt: skip
            self._counted(run, reason, len(rows))

    def _draw_uncertain(self, run: ReviewRun, assistant: str, now: datetime) -> None:
        start = queue_sql.last_draw_end(self._store, assistant) or now - timedelta(
            hours=self._cfg.uncertain_window_hours
        )
        frame = list(label_sql.judged_frame(self._store, assistant, start, now))
        if not frame:
            return
        signals = label_sql.turn_signals(self._store, [r.event_id for r in frame])
        u = [
            turn_uncertainty(signals[r.event_id], weights=self._weights, critical=self._critical)
            if r.event_id in signals
            else 0.0
            for r in frame
        ]
        try:
            pi = inclusion_probabilities(u, self._cfg.uncertain_per_run)
        except ValueError:
            # No turn carries an uncertainty signal: a draw would be uniform in disguise. The
            # frame is not closed, so these turns are in the next draw.
            log.info("review queue: no uncertain turn to draw", assistant=assistant,
                     turns=len(frame))  # fmt: skip
            return
        seed = secrets.randbelow(2**62)
        chosen = poisson_draw(pi, seed)
        drawn = [r for r, c in zip(frame, chosen, strict=True) if c]
        probs = [float(p) for p, c in zip(pi, chosen, strict=True) if c]
        batch = self._batch_row(assistant, now, seed, start, now, len(frame), len(drawn))
        queue_sql.queue_batch(self._store, batch | {"strategy": "uncertain"}, drawn, probs,
                              "uncertain", now)  # fmt: skip
        self._counted(run, "uncertain", len(drawn))

    def _counted(self, run: ReviewRun, reason: str, count: int) -> None:
        run.queued[reason] = run.queued.get(reason, 0) + count
        self._rec.queued(reason, count)

    @staticmethod
    def _batch_row(
        assistant: str,
        now: datetime,
        seed: int,
        start: datetime | None,
        end: datetime | None,
        population: int,
        size: int,
    ) -> dict[str, Any]:
        return {
            "id": f"{queue_sql.BATCH_PREFIX}{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(4)}",
            "assistant": assistant,
            "created_at": now,
            "seed": seed,
            "frame_start": start,
            "frame_end": end,
            "population": population,
            "size": size,
        }

    # ------------------------------------------------------------------ push

    def project(self) -> int:
        """The casewatch project's id on the server (created with the interface if missing)."""
        if self._project is None:
            self._project = self._client.ensure_project(
                self._cfg.project_title,
                label_studio_config(),
                "Turns casewatch sends for review: label each metric's band and the turn's.",
            )
        return self._project

    def _push(self, run: ReviewRun) -> None:
        items = queue_sql.backlog(self._store, self._cfg.push_per_run)
        if not items:
            return
        project = self.project()
        if not self._adopted:
            self._adopt(project)
            items = queue_sql.backlog(self._store, self._cfg.push_per_run)
        events = label_sql.turn_events(self._store, [q.event_id for q in items])
        for item in items:
            event = events.get(item.event_id)
            if event is None:  # purged by retention since it was queued
                queue_sql.mark_failed(self._store, [(item.batch_id, item.event_id)],
                                      "the turn is no longer stored")  # fmt: skip
                continue
            task = label_studio_task(item.batch_id, item.event_id, event,
                                     item.inclusion_probability)  # fmt: skip
            meta = {"judge_bands": item.judge_bands, "reason": item.reason}
            try:
                task_id = self._client.create_task(project, task["data"], meta)
            except AnnotationServerError as exc:
                queue_sql.mark_failed(self._store, [(item.batch_id, item.event_id)], str(exc))
                raise
            queue_sql.mark_pushed(self._store, item.batch_id, item.event_id, project, task_id,
                                  self._now())  # fmt: skip
            self._rec.pushed(item.reason)
            run.pushed += 1

    def _adopt(self, project: int) -> None:
        """Tasks the server already holds for queued turns (created, but the answer lost)."""
        waiting = {(q.batch_id, q.event_id) for q in queue_sql.backlog(self._store, 10**9)}
        if waiting:
            for task in self._client.tasks(project):
                data = task.get("data") or {}
                key = (str(data.get("batch_id")), str(data.get("event_id")))
                if key in waiting:
                    queue_sql.mark_pushed(self._store, key[0], key[1], project, int(task["id"]),
                                          self._now())  # fmt: skip
                    waiting.discard(key)
        self._adopted = True

    # ------------------------------------------------------------------ pull

    def _pull(self, run: ReviewRun) -> None:
        project = self.project()
        mapping = queue_sql.pushed_tasks(self._store, project)
        if not mapping:
            return
        exported = self._client.export(project)
        versions = queue_sql.pulled_versions(self._store, project)
        emails: dict[int, str] | None = None
        now = self._now()
        labels: list[dict[str, Any]] = []
        pulled: list[dict[str, Any]] = []
        for task in exported:
            task_id = int(task.get("id", -1))
            for annotation in task.get("annotations") or []:
                if not isinstance(annotation, dict) or "id" not in annotation:
                    continue
                version = str(annotation.get("updated_at") or annotation.get("created_at"))
                if versions.get(int(annotation["id"])) == version:
                    continue  # pulled before, unchanged since
                if emails is None:
                    emails = self._client.user_emails()
                outcome, reason, rows = self._read(task_id, annotation, mapping, emails, now)
                labels.extend(rows)
                pulled.append({"project_id": project, "annotation_id": int(annotation["id"]),
                               "task_id": task_id, "version": version, "outcome": outcome,
                               "reason": reason, "pulled_at": now})  # fmt: skip
                if outcome == "stored":
                    run.stored += 1
                else:
                    run.refused[outcome] = run.refused.get(outcome, 0) + 1
                    log.warning("review queue: annotation refused", task=task_id,
                                annotation=annotation["id"], reason=reason)  # fmt: skip
        label_sql.save_labels(self._store, labels)
        queue_sql.record_pulled(self._store, pulled)
        for row in pulled:
            self._rec.annotation(row["outcome"])

    @staticmethod
    def _read(
        task_id: int,
        annotation: dict[str, Any],
        mapping: Mapping[int, tuple[str, str]],
        emails: Mapping[int, str],
        now: datetime,
    ) -> tuple[str, str | None, list[dict[str, Any]]]:
        """(outcome, reason, label rows) of one annotation version."""
        if annotation.get("was_cancelled"):
            return "empty", "skipped by the labeller", []
        if task_id not in mapping:
            return "unknown_turn", f"task {task_id} was not pushed by casewatch", []
        batch_id, event_id = mapping[task_id]
        who = annotation.get("completed_by")
        if isinstance(who, int):
            who = {"email": emails.get(who, f"label-studio user {who}")}
        task = {"id": task_id, "data": {"batch_id": batch_id, "event_id": event_id},
                "annotations": [annotation | {"completed_by": who}]}  # fmt: skip
        parsed = parse_label_studio(json.dumps([task]), {batch_id: {event_id}}, None, now)
        if parsed.bad:
            reason = "; ".join(b.reason for b in parsed.bad)
            return refusal(reason), reason, []
        if not parsed.rows:
            return "empty", "no band given", []
        return "stored", None, [r | {"imported_at": now} for r in parsed.rows]
