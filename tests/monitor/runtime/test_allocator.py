"""The daemon's malloc arena cap, checked in fresh processes against glibc's own count."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from monitor.runtime.allocator import _glibc, limit_arenas

ROOT = Path(__file__).resolve().parents[3]

# Eight threads each allocate outside pymalloc (objects > 512 bytes go to malloc) while the
# others hold theirs, then glibc's malloc_info reports one <heap> per arena.
_COUNT_ARENAS = """
import ctypes, re, sys, tempfile, threading
from monitor.runtime.allocator import limit_arenas
capped = limit_arenas() if sys.argv[1] == "cap" else None
barrier = threading.Barrier(8)
held = []
def work():
    held.append(bytes(200_000))
    barrier.wait()
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
libc = ctypes.CDLL(None)
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
libc.fclose.argtypes = [ctypes.c_void_p]
with tempfile.NamedTemporaryFile(suffix=".xml") as f:
    stream = libc.fopen(f.name.encode(), b"w")
    libc.malloc_info(0, stream)
    libc.fclose(stream)
    report = open(f.name).read()
print(capped, len(re.findall(r"<heap nr=", report)))
"""


def _arenas(mode: str, env: dict[str, str] | None = None) -> tuple[str, int]:
    out = subprocess.run(
        [sys.executable, "-c", _COUNT_ARENAS, mode],
        cwd=ROOT,
        # The runner's own MALLOC_ARENA_MAX, if any, is not this test's.
        env={
            **{k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"},
            "PYTHONPATH": str(ROOT),
            **(env or {}),
        },
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return out[0], int(out[1])


glibc_only = pytest.mark.skipif(not _glibc(), reason="malloc arenas are glibc's")


@glibc_only
def test_threads_share_the_capped_arenas() -> None:
    capped, arenas = _arenas("cap")
    assert capped == "True"
    assert arenas <= 2
    # The same threads without the cap: an arena each (that is what the cap is for).
    _, uncapped = _arenas("none")
    assert uncapped > 2


@glibc_only
def test_the_environment_variable_takes_precedence() -> None:
    capped, arenas = _arenas("cap", {"MALLOC_ARENA_MAX": "4"})
    assert capped == "False"  # left to glibc, which read the variable itself
    assert 2 < arenas <= 4


def test_at_least_one_arena() -> None:
    with pytest.raises(ValueError, match="arenas must be >= 1"):
        limit_arenas(0)
