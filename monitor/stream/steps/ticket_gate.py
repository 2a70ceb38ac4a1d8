"""``TicketGate``: in front of the commit step of a chain that assembles OTLP traces.

A turn built from spans travels in an envelope whose offset is a ticket (negative, never a
Kafka offset; ``monitor.stream.steps.assemble``). When the turn is finished (stored, skipped or
dead-lettered), its ticket comes here instead of an offset: it goes back to the assemble step,
which releases the turn's holds on the messages it was built from; everything else goes on to
the commit step.
"""

from __future__ import annotations

from typing import Any, Protocol

from monitor.stream.steps.base import DoneStep, Envelope


class FinishesTickets(Protocol):
    def finish_ticket(self, ticket: int) -> None: ...


class TicketGate:
    """In front of the commit step: tickets of assembled turns go back to the assemble step,
    everything else on to the commit step."""

    def __init__(self, commit: DoneStep) -> None:
        self._commit = commit
        self._assemble: FinishesTickets | None = None

    def attach(self, assemble: FinishesTickets) -> None:
        self._assemble = assemble

    def submit(self, message: Envelope[Any]) -> None:
        if message.offset < 0 and self._assemble is not None:
            self._assemble.finish_ticket(message.offset)
        else:
            self._commit.submit(message)

    def poll(self) -> None:
        self._commit.poll()

    def join(self, timeout: float | None = None) -> None:
        self._commit.join(timeout)

    def close(self) -> None:
        self._commit.close()
