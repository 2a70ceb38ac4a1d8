"""Fixtures shared by the step tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from consumers.dlq import FileDeadLetterSink


@pytest.fixture
def sink(tmp_path: Path) -> Iterator[FileDeadLetterSink]:
    """A real dead-letter sink (a file), closed after the test."""
    dlq = FileDeadLetterSink(tmp_path / "dlq.jsonl")
    yield dlq
    dlq.close()
