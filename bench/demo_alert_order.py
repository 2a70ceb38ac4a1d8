"""What `make run` shows after the injected regression: which page fires first, and when.

Runs ``casewatch demo`` in-process as `make run` runs it (default rate, the heuristic judge, the
canary regressing ``--regression-after`` seconds after the start, Prometheus and Alertmanager
with rules/ loaded, 1 s scrape and evaluation), polls Prometheus' alerts every
``--poll`` seconds and records, per run, when each of the two pages on the canary was first
seen pending and firing, in seconds after the injection:

- ``CasewatchQualityRegressionDetected``, the sequential detector's page (its baselines pinned
  from one healthy loop, so it is armed from the start);
- ``CasewatchSevereShareBurnRateHigh``, the burn-rate page (``for: 2m``).

A run ends when the burn-rate page fires (or ``--limit`` seconds after the injection). Also
counted: either page on the stable sibling, or on the canary before the injection (false
pages). Reported: each run and the medians. Needs Debian's prometheus and
prometheus-alertmanager (`make services`).

    .venv/bin/python bench/demo_alert_order.py --runs 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # bench/ is not an installed package

from prometheus_client import CollectorRegistry  # noqa: E402

from monitor.config.settings import load_settings  # noqa: E402
from monitor.demo.options import REGRESSION_AFTER_S, DemoOptions  # noqa: E402
from monitor.demo.run import Demo  # noqa: E402

DETECTOR = "CasewatchQualityRegressionDetected"
BURN = "CasewatchSevereShareBurnRateHigh"
CANARY, STABLE = "acme-support-canary", "acme-support-stable"


def one_run(regression_after: float, poll_s: float, limit_s: float) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="demo-alert-order-") as tmp:
        options = DemoOptions(
            port=0,
            db_path=Path(tmp) / "demo.db",
            summary_interval_s=3600.0,
            regression_after_s=regression_after,
        )
        demo = Demo(load_settings(), options, registry=CollectorRegistry(), echo=lambda _: None)
        demo.start()
        if demo.prometheus_url is None:
            demo.stop()
            raise SystemExit("Prometheus did not start: run `make services` first")
        runner = threading.Thread(target=demo.run, daemon=True)
        runner.start()
        first: dict[str, float] = {}
        false_pages: set[str] = set()
        try:
            while runner.is_alive():
                at = demo.regressed_at
                now = time.monotonic()
                for a in demo.alert_states():
                    key = f"{a.name}/{a.state}"
                    if a.assistant == STABLE or (a.assistant == CANARY and at is None):
                        if a.name in (DETECTOR, BURN):
                            false_pages.add(f"{a.name}[{a.assistant}]")
                    elif a.assistant == CANARY and at is not None:
                        first.setdefault(key, now - at)
                if at is not None and (f"{BURN}/firing" in first or now - at > limit_s):
                    break
                time.sleep(poll_s)
        finally:
            demo.request_stop()
            runner.join(120)
            demo.cleanup()
        return {"seconds_after_injection": first, "false_pages": sorted(false_pages)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--regression-after", type=float, default=REGRESSION_AFTER_S)
    parser.add_argument("--poll", type=float, default=1.0, help="seconds between alert reads")
    parser.add_argument("--limit", type=float, default=600.0, help="seconds after injection")
    args = parser.parse_args(argv)
    runs = []
    for i in range(args.runs):
        row = one_run(args.regression_after, args.poll, args.limit)
        runs.append(row)
        seen = row["seconds_after_injection"]
        assert isinstance(seen, dict)
        print(
            f"run {i + 1}: "
            + ", ".join(f"{k} {v:.0f} s" for k, v in sorted(seen.items(), key=lambda kv: kv[1]))
            + f"; false pages: {row['false_pages'] or 'none'}",
            flush=True,
        )
    medians = {}
    for key in (f"{DETECTOR}/pending", f"{DETECTOR}/firing", f"{BURN}/pending", f"{BURN}/firing"):
        values = [
            float(r["seconds_after_injection"][key])  # type: ignore[index]
            for r in runs
            if key in r["seconds_after_injection"]  # type: ignore[operator]
        ]
        if values:
            medians[key] = statistics.median(values)
    print(
        "medians (s after the injection): " + ", ".join(f"{k} {v:.0f}" for k, v in medians.items())
    )
    print(json.dumps({"runs": runs, "medians": medians}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
