"""Log lines a person reads: a datetime is its ISO text, not its repr; a float keeps 4
significant digits but never loses an integer digit; an event a command says in its own words
is not logged twice; secrets stay redacted."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

from monitor.runtime.logs import readable

PROGRAM = textwrap.dedent(
    """
    import datetime as dt
    import structlog
    from monitor.runtime.logs import configure_logging

    configure_logging("info", ["sk-secret-value"], json=True, said_otherwise=["said elsewhere"])
    log = structlog.get_logger("t")
    log.warning(
        "detector alarm",
        change_point=dt.datetime(2026, 12, 6, 18, 23, 46, 59568, tzinfo=dt.UTC),
        rate=0.10344827586206896,
        rates={"observed": 0.2857142857142857, "when": dt.date(2026, 12, 6)},
        shares=[0.3333333333333333],
        epoch=1765045426.123456,
        count=1234567,
        token="sk-secret-value",
    )
    log.info("said elsewhere", line=1)
    """
)


def _lines() -> list[dict[str, Any]]:
    result = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=120, check=True
    )
    return [json.loads(line) for line in result.stderr.splitlines() if line.strip()]


def test_log_lines_carry_iso_times_and_rounded_rates() -> None:
    lines = _lines()
    assert len(lines) == 1  # the event said elsewhere is dropped
    line = lines[0]
    assert line["change_point"] == "2026-12-06T18:23:46.059568+00:00"
    assert line["rate"] == 0.1034
    assert line["rates"] == {"observed": 0.2857, "when": "2026-12-06"}
    assert line["shares"] == [0.3333]
    assert line["epoch"] == 1765045426.0  # no integer digit is rounded away
    assert line["count"] == 1234567
    assert line["token"] == "***"


def test_readable_leaves_other_values_and_named_tuples_intact() -> None:
    from collections import namedtuple

    pair = namedtuple("pair", "a b")
    assert readable(pair(0.123456, "x")) == pair(0.1235, "x")
    assert readable((1.0, 2)) == (1.0, 2)
    assert readable(float("nan")) != readable(float("nan"))  # still NaN
    assert readable(0.0) == 0.0 and readable(-12.34567) == -12.35
    assert readable("2026") == "2026" and readable(None) is None
