"""Shared fixtures live in tests/fixtures/, one module per real component."""

import gc
import os
import signal
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from monitor.metrics.exporter import disable_created_series

pytest_plugins = [
    "tests.fixtures.judge_server",
    "tests.fixtures.broker",
    "tests.fixtures.databases",
    "tests.fixtures.prometheus",
    "tests.fixtures.model_server",
    "tests.fixtures.label_studio",
]

# Hypothesis' per-example deadline and its too_slow health check are timing thresholds: on a
# loaded machine (or under PYTHONTRACEMALLOC) they fail tests whose logic is fine.
settings.register_profile("casewatch", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("casewatch")

# The daemon runner turns *_created series off for the whole process (an entrypoint's decision,
# monitor.metrics.exporter.disable_created_series); tests that build a Metrics of their own expose
# what
# the daemon would.
disable_created_series()
# The shipped sampling defaults are a tenth of the conversations under an hourly call budget
# (a monitor must not surprise its user with cost). The suite's streams are small and
# count every turn, so the tests judge everything unless a test says otherwise; the defaults
# themselves are tested with this variable removed (tests/monitor/config/test_settings.py). The
# budget
# stays on, finite and far above what a test's stream spends, so its accounting runs in every
# test: a reservation a path forgets to settle is seen (the daemon harness checks that none is
# left when a daemon stops, tests/support/daemon.py). Set for the session (not at import:
# collecting the tests changes nothing), so subprocesses (the CLI, the demo) inherit it too.
JUDGE_EVERYTHING = (
    '{"default_rate": 1.0, "budget_calls_per_hour": 1000000, "budget_usd_per_hour": 100000}'
)


@pytest.fixture(scope="session", autouse=True)
def judge_everything() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        if "CASEWATCH_SAMPLING" not in os.environ:
            patch.setenv("CASEWATCH_SAMPLING", JUDGE_EVERYTHING)
        yield


@pytest.fixture(autouse=True)
def _kafka_fallbacks_left_as_found() -> Iterator[None]:
    """The Kafka client's fallen-back patches are remembered per process (a production daemon is
    one process): a test that makes a patch fall back on a fake client must not leave it
    reported by every later test's daemon, whose gauge would page CasewatchKafkaPatchFallback."""
    from consumers import _kafka

    before = set(_kafka._warned)
    yield
    _kafka._warned.clear()
    _kafka._warned.update(before)


@pytest.fixture(autouse=True)
def _heap_thawed() -> Iterator[None]:
    """``casewatch run`` freezes its process's heap once built (``monitor/runtime/heap.py``);
    run in-process by a test, it would freeze the test run's, whose later cycles among those
    objects would never be collected. Thawed after every test."""
    yield
    if gc.get_freeze_count():
        gc.unfreeze()


def _signal_state() -> tuple[object, object, frozenset[int]]:
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    return (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM), frozenset(blocked))


@pytest.fixture(autouse=True)
def _signals_left_as_found() -> Iterator[None]:
    """A test that runs a command in-process (`casewatch run`, demo, broker) must leave the
    SIGINT/SIGTERM handlers and the signal mask as it found them: a child process inherits an
    ignored or blocked signal, and a later test that interrupts its child would wait in vain."""
    before = _signal_state()
    yield
    after = _signal_state()
    if after != before:
        for sig, handler in zip((signal.SIGINT, signal.SIGTERM), before[:2], strict=True):
            if callable(handler) or handler in (signal.SIG_DFL, signal.SIG_IGN):
                signal.signal(sig, handler)  # type: ignore[arg-type]
        signal.pthread_sigmask(signal.SIG_SETMASK, before[2])
        pytest.fail(f"the test changed the process's signal handling: {before} -> {after}")
