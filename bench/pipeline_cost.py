"""Casewatch's per-message cost on the ingest path, without a broker.

The real ``Daemon`` loop (poll → track → decode + validate → sample → commit) over an
in-memory source that hands out kafka-python-shaped records (converted by the Kafka source's
own ``to_raw``), sampling rate 0 as in ``ingest.py``. Without broker I/O and kafka-python's
threads this is far steadier than ``ingest.py`` on a shared machine, so it is the figure to
compare before and after a change to the pipeline. Reported: microseconds per message for the
whole loop, and for conversion + ``decode_value`` alone (pydantic's share).

The identifier tripwire (``sampling.identifier_tripwire``, on by default) checks every turn
on this path; the loop is timed with it off and on, runs interleaved, on two kinds of turns:
the ingest bench's synthetic ~1 KB turns (their answer's command is in no context, so every
turn takes the tripwire's slower path) and the example dataset's turns (examples/turns.jsonl,
~3 KB, real answers that mostly copy their identifiers). Reported: the median of each and the
ratio on/off, and the tripwire's own cost per turn (the difference of the medians).

The redaction step (``redaction``, on by default) also runs on every turn on this
path: the loop (tripwire on, as deployed) is timed with redaction off and on, interleaved, on
the synthetic turns, the example turns and example turns whose query and answer carry the
labelled personal data of tests/monitor/redaction/corpus.py (one sentence each). The tripwire
figures above are measured with redaction off, so they compare with earlier runs.

    .venv/bin/python bench/pipeline_cost.py [--messages 20000] [--example-messages 3000]
        [--repeat 7] [--only tripwire|redaction]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NoReturn

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # bench/ is not an installed package

from prometheus_client import CollectorRegistry  # noqa: E402

from bench.ingest import bench_settings, turn_bytes  # noqa: E402
from consumers._kafka_records import to_raw  # noqa: E402
from consumers.decode import decode_value  # noqa: E402
from consumers.records import RawMessage, TopicPartition  # noqa: E402
from monitor.judging.evaluator import build_evaluator  # noqa: E402
from monitor.metrics.exporter import Metrics  # noqa: E402
from monitor.runtime.clock import SystemClock  # noqa: E402
from monitor.runtime.logs import configure_logging  # noqa: E402
from monitor.stream.prepare import stream_sampler  # noqa: E402
from monitor.stream.runner import stream_daemon  # noqa: E402

TOPIC = "bench.turns"
PARTITIONS = 2
MAX_BYTES = 1 << 20


class _MemorySource:
    """Records in partition runs, as a Kafka poll returns them; commits are remembered."""

    def __init__(self, records: list[Any]) -> None:
        self._records = records
        self._at = 0
        self.committed: dict[TopicPartition, int] = {}

    def poll(
        self, timeout_s: float, max_records: int, *, join_limit_s: float | None = None
    ) -> list[RawMessage]:
        batch = self._records[self._at : self._at + max_records]
        self._at += len(batch)
        return [to_raw(r) for r in batch]

    def commit(self, offsets: Mapping[TopicPartition, int], timeout_s: float | None = None) -> None:
        self.committed.update(offsets)

    def pause(self, tps: Iterable[TopicPartition]) -> None:
        return None

    def resume(self, tps: Iterable[TopicPartition]) -> None:
        return None

    def paused(self) -> set[TopicPartition]:
        return set()

    def assignment(self) -> set[TopicPartition]:
        return {TopicPartition(TOPIC, p) for p in range(PARTITIONS)}

    def lag(self) -> dict[TopicPartition, int]:
        return {}

    def set_rebalance_listener(self, on_assigned: Any, on_revoked: Any) -> None:
        return None

    def ping(self) -> bool:
        return True

    def close(self) -> None:
        return None


class _NoDeadLetters:
    def send(self, msg: RawMessage, reason: str, detail: str) -> NoReturn:
        raise AssertionError(f"every record is valid, got {reason}: {detail}")

    def flush(self, timeout_s: float) -> None:
        return None

    def close(self) -> None:
        return None


class _IdleStore:
    """Nothing is judged at rate 0, so nothing is stored; the daemon only pings it."""

    def ping(self) -> bool:
        return True

    def close(self) -> None:
        return None


def kafka_records(n: int, values: list[bytes] | None = None) -> list[Any]:
    """``n`` records; their values are ``values`` cycled, or synthetic ~1 KB turns."""
    records = [
        SimpleNamespace(
            topic=TOPIC,
            partition=i % PARTITIONS,
            offset=i // PARTITIONS,
            value=values[i % len(values)] if values else turn_bytes(i),
            key=None,
            headers=[],
            timestamp=1_700_000_000_000 + i,
        )
        for i in range(n)
    ]
    return sorted(records, key=lambda r: (r.partition, r.offset))


def example_values() -> list[bytes]:
    path = ROOT / "examples" / "turns.jsonl"
    return [line.rstrip(b"\n") for line in path.read_bytes().splitlines() if line.strip()]


def daemon_us_per_msg(
    records: list[Any], workdir: Path, *, tripwire: bool = False, redaction: bool = False
) -> float:
    # Rate 0, and a budget that admits nothing: the turns the tripwire catches are checked,
    # counted and skipped for budget, so the loop measures the check, not a judge.
    sampling = {"default_rate": 0.0, "identifier_tripwire": tripwire, "budget_calls_per_hour": 1e-9}
    settings = bench_settings(
        "localhost:9",
        workdir / "unused.db",
        sampling=sampling,
        redaction={"enabled": redaction},
    )
    source = _MemorySource(records)
    # Built like the daemon's (the look-up step needs its configuration hash), never called:
    # rate 0 and no budget, nothing is judged.
    evaluator = build_evaluator(settings, concurrency=settings.daemon.concurrency)
    daemon = stream_daemon(
        settings,
        source,
        _NoDeadLetters(),
        _IdleStore(),  # type: ignore[arg-type]
        evaluator,
        Metrics(CollectorRegistry()),
        stream_sampler(settings, SystemClock()),
        exit_when_idle=True,
    )
    start = time.perf_counter()
    daemon.run()
    elapsed = time.perf_counter() - start
    evaluator.close()
    expected = {TopicPartition(TOPIC, p): len(records) // PARTITIONS for p in range(PARTITIONS)}
    if source.committed != expected:
        raise SystemExit(f"committed {source.committed}, expected {expected}")
    return elapsed / len(records) * 1e6


def decode_us_per_msg(records: list[Any]) -> float:
    start = time.perf_counter()
    for r in records:
        decode_value(to_raw(r).value, MAX_BYTES)
    return (time.perf_counter() - start) / len(records) * 1e6


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[len(xs) // 2]


def tripwire_cost(records: list[Any], workdir: Path, repeat: int) -> dict[str, float]:
    """The loop with the tripwire off and on, interleaved so both see the same machine."""
    off: list[float] = []
    on: list[float] = []
    for _ in range(repeat):
        off.append(daemon_us_per_msg(records, workdir, tripwire=False))
        on.append(daemon_us_per_msg(records, workdir, tripwire=True))
    m_off, m_on = _median(off), _median(on)
    return {
        "off_us_per_msg_median": round(m_off, 2),
        "on_us_per_msg_median": round(m_on, 2),
        "ratio_on_to_off": round(m_on / m_off, 2),
        "tripwire_us_per_turn": round(m_on - m_off, 2),
    }


def pii_values(n: int) -> list[bytes]:
    """``n`` example turns whose query and answer each carry one labelled corpus sentence and
    a number of their own: no two queries or answers alike, as in live traffic (the contexts
    repeat, as knowledge-base passages do)."""
    from tests.monitor.redaction.corpus import positives

    sentences = [p.text for p in positives()]
    examples = example_values()
    out = []
    for i in range(n):
        doc = json.loads(examples[i % len(examples)])
        doc["query"] = f"{sentences[(2 * i) % len(sentences)]} {doc['query']} (#{i})"
        doc["answer"] = f"{doc['answer']} {sentences[(2 * i + 1) % len(sentences)]} (#{i})"
        out.append(json.dumps(doc).encode())
    return out


def redaction_cost(records: list[Any], workdir: Path, repeat: int) -> dict[str, float]:
    """The loop (tripwire on) with redaction off and on, interleaved."""
    off: list[float] = []
    on: list[float] = []
    for _ in range(repeat):
        off.append(daemon_us_per_msg(records, workdir, tripwire=True, redaction=False))
        on.append(daemon_us_per_msg(records, workdir, tripwire=True, redaction=True))
    m_off, m_on = _median(off), _median(on)
    return {
        "off_us_per_msg_median": round(m_off, 2),
        "on_us_per_msg_median": round(m_on, 2),
        "ratio_on_to_off": round(m_on / m_off, 2),
        "redaction_us_per_turn": round(m_on - m_off, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--example-messages", type=int, default=3_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--only", choices=("tripwire", "redaction"), default=None)
    args = parser.parse_args(argv)
    configure_logging("warning")
    records = kafka_records(args.messages - args.messages % PARTITIONS)
    n_examples = args.example_messages - args.example_messages % PARTITIONS
    examples = kafka_records(n_examples, example_values())
    result: dict[str, Any] = {
        "bench": "pipeline_cost",
        "messages": len(records),
        "example_messages": len(examples),
    }
    if args.only != "redaction":
        with tempfile.TemporaryDirectory() as tmp:
            synthetic = tripwire_cost(records, Path(tmp), args.repeat)
            realistic = tripwire_cost(examples, Path(tmp), args.repeat)
        decode = sorted(decode_us_per_msg(records) for _ in range(args.repeat))
        result.update(
            {
                # Without the tripwire, as before it existed (comparable with earlier figures).
                "daemon_us_per_msg_median": synthetic["off_us_per_msg_median"],
                "convert_decode_us_per_msg_best": round(decode[0], 2),
                "tripwire_synthetic": synthetic,
                "tripwire_examples": realistic,
            }
        )
        print(
            f"daemon loop {synthetic['off_us_per_msg_median']:.2f} us/msg (median) without the "
            f"tripwire; of which conversion + decode + validation {decode[0]:.2f} us/msg"
        )
        for name, r in (("synthetic 1 KB turns", synthetic), ("examples/turns.jsonl", realistic)):
            print(
                f"{name}: tripwire off {r['off_us_per_msg_median']:.2f}, on "
                f"{r['on_us_per_msg_median']:.2f} us/msg (medians of {args.repeat}) = "
                f"{r['ratio_on_to_off']:.2f}x; the tripwire costs "
                f"{r['tripwire_us_per_turn']:.1f} us/turn"
            )
    if args.only != "tripwire":
        pii = kafka_records(n_examples, pii_values(n_examples))
        sets = (
            ("synthetic 1 KB turns", "redaction_synthetic", records),
            ("examples/turns.jsonl", "redaction_examples", examples),
            ("examples + personal data, unique", "redaction_pii", pii),
        )
        with tempfile.TemporaryDirectory() as tmp:
            for name, key, recs in sets:
                r = redaction_cost(recs, Path(tmp), args.repeat)
                result[key] = r
                print(
                    f"{name}: redaction off {r['off_us_per_msg_median']:.2f}, on "
                    f"{r['on_us_per_msg_median']:.2f} us/msg (medians of {args.repeat}, tripwire "
                    f"on) = {r['ratio_on_to_off']:.2f}x; redaction costs "
                    f"{r['redaction_us_per_turn']:.1f} us/turn"
                )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
