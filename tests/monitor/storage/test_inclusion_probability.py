"""Each drawn turn's row keeps its inclusion probability and cell, once, on both backends."""

from __future__ import annotations

import sqlalchemy as sa

from monitor.runtime.clock import ManualClock
from monitor.sampling.cascade import CELLS, CascadePolicy, DrawLedger
from monitor.storage.store import Store
from monitor.storage.tables import turns
from tests.fixtures.databases import make_turn, make_verdict


def _row(store: Store, event_id: str) -> tuple[float | None, str | None]:
    with store.transaction(write=False) as conn:
        row = conn.execute(
            sa.select(turns.c.inclusion_probability, turns.c.cheap_cell).where(
                turns.c.event_id == event_id
            )
        ).one()
    return row[0], row[1]


def test_a_drawn_turn_stores_its_probability_once(store: Store) -> None:
    policy = CascadePolicy(CELLS, 100.0, ManualClock())
    ledger = DrawLedger(policy)
    store.draws = ledger
    turn = make_turn("evt-drawn")
    ledger.drawn(turn.event_id, 0.25, "moderate")
    assert store.save(turn, make_verdict(turn)) is True
    assert _row(store, "evt-drawn") == (0.25, "moderate")
    assert policy.pairs()["moderate"].judged == 1  # the LLM's call came back as a pair
    # Drawn again after a rebalance, with another probability, judged under another
    # configuration: the turn's row stays the first one.
    ledger.drawn(turn.event_id, 0.9, "severe")
    assert store.save(turn, make_verdict(turn, config_hash="cfg-b")) is True
    assert _row(store, "evt-drawn") == (0.25, "moderate")
    with store.transaction(write=False) as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(turns)).scalar_one() == 1


def test_a_turn_drawn_uniformly_stores_no_probability(store: Store) -> None:
    store.draws = DrawLedger(CascadePolicy(CELLS, 100.0, ManualClock()))
    turn = make_turn("evt-uniform")
    store.save(turn, make_verdict(turn))
    assert _row(store, "evt-uniform") == (None, None)
    store.draws = None
    other = make_turn("evt-no-cascade")
    store.save(other, make_verdict(other))
    assert _row(store, "evt-no-cascade") == (None, None)
