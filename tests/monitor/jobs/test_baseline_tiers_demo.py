"""The baseline-tier job scheduled in the daemon, end to end on the embedded broker: the demo
replays the example turns through Kafka into the store, and the job judges the stored turns
that match a probe against the High/Medium/Low tiers and exports the result."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sqlalchemy as sa
from prometheus_client import CollectorRegistry

from monitor.config.settings import load_settings
from monitor.demo.options import DemoOptions
from monitor.demo.run import Demo
from monitor.storage.store import Store
from monitor.storage.tables import matches, turns
from tests.support.http import scrape
from tests.support.waiting import DEADLINE_S, wait_for

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
ASSISTANTS = ("acme-support-stable", "acme-support-canary")


def win_rates(text: str) -> dict[tuple[str, str], float]:
    pattern = r'^casewatch_baseline_win_rate\{assistant="([^"]+)",tier="([^"]+)"\} (\S+)'
    return {(a, t): float(v) for a, t, v in re.findall(pattern, text, re.MULTILINE)}


@pytest.mark.usefixtures("tansu")
def test_the_daemon_runs_the_baseline_job_on_stored_turns(tmp_path: Path) -> None:
    settings = load_settings(
        baseline={
            "enabled": True,
            "probes": str(EXAMPLES / "probes.jsonl"),
            "judge": "heuristic",
            "interval_seconds": 1,
            "assistants": [{"name": name, "from_turns": True} for name in ASSISTANTS],
        }
    )
    db = tmp_path / "demo.db"
    demo = Demo(
        settings,
        DemoOptions(rate=200, port=0, db_path=db, summary_interval_s=60),
        registry=CollectorRegistry(),
        echo=lambda _line: None,
    )
    demo.start()
    try:
        wait_for(
            lambda: len(win_rates(scrape(demo.metrics_url))) == 6,
            "the baseline metrics of both assistants' three tiers",
            timeout=DEADLINE_S,
            interval=0.5,
        )
        text = scrape(demo.metrics_url)
        rates = win_rates(text)
    finally:
        demo.stop()
        demo.cleanup()
    assert all(0.0 <= r <= 1.0 for r in rates.values())
    for name in ASSISTANTS:
        # The Low tier corrupts an identifier of the High answer: never harder to beat.
        assert rates[(name, "low")] >= rates[(name, "high")]
        assert re.search(rf'casewatch_elo_rating{{assistant="{name}"}} \d', text)
        unknown = rf'casewatch_pairwise_confidence_total{{assistant="{name}",kind="unknown"}} (\S+)'
        found = re.search(unknown, text)
        assert found is not None and float(found.group(1)) > 0
    assert re.search(r'casewatch_job_runs_total\{job="baseline_tiers",outcome="ok"\} [1-9]', text)

    store = Store(f"sqlite:///{db}")
    try:
        with store.transaction(write=False) as conn:
            rows = conn.execute(sa.select(matches.c.source, matches.c.event_id)).all()
            stored = set(conn.execute(sa.select(turns.c.event_id)).scalars())
    finally:
        store.close()
    assert rows and {r.source for r in rows} == {"turns"}
    assert {r.event_id for r in rows} <= stored  # every answer judged is a stored turn
