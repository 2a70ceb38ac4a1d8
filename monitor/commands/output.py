"""How commands print numbers, percentages and tables: one look across every command that
prints a table (``judge``, ``compare``, ``agreement`` with its panel view, ``pairwise``,
``tournament``, ``rubric``, ``drift``, ``detect``, ``estimate``)."""

from __future__ import annotations

from collections.abc import Sequence

MISSING = "—"  # a figure that could not be computed (too few data, a failed judgment)


def num(x: float | None, digits: int = 4, *, tiny_exponent: bool = False) -> str:
    """``x`` with ``digits`` decimals; with ``tiny_exponent``, a non-zero value that would
    print as 0 is written as ``1.2e-05`` instead."""
    if x is None:
        return MISSING
    if tiny_exponent and x != 0 and abs(x) < 10 ** (-digits):
        return f"{x:.1e}"
    return f"{x:.{digits}f}"


def percent(x: float | None, digits: int = 1) -> str:
    """A share as a percentage with ``digits`` decimals (0.25 -> ``25.0%``)."""
    return MISSING if x is None else f"{100 * x:.{digits}f}%"


def p_value(x: float | None) -> str:
    """A p-value: four decimals, or an exponent below 1e-4."""
    return MISSING if x is None else (f"{x:.2e}" if x < 1e-4 else f"{x:.4f}")


def table(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    left: frozenset[int] = frozenset({0}),
    *,
    rule: bool = True,
) -> str:
    """Columns padded to their widest cell, ``left`` ones left-aligned (the rest right), a rule
    under the header (none with ``rule=False``: row i on line i + 1, as a ranking is read), no
    trailing spaces."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        cells = zip(row, widths, strict=True)
        return "  ".join(
            c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(cells)
        ).rstrip()

    under = [line(["-" * w for w in widths])] if rule else []
    return "\n".join([line(header), *under, *(line(r) for r in rows)])


__all__ = ["MISSING", "num", "p_value", "percent", "table"]
