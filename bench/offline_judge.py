"""How the offline heuristic judge agrees with people: calibration set vs held-out set.

Scores every labelled turn of three sets with the heuristic judge (pure, no I/O beyond reading
the files) and compares its band per metric with the human band:

- calibration: examples/turns.jsonl + examples/human_labels.jsonl (synthetic; the heuristics
  were tuned on it, so this is an in-sample figure);
- dev: examples/heldout/dev.jsonl (hand-written; the heuristics may be tuned on it);
- heldout: examples/heldout/test.jsonl (hand-written; never tuned on: the figure that counts).

Per metric: accuracy, Cohen's kappa (as ``casewatch agreement`` computes them) and the recall
of severe cases (the share of turns people call severe on the metric that the judge also calls
severe). A gap between calibration and held-out is overfitting showing. Ends with one JSON line.

    .venv/bin/python bench/offline_judge.py [--all-metrics] [--sets calibration,heldout]
        [--redact]

``--redact`` scores each turn as the daemon's redaction step hands it on (placeholders for
e-mails, phones, cards, IBANs and secrets): the figures must not fall with it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from monitor.judging.heuristic.judge import ALGORITHM_VERSION, score_turn
from monitor.judging.heuristic.tripwire import identifier_tripwire
from monitor.redaction import RedactionPolicy, Redactor
from monitor.schema.turn import METRICS, TurnEvent
from monitor.scoring import turn as scoring
from monitor.stats.agreement import band_agreement

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
SETS: dict[str, tuple[Path, Path]] = {
    "calibration": (EXAMPLES / "turns.jsonl", EXAMPLES / "human_labels.jsonl"),
    "dev": (EXAMPLES / "heldout" / "dev.jsonl", EXAMPLES / "heldout" / "dev-labels.jsonl"),
    "heldout": (EXAMPLES / "heldout" / "test.jsonl", EXAMPLES / "heldout" / "test-labels.jsonl"),
}
CRITICAL = ("hallucination", "identifier_integrity", "resolution_alignment")
SEVERE = "severe"


@dataclass(frozen=True)
class MetricFigures:
    n: int
    accuracy: float | None
    kappa: float | None
    severe: int  # turns people call severe on this metric
    severe_caught: int  # ... that the judge also calls severe
    false_severe: int  # turns the judge calls severe that people do not

    @property
    def severe_recall(self) -> float | None:
        return self.severe_caught / self.severe if self.severe else None


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@dataclass(frozen=True)
class TripwireFigures:
    """The identifier tripwire against the identifier_integrity labels (severe = a hit)."""

    severe: int
    caught: int
    false_alarms: int


def evaluate(
    turns_path: Path, labels_path: Path, redactor: Redactor | None = None
) -> tuple[dict[str, MetricFigures], TripwireFigures, float]:
    labels = {row["event_id"]: row["labels"] for row in read_jsonl(labels_path)}
    judged: dict[str, dict[str, str]] = {}
    tripped: dict[str, bool] = {}
    started = time.perf_counter()
    for row in read_jsonl(turns_path):
        if row["event_id"] not in labels:
            continue
        turn = TurnEvent.model_validate(row)
        if redactor is not None:  # as the daemon's redaction step hands it on
            turn = redactor.redact_turn(turn).turn
        scores = score_turn(turn)
        judged[row["event_id"]] = {m: scoring.band(s).value for m, s in scores.score_map().items()}
        tripped[row["event_id"]] = bool(identifier_tripwire(turn))
    seconds = time.perf_counter() - started
    missing = sorted(set(labels) - set(judged))
    if missing:
        raise SystemExit(
            f"{labels_path.name}: labelled turns missing from {turns_path.name}: "
            f"{', '.join(missing[:5])}"
        )
    out: dict[str, MetricFigures] = {}
    for metric in METRICS:
        ids = [e for e in labels if metric in labels[e]]
        human = [labels[e][metric] for e in ids]
        judge = [judged[e][metric] for e in ids]
        agreement = band_agreement(metric, human, judge)
        out[metric] = MetricFigures(
            n=len(ids),
            accuracy=agreement.accuracy,
            kappa=agreement.kappa,
            severe=sum(h == SEVERE for h in human),
            severe_caught=sum(
                h == SEVERE and j == SEVERE for h, j in zip(human, judge, strict=True)
            ),
            false_severe=sum(
                h != SEVERE and j == SEVERE for h, j in zip(human, judge, strict=True)
            ),
        )
    severe = {e for e in labels if labels[e].get("identifier_integrity") == SEVERE}
    wire = TripwireFigures(
        severe=len(severe),
        caught=sum(tripped[e] for e in severe),
        false_alarms=sum(tripped[e] for e in tripped if e not in severe),
    )
    return out, wire, seconds / max(1, len(judged))


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def print_table(results: dict[str, dict[str, MetricFigures]], metrics: tuple[str, ...]) -> None:
    header = f"{'set':<12} {'metric':<26} {'n':>3} {'acc':>5} {'kappa':>6} {'severe recall':>14}"
    print(header + "  false severe")
    for name, figures in results.items():
        for metric in metrics:
            f = figures[metric]
            recall = f"{_f(f.severe_recall)} ({f.severe_caught}/{f.severe})"
            print(
                f"{name:<12} {metric:<26} {f.n:>3} {_f(f.accuracy):>5} {_f(f.kappa):>6} "
                f"{recall:>14}  {f.false_severe}"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sets", default=",".join(SETS), help="comma-separated, of: " + ", ".join(SETS)
    )
    parser.add_argument(
        "--all-metrics", action="store_true", help="all 8 metrics, not only the critical 3"
    )
    parser.add_argument(
        "--redact",
        action="store_true",
        help="pseudonymize each turn first, with the default redaction policy",
    )
    args = parser.parse_args(argv)
    redactor = Redactor(RedactionPolicy()) if args.redact else None
    names = [n for n in args.sets.split(",") if n]
    unknown = set(names) - set(SETS)
    if unknown:
        parser.error(f"unknown set(s): {', '.join(sorted(unknown))}")
    results: dict[str, dict[str, MetricFigures]] = {}
    wires: dict[str, TripwireFigures] = {}
    us_per_turn: dict[str, float] = {}
    for name in names:
        results[name], wires[name], seconds = evaluate(*SETS[name], redactor)
        us_per_turn[name] = seconds * 1e6
    redacted = " (turns redacted first)" if args.redact else ""
    print(f"offline judge {ALGORITHM_VERSION}: bands vs human labels per set{redacted}")
    print_table(results, METRICS if args.all_metrics else CRITICAL)
    for name, w in wires.items():
        print(
            f"identifier tripwire on {name}: {w.caught} of {w.severe} identifier-severe turns "
            f"tripped it, {w.false_alarms} other turns did"
        )
    doc: dict[str, Any] = {
        "algorithm": ALGORITHM_VERSION,
        "redacted": args.redact,
        "us_per_turn": us_per_turn,
        "tripwire": {n: vars(w) for n, w in wires.items()},
    }
    for name, figures in results.items():
        doc[name] = {
            m: {
                "n": f.n,
                "accuracy": f.accuracy,
                "kappa": f.kappa,
                "severe": f.severe,
                "severe_recall": f.severe_recall,
                "false_severe": f.false_severe,
            }
            for m, f in figures.items()
        }
    print(json.dumps(doc, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
