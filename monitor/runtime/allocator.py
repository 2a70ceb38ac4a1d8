"""How many malloc arenas a long-running casewatch process may use (glibc only).

glibc gives a thread that finds the main arena busy an arena of its own, up to eight per core,
and memory freed in an arena stays with it. The daemon allocates on many threads (the judge
workers, which also store their verdicts; kafka-python's network threads; the probe server's
request threads), so each grows an arena of its own and their free fragments add up: RSS
crept upwards over a backlog (``bench/memory.py``; see bench/README.md, "memory.py"). Two
arenas is the usual setting for threaded Python servers: the GIL serializes most allocations
anyway, so the threads seldom contend for one.

``MALLOC_ARENA_MAX`` in the environment, which glibc reads itself, takes precedence: nothing is
changed then. On another C library (musl, macOS) nothing is changed either.
"""

from __future__ import annotations

import ctypes
import os

__all__ = ["DAEMON_ARENAS", "limit_arenas"]

DAEMON_ARENAS = 2
_M_ARENA_MAX = -8  # glibc's malloc.h


def _glibc() -> bool:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION") is not None
    except (ValueError, OSError):  # not a name this C library knows: not glibc
        return False


def limit_arenas(arenas: int = DAEMON_ARENAS) -> bool:
    """Cap glibc's malloc arenas at ``arenas``; call it before the process starts threads
    (glibc fixes its limit when a thread first needs a new arena). True if the cap was set;
    False, and nothing changed, on another C library or with ``MALLOC_ARENA_MAX`` set."""
    if arenas < 1:
        raise ValueError(f"arenas must be >= 1, got {arenas}")
    if "MALLOC_ARENA_MAX" in os.environ or not _glibc():
        return False
    libc = ctypes.CDLL(None)  # the process's own symbols, glibc's mallopt among them
    return bool(libc.mallopt(_M_ARENA_MAX, arenas))
