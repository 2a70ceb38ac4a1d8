"""Rebalances under load with a finite hourly judge budget: does judging go on after them?

Starts the embedded Tansu broker, the fake OpenAI-compatible judge (tests/fake_judge_server.py,
every reply valid after ``--latency`` s, one request a turn), a SQLite store and a topic of
``--partitions`` partitions holding ``--first`` turns. Replica A (a daemon in this process,
sampling 1.0, ``--budget`` judge calls per hour) starts; replica B joins the group and leaves
again ``--rounds`` times while A judges (each round two rebalances: B stays ``--stay`` s after
it first reads, and its stop drains for at most ``--drain`` s), with up to ``--max-in-flight``
turns queued in the look-up and the judge step each. Then ``--then`` more turns are produced
and the run waits until every partition is committed to its end.

Reported: the turns judged (a verdict stored) of the first batch and of the later one, the
turns refused by the budget (``budget_calls``) on each replica, the judge requests the fake
judge answered per judged turn, and each replica's ``casewatch_judge_budget_reserved{unit=
"calls"}`` when it stopped (the calls its drain abandoned, still running, are reserved then)
and its budget's reserved calls once those calls ended (0: nothing stranded). ``--strand``
runs the same with dropped turns keeping their reservations (``Reservation.release`` does
nothing): what casewatch did before reservations travelled with the turns.

    .venv/bin/python bench/budget_rebalance.py              # 4 rebalances, 1,200 turns,
                                                            # 1,300 calls/h per replica
    .venv/bin/python bench/budget_rebalance.py --strand     # the same, reservations stranded

Prints one line per phase, then one JSON line of results.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from consumers.dlq import KafkaDeadLetterQueue  # noqa: E402
from consumers.kafka_source import KafkaTurnSource  # noqa: E402
from consumers.tansu import EmbeddedBroker, create_topics  # noqa: E402
from monitor.sampling import budget as budget_module  # noqa: E402
from monitor.storage.store import Store  # noqa: E402
from tests.fake_judge_server import FakeJudgeServer  # noqa: E402
from tests.fixtures.broker import DLQ_SUFFIX, produce  # noqa: E402
from tests.fixtures.judge_server import fake_judge_config  # noqa: E402
from tests.support.daemon import Harness, kafka_settings, rows_per_event, turn_values  # noqa: E402
from tests.support.kafka import committed_offset  # noqa: E402

SKIPPED = "casewatch_turns_skipped_total"
REFUSED = {"assistant": "helpdesk", "reason": "budget_calls"}
RESERVED = ("casewatch_judge_budget_reserved", {"unit": "calls"})


def wait_until(cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.1)


class Replica:
    def __init__(self, settings: Any, url: str) -> None:
        source = KafkaTurnSource(settings.kafka)
        self.h = Harness(settings, source, KafkaDeadLetterQueue(settings.kafka), Store(url))
        self.h.server.start()
        self.h.thread.start()

    def stop(self) -> dict[str, float]:
        h = self.h
        h.daemon.stop()
        h.thread.join(timeout=120)
        h.server.close()
        h.daemon.close()
        for resource in reversed(h.opened):
            resource.close()
        # Calls the drain abandoned settle on their threads as they end.
        wait_until(lambda: h.daemon.abandoned_calls == 0, 120, "abandoned calls ending")
        return {
            "reserved_after": h.sampler.budget.state()["calls"].reserved,
            "refused": h.sample(SKIPPED, REFUSED),
            "reserved_at_stop": h.sample(*RESERVED),
            "sampled": sum(
                s.value
                for metric in h.registry.collect()
                if metric.name == "casewatch_turns_sampled"
                for s in metric.samples
                if s.name.endswith("_total")
            ),
        }


def one_round(
    settings: Any,
    url: str,
    judge: FakeJudgeServer,
    topic: str,
    between: int,
    stay: float,
    round_: int,
) -> dict[str, float]:
    """A judges on; B joins, reads and judges too, then leaves: two rebalances."""
    target = judge.request_count + between
    wait_until(lambda: judge.request_count >= target, 120, f"A judging ({round_})")
    b = Replica(settings, url)
    wait_until(
        lambda: b.h.sample("casewatch_turns_consumed_total", {"topic": topic}) > 0,
        120,
        f"B reading ({round_})",
    )
    time.sleep(stay)  # B judges its share of the partitions meanwhile
    result = b.stop()
    print(f"round {round_ + 1}: B joined and left; judge requests {judge.request_count}")
    return result


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.strand:
        budget_module.Reservation.release = lambda self: False  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as tmp, FakeJudgeServer(latency=args.latency) as judge:
        broker = EmbeddedBroker(log_path=Path(tmp) / "tansu.log")
        broker.start()
        try:
            return _run(args, broker.bootstrap, judge, Path(tmp))
        finally:
            broker.stop()


def _run(
    args: argparse.Namespace, bootstrap: str, judge: FakeJudgeServer, tmp: Path
) -> dict[str, Any]:
    topic = f"bench.budget.{uuid.uuid4().hex[:8]}"
    parts = args.partitions
    create_topics(bootstrap, [topic], partitions=parts, dlq_suffix=DLQ_SUFFIX)
    first = args.first // parts
    for p in range(parts):
        produce(bootstrap, topic, turn_values(first, f"a{p}"), partition=p)
    url = f"sqlite:///{tmp / 'db.sqlite'}"
    Store(url).migrate()
    settings = kafka_settings(
        bootstrap,
        topic,
        url,
        judges={"remote": fake_judge_config(judge)},
        judge="remote",
        daemon={
            "concurrency": args.concurrency,
            "max_in_flight": args.max_in_flight,
            # A leaving replica judges what it holds for this long, then leaves the rest to
            # the group (re-read from the commit), as a pod's stop does.
            "drain_timeout_seconds": args.drain,
        },
        sampling={
            "default_rate": 1.0,
            "budget_calls_per_hour": args.budget,
            "budget_usd_per_hour": None,
        },
    )
    group = settings.kafka.group_id
    a = Replica(settings, url)
    b_results: list[dict[str, float]] = []
    for round_ in range(args.rounds):
        b_results.append(one_round(settings, url, judge, topic, args.between, args.stay, round_))
    then = args.then // parts
    for p in range(parts):
        produce(bootstrap, topic, turn_values(then, f"b{p}"), partition=p)
    wait_until(
        lambda: all(
            committed_offset(bootstrap, group, topic, p) == first + then for p in range(parts)
        ),
        600,
        "every partition committed to its end",
    )
    wait_until(lambda: a.h.sample(*RESERVED) == 0 or args.strand, 60, "A's reservations settled")
    a_result = a.stop()
    stored = rows_per_event(Store(url))
    judged_first = sum(1 for e in stored if e.startswith("a"))
    judged_then = sum(1 for e in stored if e.startswith("b"))
    result = {
        "strand": args.strand,
        "rebalances": 2 * args.rounds,
        "budget_calls_per_hour": args.budget,
        "turns_first": first * parts,
        "judged_first": judged_first,
        "turns_then": then * parts,
        "judged_then": judged_then,
        "judged_total": f"{judged_first + judged_then}/{(first + then) * parts}",
        "refused_budget_calls": a_result["refused"] + sum(r["refused"] for r in b_results),
        "judge_requests": judge.request_count,
        "requests_per_judged_turn": round(judge.request_count / max(1, len(stored)), 3),
        "stored_twice": sum(1 for n in stored.values() if n > 1),
        "reserved_at_stop_a": a_result["reserved_at_stop"],
        "reserved_at_stop_b": [r["reserved_at_stop"] for r in b_results],
        "reserved_after_a": a_result["reserved_after"],
        "reserved_after_b": [r["reserved_after"] for r in b_results],
    }
    print(
        f"judged {result['judged_total']} (first {judged_first}/{first * parts}, "
        f"then {judged_then}/{then * parts}); refused budget_calls "
        f"{result['refused_budget_calls']:g}; {judge.request_count} judge requests; "
        f"reserved at stop A {a_result['reserved_at_stop']:g}, B {result['reserved_at_stop_b']}; "
        f"once abandoned calls ended A {a_result['reserved_after']:g}, "
        f"B {result['reserved_after_b']}"
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--first", type=int, default=800, help="turns before the rebalances")
    parser.add_argument("--then", type=int, default=400, help="turns after them")
    parser.add_argument("--rounds", type=int, default=2, help="B joins and leaves: 2 each")
    parser.add_argument("--between", type=int, default=20, help="A's judge requests before B joins")
    parser.add_argument("--stay", type=float, default=3.0, help="seconds B stays after reading")
    parser.add_argument("--drain", type=float, default=5.0, help="B's drain timeout, seconds")
    parser.add_argument("--budget", type=float, default=1300.0, help="calls per hour a replica")
    parser.add_argument("--latency", type=float, default=0.15, help="the judge's, in seconds")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--max-in-flight", type=int, default=256)
    parser.add_argument("--strand", action="store_true", help="dropped turns keep their budget")
    args = parser.parse_args()
    print(json.dumps(run(args)))


if __name__ == "__main__":
    main()
