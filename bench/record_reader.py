"""Reading fetched record batches: casewatch's reader (consumers/_kafka_records.py) against
kafka-python's own, on the same bytes, in the same run.

The batches are what a producer of the ingest bench's turns writes (~1 KB turn events,
``--per-batch`` records a batch, uncompressed and lz4), read from memory: no broker, no
network, so the figure is the readers' CPU alone and steady on a shared machine. Contenders,
interleaved ``--repeat`` times:
- kafka-python: the library's ``PartitionRecords.take`` (``DefaultRecord`` per record, then a
  ``ConsumerRecord``), then the conversion to ``RawMessage`` casewatch's source made of each;
- kafka-python alone: the same without the conversion (what the plain consumer of
  ``ingest.py`` pays);
- casewatch: ``RawRecords.take``, which hands out the ``RawMessage`` itself.
Reported: microseconds per record (medians), and casewatch's as a ratio to each.

    .venv/bin/python bench/record_reader.py [--records 20000] [--per-batch 500] [--repeat 7]

Prints a readable report, then one JSON line of results.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # bench/ is not an installed package

from bench.ingest import turn_bytes  # noqa: E402
from consumers._kafka import kafka  # noqa: E402
from consumers._kafka_records import RawRecords, to_raw  # noqa: E402

LibraryRecords = kafka.consumer.fetcher.Fetcher.PartitionRecords
MemoryRecords = kafka.record.memory_records.MemoryRecords
MemoryRecordsBuilder = kafka.record.memory_records.MemoryRecordsBuilder
TP = kafka.TopicPartition("bench.turns", 0)
CODECS = {"none": 0, "lz4": 3}


def fetched(n: int, per_batch: int, codec: int) -> bytes:
    """``n`` turn events in batches of ``per_batch``, as a fetch response carries them."""
    out = b""
    for start in range(0, n, per_batch):
        builder = MemoryRecordsBuilder(2, codec, 1 << 26, offset=start)
        for i in range(start, min(n, start + per_batch)):
            builder.append(1_700_000_000_000 + i, None, turn_bytes(i), [])
        builder.close()
        out += bytes(builder.buffer())
    return out


def _library(data: bytes, n: int) -> int:
    return len([to_raw(r) for r in LibraryRecords(0, TP, MemoryRecords(data)).take(n)])


def _library_alone(data: bytes, n: int) -> int:
    return len(LibraryRecords(0, TP, MemoryRecords(data)).take(n))


def _casewatch(data: bytes, n: int) -> int:
    assert RawRecords is not None
    return len(RawRecords(0, TP, MemoryRecords(data)).take(n))


def _us_per_record(read: Callable[[bytes, int], int], data: bytes, n: int) -> float:
    start = time.process_time()
    got = read(data, n)
    elapsed = time.process_time() - start
    if got != n:
        raise SystemExit(f"read {got} of {n} records")
    return elapsed / n * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--per-batch", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    if RawRecords is None:
        raise SystemExit("this kafka-python has no fetcher reader to replace")
    contenders = {
        "kafka_python": _library,
        "kafka_python_alone": _library_alone,
        "casewatch": _casewatch,
    }
    results: dict[str, Any] = {"bench": "record_reader", "records": args.records}
    for name, codec in CODECS.items():
        data = fetched(args.records, args.per_batch, codec)
        times: dict[str, list[float]] = {k: [] for k in contenders}
        for _ in range(args.repeat):
            for key, read in contenders.items():
                times[key].append(_us_per_record(read, data, args.records))
        medians = {k: statistics.median(v) for k, v in times.items()}
        ratio = medians["casewatch"] / medians["kafka_python"]
        alone = medians["casewatch"] / medians["kafka_python_alone"]
        print(
            f"{name}: kafka-python {medians['kafka_python']:.2f} us a record with the "
            f"conversion ({medians['kafka_python_alone']:.2f} without), casewatch "
            f"{medians['casewatch']:.2f}: {ratio:.2f} of kafka-python's ({alone:.2f} of it "
            f"alone); medians of {args.repeat}"
        )
        results[name] = {
            **{f"{k}_us": round(v, 3) for k, v in medians.items()},
            "ratio": round(ratio, 3),
            "ratio_to_library_alone": round(alone, 3),
        }
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
