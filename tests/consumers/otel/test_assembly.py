"""Trace assembly: completion by root or idleness, the memory caps, and message holds."""

from __future__ import annotations

from consumers.otel.assembly import MessageHolds, TraceAssembler
from tests.consumers.otel.spans import span


def _t(n: int) -> str:
    return f"{n:032x}"


def _assembler(**kw: int | float) -> TraceAssembler:
    opts: dict[str, float] = {
        "idle_seconds": 30.0,
        "max_traces": 100,
        "max_spans": 1000,
        "max_spans_per_trace": 100,
    }
    opts.update(kw)
    return TraceAssembler(
        idle_seconds=opts["idle_seconds"],
        max_traces=int(opts["max_traces"]),
        max_spans=int(opts["max_spans"]),
        max_spans_per_trace=int(opts["max_spans_per_trace"]),
    )


def test_trace_split_over_two_messages_completes_when_its_root_arrives() -> None:
    a = _assembler()
    child = span("0000000000000002", "0000000000000001", 1, 2, {}, trace_id=_t(1))
    root = span("0000000000000001", None, 0, 3, {}, trace_id=_t(1))
    assert a.add([child], "m1", now=0.0) == {_t(1)}
    assert a.complete(now=1.0) == []
    a.add([root], "m2", now=2.0)
    (done,) = a.complete(now=2.0)
    assert done.cause == "root"
    assert done.messages == {"m1", "m2"}
    assert {s.span_id for s in done.spans} == {"0000000000000001", "0000000000000002"}
    assert a.open_traces == 0 and a.open_spans == 0


def test_a_trace_without_root_completes_after_idle_seconds() -> None:
    a = _assembler(idle_seconds=30)
    a.add([span("0000000000000002", "0000000000000001", 1, 2, {}, trace_id=_t(1))], "m", 0.0)
    assert a.complete(now=29.9) == []
    (done,) = a.complete(now=30.0)
    assert done.cause == "idle"


def test_the_trace_cap_finishes_the_oldest() -> None:
    a = _assembler(max_traces=2)
    for n in range(3):
        a.add([span("0000000000000002", "0000000000000001", 1, 2, {}, trace_id=_t(n))], n, n)
    (done,) = a.complete(now=3.0)
    assert (done.trace_id, done.cause) == (_t(0), "cap")
    assert a.open_traces == 2


def test_the_span_cap_bounds_memory() -> None:
    a = _assembler(max_spans=5)
    for n in range(10):
        a.add([span(f"{n + 2:016x}", "0000000000000001", 1, 2, {}, trace_id=_t(n))], n, n)
        assert a.open_spans <= 5
    assert len(a.complete(now=10.0)) == 5


def test_too_many_spans_in_one_trace_finishes_it() -> None:
    a = _assembler(max_spans_per_trace=3)
    spans = [span(f"{n + 2:016x}", "0000000000000001", 1, 2, {}, trace_id=_t(1)) for n in range(3)]
    a.add(spans, "m", 0.0)
    (done,) = a.complete(0.0)
    assert done.cause == "too_many_spans"


def test_forget_drops_traces_of_revoked_messages() -> None:
    a = _assembler()
    a.add([span("0000000000000002", "0000000000000001", 1, 2, {}, trace_id=_t(1))], ("p0", 1), 0)
    a.add([span("0000000000000002", "0000000000000001", 1, 2, {}, trace_id=_t(2))], ("p1", 1), 0)
    assert a.forget(lambda m: m[0] != "p0") == 1
    assert a.open_traces == 1


def test_message_holds_release_only_when_every_hold_is_gone() -> None:
    holds = MessageHolds()
    holds.hold("m1")
    holds.hold("m1")
    holds.hold("m2")
    assert list(holds.release(["m1", "m2"])) == ["m2"]
    assert "m1" in holds
    assert list(holds.release(["m1"])) == ["m1"]
    assert len(holds) == 0
