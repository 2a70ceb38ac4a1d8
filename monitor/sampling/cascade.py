"""The cascade's online state: how much traffic each cheap-look cell carries, what the LLM judge
said of the turns it judged there, and the inclusion probability of a cell now.

Pure logic over an injected clock (no I/O). The allocation itself is
``monitor.stats.inclusion.allocate``; this keeps what it is fed with:

- traffic: turns per cell over the last hour (one slot a minute), extrapolated to an hour
  while less than an hour has passed (never from less than a minute);
- pairs: (cheap cell, LLM severe call) of the turns the LLM judge judged, from which the
  per-cell risk is estimated;
- the target: LLM calls per hour the draw may spend. ``set_target`` takes a new budget at once
  (a budget change mid-hour): the probabilities are recomputed on the next draw, and what was
  drawn before keeps the probability it was drawn with (stored with it).

Probabilities are recomputed every ``REFRESH_S`` seconds or ``REFRESH_TURNS`` turns, whichever
comes first (and at once after a new target or the first pairs of a cell): a draw costs a dict
look-up, and a start-up burst is not drawn at the probabilities of its first turn.
Thread-safe: pairs arrive from judge threads, draws come from the loop.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from monitor.runtime.clock import Clock
from monitor.schema.turn import Band
from monitor.stats.inclusion import DEFAULT_FLOOR, DEFAULT_POWER, Pairs, allocate, risks

# The cheap look's cells: the offline judge's band for the turn, worst first.
CELLS: tuple[str, ...] = tuple(b.value for b in Band)
REFRESH_S = 10.0
REFRESH_TURNS = 100
_MINUTE_S = 60.0
_MINUTES = 60


class CascadePolicy:
    def __init__(
        self,
        cells: Iterable[str],
        target_calls_per_hour: float,
        clock: Clock,
        *,
        floor: float = DEFAULT_FLOOR,
        power: float = DEFAULT_POWER,
        look_share: float = 1.0,
    ) -> None:
        """``look_share``: the share of conversations the cheap look runs on (the ones whose
        point is below it); the others are never drawn but by a rule, no probability exceeds
        it, and the traffic per cell is the looked-at turns scaled up by it."""
        if not 0.0 < floor <= look_share <= 1.0:
            raise ValueError(
                f"need 0 < floor <= look_share <= 1, got floor {floor}, look_share {look_share}"
            )
        self.look_share = look_share
        self.cells = tuple(cells)
        if not self.cells:
            raise ValueError("the cascade needs at least one cell")
        if not 0.0 < floor <= 1.0:
            raise ValueError(f"floor must be in (0, 1], got {floor}")
        if target_calls_per_hour < 0:
            raise ValueError(f"target must be >= 0 calls per hour, got {target_calls_per_hour}")
        self.floor = floor
        self.power = power
        self._clock = clock
        self._lock = threading.Lock()
        self._target = float(target_calls_per_hour)
        self._pairs: dict[str, Pairs] = {c: Pairs() for c in self.cells}
        self._slots = {c: [0] * _MINUTES for c in self.cells}
        self._started = clock.monotonic()
        self._minute = int(self._started // _MINUTE_S)
        self._probabilities: dict[str, float] = dict.fromkeys(self.cells, 1.0)
        self._refreshed: float | None = None
        self._since_refresh = 0  # turns counted since the probabilities were computed

    @property
    def target(self) -> float:
        return self._target

    def set_target(self, calls_per_hour: float) -> None:
        """A new budget for the draw, taken at the next draw."""
        if calls_per_hour < 0:
            raise ValueError(f"target must be >= 0 calls per hour, got {calls_per_hour}")
        with self._lock:
            self._target = float(calls_per_hour)
            self._refreshed = None

    def _cell(self, cell: str) -> str:
        if cell not in self._slots:
            raise ValueError(f"unknown cheap-look cell {cell!r}; cells: {', '.join(self.cells)}")
        return cell

    def probability(self, cell: str) -> float:
        """The inclusion probability of one more turn of ``cell``, which is counted as traffic."""
        with self._lock:
            self._advance()
            self._slots[self._cell(cell)][self._minute % _MINUTES] += 1
            now = self._clock.monotonic()
            self._since_refresh += 1
            if (
                self._refreshed is None
                or now - self._refreshed >= REFRESH_S
                or self._since_refresh >= REFRESH_TURNS
            ):
                self._refresh(now)
            return self._probabilities[cell]

    def observe(self, cell: str, llm_severe: bool) -> None:
        """A pair: the LLM judge's severe call on a turn the cheap look put in ``cell``."""
        with self._lock:
            first = self._pairs[self._cell(cell)].judged == 0
            self._pairs[cell] = self._pairs[cell].add(llm_severe)
            if first:
                self._refreshed = None

    def pairs(self) -> dict[str, Pairs]:
        with self._lock:
            return dict(self._pairs)

    def traffic_per_hour(self) -> dict[str, float]:
        with self._lock:
            self._advance()
            return self._traffic()

    def _traffic(self) -> dict[str, float]:
        elapsed = self._clock.monotonic() - self._started
        scale = 3600.0 / max(_MINUTE_S, min(3600.0, elapsed)) / self.look_share
        return {c: sum(slots) * scale for c, slots in self._slots.items()}

    def _advance(self) -> None:
        minute = int(self._clock.monotonic() // _MINUTE_S)
        if minute == self._minute:
            return
        for m in range(self._minute + 1, min(minute, self._minute + _MINUTES) + 1):
            for slots in self._slots.values():
                slots[m % _MINUTES] = 0
        self._minute = minute

    def _refresh(self, now: float) -> None:
        risk = risks(self._pairs, list(self.cells))
        self._probabilities = allocate(
            self._traffic(),
            risk,
            self._target,
            floor=self.floor,
            power=self.power,
            cap=self.look_share,
        )
        self._refreshed = now
        self._since_refresh = 0


# Drawn turns held until the store writes them (a turn the look-up finds already judged, or
# one dropped at a revoke, is never written: the oldest go past this many).
LEDGER_CAPACITY = 100_000


class DrawLedger:
    """What each drawn turn was drawn with, from the draw to its stored row: the probability
    and the cheap-look cell, by event id.

    A turn drawn twice (read again after a rebalance or a restart) keeps its first entry: the
    first draw is the one the judge answered, and a turn not drawn the first time and drawn on
    a second read was drawn with the larger probability, which is its probability over both
    reads. ``stored`` hands the LLM judge's call back to the policy as a pair and forgets the
    turn. Bounded: past ``capacity`` the oldest entry goes (counted in ``evicted``; its turn,
    if it is stored later, stores no probability and counts with weight 1).
    """

    def __init__(self, policy: CascadePolicy, capacity: int = LEDGER_CAPACITY) -> None:
        self._policy = policy
        self._capacity = capacity
        self._lock = threading.Lock()
        self._draws: dict[str, tuple[float, str]] = {}
        self.evicted = 0

    def drawn(self, event_id: str, probability: float, cell: str) -> None:
        with self._lock:
            if event_id in self._draws:
                return
            if len(self._draws) >= self._capacity:
                del self._draws[next(iter(self._draws))]
                self.evicted += 1
            self._draws[event_id] = (probability, cell)

    def of(self, event_id: str) -> tuple[float, str] | None:
        """(probability, cell) of a drawn turn not yet stored (None: not drawn here)."""
        with self._lock:
            return self._draws.get(event_id)

    def stored(self, event_id: str, llm_severe: bool | None) -> None:
        """The turn's row was written: its pair (when the LLM judge gave a band) feeds the
        policy and the entry goes."""
        with self._lock:
            entry = self._draws.pop(event_id, None)
        if entry is not None and llm_severe is not None:
            self._policy.observe(entry[1], llm_severe)

    def __len__(self) -> int:
        with self._lock:
            return len(self._draws)
