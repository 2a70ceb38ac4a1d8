"""Trace assembly: completion by root or idleness, the memory caps, and message holds."""

from __future__ import annotations

from consumers.otel.assembly import MessageHolds, TraceAssembler
from consumers.otel.otlp import Span
from tests.consumers.otel.spans import span


def _t(n: int) -> str:
    return f"{n:032x}"


def _assembler(**kw: int | float) -> TraceAssembler:
    opts: dict[str, float] = {
        "idle_seconds": 30.0,
        "max_traces": 100,
        "max_spans": 1000,
        "max_spans_per_trace": 100,
        "settle_seconds": 0.0,
        "remember_finished": 100,
    }
    opts.update(kw)
    return TraceAssembler(
        idle_seconds=opts["idle_seconds"],
        max_traces=int(opts["max_traces"]),
        max_spans=int(opts["max_spans"]),
        max_spans_per_trace=int(opts["max_spans_per_trace"]),
        settle_seconds=opts["settle_seconds"],
        remember_finished=int(opts["remember_finished"]),
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


# ---------------------------------------------------------------- traces split over partitions

ROOT = "a000000000000001"


def _split(trace: int) -> tuple[list[Span], list[Span]]:
    """A root (with one child) and two more children: the halves two partitions carry."""
    t = _t(trace)
    first = [
        span(ROOT, None, 0, 9, {}, trace_id=t),
        span("b000000000000002", ROOT, 1, 2, {}, trace_id=t),
    ]
    second = [
        span("b000000000000003", ROOT, 3, 4, {}, trace_id=t),
        span("b000000000000004", "b000000000000003", 3, 4, {}, trace_id=t),
    ]
    return first, second


def test_root_first_waits_settle_seconds_for_the_rest_from_another_partition() -> None:
    a = _assembler(settle_seconds=2.0)
    with_root, rest = _split(1)
    a.add(with_root, ("p0", 0), now=0.0)
    assert a.complete(now=1.9) == []  # settling: the other partition's part may still come
    a.add(rest, ("p1", 0), now=1.9)
    assert a.complete(now=3.8) == []  # each new span starts the settle again
    (done,) = a.complete(now=3.9)
    assert (done.cause, done.whole, len(done.spans)) == ("root", True, 4)
    assert done.messages == {("p0", 0), ("p1", 0)}


def test_root_last_is_whole_once_settled() -> None:
    a = _assembler(settle_seconds=2.0)
    with_root, rest = _split(1)
    a.add(rest, ("p1", 0), now=0.0)
    a.add(with_root, ("p0", 0), now=5.0)
    (done,) = a.complete(now=7.0)
    assert (done.cause, done.whole, len(done.spans)) == ("root", True, 4)


def test_a_rooted_trace_with_an_orphan_waits_for_its_parent_until_idle() -> None:
    a = _assembler(settle_seconds=2.0, idle_seconds=30.0)
    t = _t(1)
    a.add([span(ROOT, None, 0, 9, {}, trace_id=t)], "m1", now=0.0)
    a.add([span("c000000000000005", "b000000000000003", 3, 4, {}, trace_id=t)], "m2", now=0.0)
    assert a.complete(now=29.0) == []  # settled, but b...03 is named and missing
    (done,) = a.complete(now=30.0)
    assert (done.cause, done.whole, done.missing_parents) == ("idle", False, ("b000000000000003",))


def test_the_missing_parent_arriving_completes_the_trace_whole() -> None:
    a = _assembler(settle_seconds=2.0)
    with_root, rest = _split(1)
    a.add([with_root[0], rest[1]], "m1", now=0.0)  # root and a grandchild, its parent absent
    assert a.complete(now=10.0) == []
    a.add([with_root[1], rest[0]], "m2", now=10.0)
    (done,) = a.complete(now=12.0)
    assert (done.cause, done.whole) == ("root", True)


def test_an_orphan_fragment_finished_by_idle_is_not_whole() -> None:
    a = _assembler(idle_seconds=30.0)
    _, rest = _split(1)
    a.add(rest, "m", now=0.0)
    (done,) = a.complete(now=30.0)
    assert (done.cause, done.whole, done.missing_parents) == ("idle", False, (ROOT,))


def test_a_fragment_pushed_out_by_the_cap_is_not_whole() -> None:
    a = _assembler(max_traces=1, settle_seconds=5.0)
    _, rest = _split(1)
    a.add(rest, "m1", now=0.0)
    a.add(_split(2)[0], "m2", now=1.0)
    (done,) = a.complete(now=1.0)
    assert (done.trace_id, done.cause, done.whole) == (_t(1), "cap", False)


def test_a_span_after_its_trace_was_finished_is_late_and_opens_no_trace() -> None:
    a = _assembler(settle_seconds=0.0)
    with_root, rest = _split(1)
    a.add(with_root, "m1", now=0.0)
    (done,) = a.complete(now=0.0)
    assert done.whole  # as far as could be told: nothing named a missing parent
    assert a.add(rest, "m2", now=1.0) == set()
    (late,) = a.take_late()
    assert (late.trace_id, late.message, late.duplicate, len(late.spans)) == (_t(1), "m2", False, 2)
    assert a.take_late() == []
    assert a.open_traces == 0 and a.complete(now=100.0) == []


def test_a_finished_trace_read_again_is_a_duplicate() -> None:
    a = _assembler(settle_seconds=0.0)
    with_root, _ = _split(1)
    a.add(with_root, "m1", now=0.0)
    a.complete(now=0.0)
    a.add(with_root, "m1-again", now=1.0)
    (late,) = a.take_late()
    assert late.duplicate


def test_finished_trace_ids_are_remembered_in_a_bounded_lru() -> None:
    a = _assembler(settle_seconds=0.0, remember_finished=2)
    for n in range(3):
        a.add(_split(n)[0], n, now=0.0)
    assert len(a.complete(now=0.0)) == 3
    a.add(_split(0)[1], "late-0", now=1.0)  # forgotten: a new (rootless) trace
    a.add(_split(2)[1], "late-2", now=1.0)  # remembered: late
    assert [x.trace_id for x in a.take_late()] == [_t(2)]
    assert a.open_traces == 1


def test_forget_forgets_finished_traces_of_revoked_messages_so_they_are_built_again() -> None:
    a = _assembler(settle_seconds=0.0)
    with_root, _ = _split(1)
    a.add(with_root, ("p0", 5), now=0.0)
    a.complete(now=0.0)
    a.forget(lambda key: key[0] != "p0")  # type: ignore[index]
    assert a.add(with_root, ("p0", 5), now=1.0) == {_t(1)}
    assert a.take_late() == []
