"""The daemon's startup heap kept out of the garbage collector's full collections.

A full (oldest-generation) collection walks every object the collector tracks. Once started,
the daemon holds some 200,000 of them that live as long as the process (its imported modules,
the compiled validators and serializers of its schemas, its metrics and settings), and a full
collection of them took ~120 ms, the GIL held, so intake and judging stalled for it
(``bench/full_collection.py``: 0.01 ms once frozen). CPython
runs one whenever the objects that survived two younger collections reach a quarter of those
already old: turns waiting on a judge, outcome events waiting for their write and the places
of kept turns all survive that long, so a busy daemon paid such a stall again and again
(``bench/ingest.py --outcomes --no-gc-freeze``: 2.1-3.5 us a turn in the collector).
``gc.freeze`` moves what exists into a permanent generation that collections never walk
again: each full collection then walks only what came after. Objects frozen are still freed
when nothing refers to them; only a reference cycle formed later among frozen objects is never
collected, and those objects are the process's own for its lifetime anyway.
"""

from __future__ import annotations

import gc

__all__ = ["freeze_startup_heap"]


def freeze_startup_heap() -> int:
    """Collect what is garbage now, then freeze the rest; the number of objects frozen. Call
    it once, when the daemon is built and before it runs: in a process that will build other
    things and let them go (a test run), the cycles among them would never be collected."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
