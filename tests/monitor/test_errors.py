"""The shared error helpers: bounded details and pydantic errors without the offending values."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from monitor.errors import (
    BrokerError,
    TransportError,
    TurnFileError,
    truncate,
    validation_error_lines,
)


class _Doc(BaseModel):
    a: int
    b: int
    c: int


def _error(**values: object) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        _Doc.model_validate(values)
    return info.value


def test_truncate_keeps_short_text_and_marks_a_cut() -> None:
    assert truncate("abc", 3) == "abc"
    cut = truncate("abcdef", 4)
    assert cut == "abc…" and len(cut) == 4


def test_validation_error_lines_name_the_location_not_the_value() -> None:
    lines = validation_error_lines(_error(a="secret-token", b=1, c=2))
    assert lines == ["a: Input should be a valid integer, unable to parse string as an integer"]
    assert "secret-token" not in " ".join(lines)


def test_validation_error_lines_past_the_limit_say_how_many_more() -> None:
    lines = validation_error_lines(_error(), limit=1)
    assert lines == ["a: Field required", "... and 2 more error(s)"]


def test_file_and_broker_failures_share_the_transport_parent() -> None:
    assert issubclass(BrokerError, TransportError)
    assert issubclass(TurnFileError, TransportError)
    assert not issubclass(TurnFileError, BrokerError)
