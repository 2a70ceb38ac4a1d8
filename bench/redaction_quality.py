"""Precision and recall of the redaction detectors per kind, on the labelled corpus.

The corpus (tests/monitor/redaction/corpus.py) holds support sentences with labelled e-mails,
phones, payment cards, IBANs and secrets, and hard negatives (error codes, versions, order and
ticket ids, configuration keys, documentation URLs, timestamps, dates, ports, hex hashes) that
must come out unchanged. Recall: labelled values replaced under their kind; precision: of the
values replaced under a kind, those labelled so (a hard negative replaced counts against it).
The detectors were written against this corpus, so these are in-sample figures. Ends with one
JSON line.

    .venv/bin/python bench/redaction_quality.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # bench/ is not an installed package

from monitor.redaction import RedactionPolicy, Redactor  # noqa: E402
from tests.monitor.redaction.corpus import negatives, positives, score  # noqa: E402


def main() -> None:
    result = score(Redactor(RedactionPolicy()))
    print(f"corpus: {len(positives())} samples, {len(negatives())} hard negatives")
    print(f"{'kind':8} {'labelled':>8} {'found':>6} {'false+':>6} {'precision':>9} {'recall':>7}")
    out = {}
    for kind, k in result.kinds.items():
        print(
            f"{kind:8} {k.labelled:8d} {k.found:6d} {k.false_positives:6d} "
            f"{k.precision:9.3f} {k.recall:7.3f}"
        )
        out[kind] = {"precision": round(k.precision, 4), "recall": round(k.recall, 4)}
    print(f"hard negatives altered: {len(result.altered)}")
    for text, found in result.altered:
        print(f"  {text!r}: {found}")
    for kind, value in result.missed:
        print(f"  missed {kind}: {value!r}")
    print(json.dumps({"kinds": out, "negatives_altered": len(result.altered)}))


if __name__ == "__main__":
    main()
