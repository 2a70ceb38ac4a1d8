"""Shared fixtures live in tests/fixtures/, one module per real component."""

pytest_plugins = [
    "tests.fixtures.judge_server",
    "tests.fixtures.broker",
    "tests.fixtures.databases",
    "tests.fixtures.prometheus",
]
