"""The baseline job's ``close`` reaches the comparisons of a run under way: those not started
are cancelled, so a run stopped mid-way judges and stores nothing more once its job is closed."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from prometheus_client import CollectorRegistry

from monitor.config.baseline import BaselineConfig
from monitor.jobs.baseline_tiers import BaselineTiersJob
from monitor.judging.pairwise_judge import OpenAIPairwiseJudge, PairwiseOptions
from monitor.judging.probes import load_probes
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import ManualClock
from monitor.storage.store import Store
from monitor.storage.tables import matches
from tests.fake_judge_replies import Reply, content, pairwise
from tests.fake_judge_server import FakeJudgeServer
from tests.fixtures.judge_server import fake_judge_config
from tests.support.waiting import wait_for

PROBES_FILE = Path(__file__).resolve().parents[3] / "examples" / "probes.jsonl"
PROBES = load_probes(PROBES_FILE)[:2]


def test_closing_the_job_cancels_the_comparisons_its_run_still_queues(
    fake_judge: FakeJudgeServer, store: Store
) -> None:
    judging = threading.Event()
    release = threading.Event()
    tie = pairwise(lambda _pair: "Tie")

    def held(request: dict[str, Any]) -> Reply:
        judging.set()
        release.wait(timeout=60)
        return tie(request)

    fake_judge.responder = held
    with FakeJudgeServer(responder=lambda _req: content("an answer")) as assistant:
        config = BaselineConfig.model_validate(
            {
                "enabled": True,
                "probes": str(PROBES_FILE),
                "judge": "pairwise",
                "concurrency": 1,  # one comparison at a time: the others queue
                "assistants": [
                    {
                        "name": "bot",
                        "endpoint": {"kind": "openai", "url": assistant.base_url, "model": "m"},
                    }
                ],
            }
        )
        judge = OpenAIPairwiseJudge(
            "pairwise", fake_judge_config(fake_judge), PairwiseOptions(), clock=ManualClock()
        )
        job = BaselineTiersJob(
            config, PROBES, judge, store, Metrics(CollectorRegistry()), clock=ManualClock()
        )
        ended: list[BaseException | None] = []

        def run() -> None:
            try:
                job.run()
            except BaseException as exc:  # what ended the run, read below
                ended.append(exc)
            else:
                ended.append(None)

        runner = threading.Thread(target=run, daemon=True)
        runner.start()
        wait_for(judging.is_set, "the first comparison to reach the judge")
        job.close()
        release.set()
        wait_for(lambda: bool(ended), "the stopped run to end")
    with store.transaction(write=False) as conn:
        stored = conn.execute(sa.select(sa.func.count()).select_from(matches)).scalar_one()
    assert stored == 0, "a run whose job was closed went on judging and storing"
    assert ended[0] is not None
