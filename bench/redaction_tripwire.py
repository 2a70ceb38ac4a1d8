"""The identifier tripwire's decisions with and without redaction, on its regression corpus.

tests/monitor/judging/heuristic/tripwire_corpus.py holds every example turn and its mutated
copies (identifiers in the answer corrupted by a substitution, a swap, a dropped character,
...). Each turn is checked as consumed and as the redaction step hands it on; a turn that trips
only raw is a corruption redaction hides, one that trips only redacted a new alarm. Ends with
one JSON line.

    .venv/bin/python bench/redaction_tripwire.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # bench/ is not an installed package

from monitor.judging.heuristic.tripwire import identifier_tripwire  # noqa: E402
from monitor.redaction import RedactionPolicy, Redactor  # noqa: E402
from tests.monitor.judging.heuristic.tripwire_corpus import describe, turns  # noqa: E402


def main() -> None:
    redactor = Redactor(RedactionPolicy())
    checked, redacted_values = 0, 0
    raw: set[str] = set()
    red: dict[str, list[str]] = {}
    for key, turn in turns():
        checked += 1
        if identifier_tripwire(turn):
            raw.add(key)
        result = redactor.redact_turn(turn)
        redacted_values += sum(result.counts.values())
        hit = identifier_tripwire(result.turn)
        if hit:
            red[key] = describe(hit)
    lost, gained = sorted(raw - set(red)), sorted(set(red) - raw)
    print(f"{checked} turns, {redacted_values} values redacted")
    print(f"tripped raw: {len(raw)}; redacted: {len(red)}; lost: {len(lost)}; new: {len(gained)}")
    for key in lost:
        print(f"  lost {key}")
    for key in gained:
        print(f"  new  {key}: {'; '.join(red[key])}")
    print(
        json.dumps(
            {
                "checked": checked,
                "tripped_raw": len(raw),
                "tripped_redacted": len(red),
                "lost": lost,
                "new": gained,
            }
        )
    )


if __name__ == "__main__":
    main()
