from __future__ import annotations

from monitor.runtime.clock import ManualClock
from monitor.stream.readiness import Readiness


class Probe:
    def __init__(self, ok: bool) -> None:
        self.ok = ok
        self.calls = 0

    def ping(self) -> bool:
        self.calls += 1
        return self.ok


def test_probes_run_once_per_interval_and_are_cached_between() -> None:
    clock = ManualClock()
    broker, db = Probe(True), Probe(True)
    r = Readiness(broker, db, lambda: True, clock, interval_s=5.0)
    checks = r.checks()
    assert not checks["broker"]() and not checks["database"]()  # unknown until first probe
    r.update()
    r.update()
    assert (broker.calls, db.calls) == (1, 1)
    assert checks["broker"]() and checks["database"]()
    db.ok = False
    clock.advance(4.9)
    r.update()
    assert checks["database"]()  # cached: a scrape never triggers a probe
    clock.advance(0.1)
    r.update()
    assert not checks["database"]()


def test_failing_writes_or_a_failed_broker_call_make_it_unready_at_once() -> None:
    clock = ManualClock()
    writes = {"ok": True}
    r = Readiness(Probe(True), Probe(True), lambda: writes["ok"], clock)
    r.update()
    checks = r.checks()
    writes["ok"] = False
    assert not checks["database"]()
    r.broker_failed()
    assert not checks["broker"]()
