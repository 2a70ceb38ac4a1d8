"""The partitions a broker left out of a full fetch response, fetched again at once.

kafka-python 3.0.12, like Kafka's Java consumer, sends a partition's next fetch only once
nothing of it is buffered, and buffers a response's partitions in the order the response lists
them: while any of them is still queued, no fetch goes out at all (``Fetcher.fetch_records``
sends the next round only when ``fetched_records`` drained the queue). A broker that fills a
response before it reaches every partition returns the rest empty (Kafka once the response
reaches ``fetch_max_bytes``, KIP-74; Tansu after a single partition of ~5 MB, past
``max_partition_fetch_bytes``). An empty entry queued behind a full one then holds back the
next fetch until the full one is read: the consumer reads the whole response, then waits for a
whole fetch round trip with nothing to read. On the embedded broker that was a stall of
20-120 ms every ~5,400 turns of 1 KB, a sixth to a half of the daemon's time on a backlog
(bench/README.md, "Ingest per turn, sixth pass").

Here the partitions of a response that came back empty although the broker has records past
the fetch offset (no error; the high watermark, or under ``read_committed`` the last stable
offset, above it) are queued first: read at once (there is nothing to read), their next fetch
goes out with the first poll, and their records arrive while the rest of the response is read.
A partition that is caught up keeps its place: a fetch for it alone would wait
``fetch_max_wait_ms`` for records on Kafka while holding the broker's one fetch in flight.
Which partition's records come first changes; the order within a partition, the positions and
what is committed do not.

Installed per consumer (``refetch_left_out``), like the record reader, and optional like it
(``CASEWATCH_KAFKA_OPTIMISATIONS=off``): other kafka-python consumers in the process keep the
library's order. The private attributes used are in
``consumers._kafka.PRIVATE_ATTRIBUTES``; a response the library shapes otherwise is passed on
unchanged (logged once).
"""

from __future__ import annotations

from typing import Any

from consumers._kafka import _HANDLE_FETCH, _ISOLATION, _fallback, kafka, optimisation_on

__all__ = ["left_out_first", "refetch_left_out"]

_READ_COMMITTED = getattr(
    getattr(getattr(kafka.consumer, "fetcher", None), "IsolationLevel", None),
    "READ_COMMITTED",
    None,
)
_TopicPartition = kafka.TopicPartition


def left_out_first(response: Any, fetch_offsets: Any, *, read_committed: bool) -> None:
    """Reorder each topic's partitions in ``response`` (in place): those left out of it, with
    records past the offset they were fetched from (``fetch_offsets``, kafka-python's
    TopicPartition -> offset), first; the others after them, in their order."""
    for topic in response.responses:
        name = topic.topic
        partitions = topic.partitions
        if len(partitions) < 2:
            continue

        def left_out(data: Any, name: str = name) -> bool:
            if data.records or data.error_code:
                return False
            end = data.last_stable_offset if read_committed else data.high_watermark
            offset = fetch_offsets.get(_TopicPartition(name, data.partition_index))
            return offset is not None and end is not None and end > offset

        # Stable: the key puts the left-out ones first and keeps every other order.
        partitions.sort(key=lambda data: not left_out(data))


def refetch_left_out(consumer: Any) -> bool:
    """Make ``consumer`` fetch again at once the partitions a full response left out; False
    where it keeps the library's order: switched off (``CASEWATCH_KAFKA_OPTIMISATIONS=off``),
    or (a warning, once) a fetcher without the names it relies on. A reorder that fails on a
    response takes the patch off the consumer (one warning): that response and every later one
    are handled in the library's order."""
    if not optimisation_on("refetch_left_out"):
        return False
    fetcher: Any = getattr(consumer, "_fetcher", None)
    original = getattr(fetcher, "_handle_fetch_response", None)
    if original is None or _READ_COMMITTED is None:
        _fallback("refetch_left_out", _HANDLE_FETCH)
        return False
    if not hasattr(fetcher, "_isolation_level"):
        _fallback("refetch_left_out", _ISOLATION)
        return False
    read_committed = fetcher._isolation_level == _READ_COMMITTED

    def handle_fetch_response(
        node_id: Any, fetch_offsets: Any, send_time: Any, response: Any
    ) -> Any:
        # On kafka-python's I/O thread, before the response's partitions are queued: the
        # consumer's thread only ever sees them in their new order.
        try:
            left_out_first(response, fetch_offsets, read_committed=read_committed)
        except Exception as exc:  # a response shaped otherwise: the library's order from now
            _fallback("refetch_left_out", f"{_HANDLE_FETCH} ({type(exc).__name__}: {exc})")
            if fetcher.__dict__.get("_handle_fetch_response") is handle_fetch_response:
                del fetcher._handle_fetch_response  # the class's method again
        return original(node_id, fetch_offsets, send_time, response)

    fetcher._handle_fetch_response = handle_fetch_response
    return True
