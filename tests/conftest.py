"""Shared fixtures live in tests/fixtures/, one module per real component."""

from hypothesis import HealthCheck, settings

from monitor.exporter import disable_created_series

pytest_plugins = [
    "tests.fixtures.judge_server",
    "tests.fixtures.broker",
    "tests.fixtures.databases",
    "tests.fixtures.prometheus",
]

# Hypothesis' per-example deadline and its too_slow health check are timing thresholds: on a
# loaded machine (or under PYTHONTRACEMALLOC) they fail tests whose logic is fine.
settings.register_profile("casewatch", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("casewatch")

# The daemon runner turns *_created series off for the whole process (an entrypoint's decision,
# monitor.exporter.disable_created_series); tests that build a Metrics of their own expose what
# the daemon would.
disable_created_series()
