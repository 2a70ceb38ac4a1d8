"""The startup heap frozen: full collections no longer walk it, and what comes after is still
collected (``monitor/runtime/heap.py``)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from monitor.runtime.heap import freeze_startup_heap


@pytest.fixture
def frozen_after() -> Iterator[None]:
    """Thaw what the test froze: the rest of the run is not a daemon's startup heap."""
    gc.unfreeze()
    try:
        yield
    finally:
        gc.unfreeze()


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def test_what_exists_is_frozen_and_no_longer_walked_by_a_collection(frozen_after: None) -> None:
    startup = [Node() for _ in range(100)]
    garbage = Node()
    garbage.other = garbage  # a cycle nobody refers to: collected before the freeze
    gone = weakref.ref(garbage)
    del garbage

    frozen = freeze_startup_heap()

    assert gone() is None
    assert frozen == gc.get_freeze_count() >= len(startup)
    ids = {id(node) for node in startup}
    assert not ids & {id(obj) for obj in gc.get_objects()}  # what a collection walks


def test_a_cycle_made_after_the_freeze_is_still_collected(frozen_after: None) -> None:
    freeze_startup_heap()
    first, second = Node(), Node()
    first.other, second.other = second, first
    gone = weakref.ref(first)
    del first, second

    assert gc.collect() >= 2
    assert gone() is None


def test_a_frozen_object_nothing_refers_to_is_still_freed(frozen_after: None) -> None:
    leaf = Node()
    gone = weakref.ref(leaf)
    freeze_startup_heap()

    del leaf

    assert gone() is None  # freed by its reference count, frozen or not
