"""Which of the Kafka client's patches fell back to kafka-python's own behaviour in this process,
as a source reports them for the daemon's gauge ``casewatch_kafka_patch_fallback{patch}``.

A patch (an optimisation such as the record reader, or a workaround of a library bug) checks the
private names it needs as it installs, and on a miss keeps the library's behaviour with one
warning (``consumers._kafka``). That warning is easy to miss; the gauge is what an alert reads:
the ingest then runs at the library's speed (an optimisation), or with the library's bug back
(a workaround), until kafka-python is the version pyproject.toml pins.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol, runtime_checkable

# The value of an unreadable CASEWATCH_KAFKA_OPTIMISATIONS is the user's: one label for it.
SWITCH = "optimisations_switch"


@runtime_checkable
class ReportsPatchFallbacks(Protocol):
    """A source whose client is patched (Kafka; a file source is not)."""

    def patch_fallbacks(self) -> Mapping[str, bool]:
        """Each optional patch (False: installed or switched off) and each patch that fell
        back in this process (True), by label value."""
        ...


def patch_label(name: str) -> str:
    """The label value of a fallen-back patch: its name (a bounded set, written in the code),
    except a bad switch value, which carries the user's text (``NAME=value``)."""
    return SWITCH if "=" in name else name


def fallback_states(optional: Iterable[str], fell_back: Iterable[str]) -> dict[str, bool]:
    """``optional`` patches at False, each of ``fell_back`` (raw names) at True."""
    states = dict.fromkeys(optional, False)
    states.update((patch_label(name), True) for name in fell_back)
    return states
