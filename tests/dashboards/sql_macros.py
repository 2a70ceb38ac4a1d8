"""Grafana's PostgreSQL data source, as far as the turns dashboard uses it: the macros and the
variable interpolation it applies to ``rawSql`` before sending it, so tests run the committed
queries exactly as Grafana would.

- ``$__timeFilter(col)`` -> ``col BETWEEN 'FROM' AND 'TO'`` (RFC 3339, UTC);
  ``$__timeFrom()`` / ``$__timeTo()`` -> ``'FROM'`` / ``'TO'``;
  ``$__timeGroupAlias(col, '5m')`` -> ``floor(extract(epoch from col)/300)*300 AS "time"``.
- A multi-value or include-all variable -> its values quoted and comma-separated ("All": every
  value); a single-value one -> its value with ``'`` doubled, unquoted;
  ``${name:sqlstring}`` -> the value(s) quoted with ``'`` doubled.
An unknown macro or variable raises KeyError (Grafana would leave it and PostgreSQL fail).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass(frozen=True)
class Var:
    values: Sequence[str]
    multi: bool = False  # multi-value or include-all: quoted list


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _rfc3339(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _seconds(interval: str) -> int:
    m = re.fullmatch(r"(\d+)([smhd])", interval.strip().strip("'"))
    if m is None:
        raise KeyError(f"interval {interval!r}")
    return int(m.group(1)) * _UNITS[m.group(2)]


def expand(sql: str, start: datetime, end: datetime, variables: Mapping[str, Var]) -> str:
    def macro(m: re.Match[str]) -> str:
        name, args = m.group(1), [a.strip() for a in m.group(2).split(",")] if m.group(2) else []
        if name == "__timeFilter":
            return f"{args[0]} BETWEEN '{_rfc3339(start)}' AND '{_rfc3339(end)}'"
        if name == "__timeFrom":
            return f"'{_rfc3339(start)}'"
        if name == "__timeTo":
            return f"'{_rfc3339(end)}'"
        if name == "__timeGroupAlias":
            s = _seconds(args[1])
            return f'floor(extract(epoch from {args[0]})/{s})*{s} AS "time"'
        raise KeyError(f"macro ${name}")

    sql = re.sub(r"\$(__\w+)\(([^()]*)\)", macro, sql)

    def variable(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(3)
        fmt = m.group(2)
        var = variables[name]
        if fmt == "sqlstring" or (fmt is None and var.multi):
            return ",".join(_quote(v) for v in var.values)
        if fmt is not None:
            raise KeyError(f"format {fmt!r} of ${name}")
        (value,) = var.values
        return value.replace("'", "''")

    return re.sub(r"\$\{(\w+)(?::(\w+))?\}|\$(\w+)", variable, sql)
