"""The judge against the users: how a user's feedback on a turn and the judge's band of the
same turn agree (pure).

A judge "flags" a turn whose band is severe or moderate (the bands the alerts page on) and
"passes" a minor or none one; a user is unhappy with negative feedback and happy with positive.
Each pair falls in one cell:

====================  ================  ===============
                      user unhappy      user happy
====================  ================  ===============
judge flags           ``agree_unhappy`` ``judge_harsh``
judge passes          ``judge_blind``   ``agree_happy``
====================  ================  ===============

and neutral feedback in ``user_neutral`` (no side to agree with). ``blind_rate`` is the share of
unhappy users the judge passed: the "judge blind" alert watches it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

AGREE_UNHAPPY = "agree_unhappy"
JUDGE_BLIND = "judge_blind"
JUDGE_HARSH = "judge_harsh"
AGREE_HAPPY = "agree_happy"
USER_NEUTRAL = "user_neutral"
CELLS: tuple[str, ...] = (AGREE_UNHAPPY, JUDGE_BLIND, JUDGE_HARSH, AGREE_HAPPY, USER_NEUTRAL)
FLAGGED_BANDS = frozenset({"severe", "moderate"})


def cell(turn_band: str, polarity: str) -> str:
    """The agreement cell of one judge band and one feedback polarity."""
    if polarity == "neutral":
        return USER_NEUTRAL
    if polarity not in ("negative", "positive"):
        raise ValueError(f"polarity must be negative, neutral or positive, not {polarity!r}")
    flagged = turn_band in FLAGGED_BANDS
    if polarity == "negative":
        return AGREE_UNHAPPY if flagged else JUDGE_BLIND
    return JUDGE_HARSH if flagged else AGREE_HAPPY


@dataclass(frozen=True)
class Agreement:
    """The four cells of one assistant's pairs (neutral feedback left out)."""

    agree_unhappy: int
    judge_blind: int
    judge_harsh: int
    agree_happy: int

    @classmethod
    def of(cls, counts: Mapping[str, int]) -> Agreement:
        return cls(*(int(counts.get(c, 0)) for c in CELLS[:4]))

    @property
    def pairs(self) -> int:
        return self.agree_unhappy + self.judge_blind + self.judge_harsh + self.agree_happy

    @property
    def rate(self) -> float | None:
        """Share of pairs where judge and user agree (None without pairs)."""
        if not self.pairs:
            return None
        return (self.agree_unhappy + self.agree_happy) / self.pairs

    @property
    def blind_rate(self) -> float | None:
        """Share of unhappy users whose turn the judge passed."""
        unhappy = self.agree_unhappy + self.judge_blind
        return self.judge_blind / unhappy if unhappy else None

    @property
    def harsh_rate(self) -> float | None:
        """Share of happy users whose turn the judge flagged."""
        happy = self.judge_harsh + self.agree_happy
        return self.judge_harsh / happy if happy else None

    @property
    def kappa(self) -> float | None:
        """Cohen's kappa between the judge (flags/passes) and the users (unhappy/happy)."""
        n = self.pairs
        if not n:
            return None
        observed = (self.agree_unhappy + self.agree_happy) / n
        judge_flags = (self.agree_unhappy + self.judge_harsh) / n
        user_unhappy = (self.agree_unhappy + self.judge_blind) / n
        expected = judge_flags * user_unhappy + (1 - judge_flags) * (1 - user_unhappy)
        if expected >= 1.0:
            return None  # one side never varies: kappa is undefined
        return (observed - expected) / (1 - expected)
