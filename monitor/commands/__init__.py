"""CLI command groups. Every module here may define ``COMMANDS: list[click.Command]``; they are
collected automatically, so adding a command never means editing a shared list.

Collecting imports every module, and with them every command's dependencies (the OpenAI SDK
for pairwise judging, scipy for agreement statistics, ...): seconds on a busy node. So every
command is listed in ``INDEX`` with its module and its one-line summary: ``CommandTable``
imports only that module to run it (``casewatch run``: a restarted daemon's time to its first
verdict starts with it), and ``casewatch --help`` lists the summaries without importing any
command module. A command missing from ``INDEX`` still works (everything is
collected to find it); tests/monitor/commands/test_registry.py checks that every command is
listed with the right module and its current summary.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator, MutableMapping

import click

# name -> (module, the summary ``--help`` shows: the command's own short help, kept equal by
# tests/monitor/commands/test_registry.py).
INDEX: dict[str, tuple[str, str]] = {
    "agreement": (
        "batch",
        "How well the judge agrees with human labels (--labels or --store) and another judge "
        "(--other).",
    ),
    "broker": (
        "broker",
        "Start the embedded Kafka-protocol broker (Tansu, in memory) and print its address.",
    ),
    "cascade": ("cascade", "The cascade's cheap look against the LLM judge (read-only)."),
    "compare": (
        "batch",
        "Compare assistant B with A on the conversations both answered (Wilcoxon, t, bootstrap).",
    ),
    "db": ("db", "Manage the verdict database (storage.url)."),
    "detect": (
        "detect",
        "Print the sequential detectors' state (statistic 1.0 = threshold) from the store.",
    ),
    "demo": (
        "demo",
        "Run the daemon against an embedded Kafka broker fed with the example turns.",
    ),
    "drift": (
        "drift",
        "Compare each assistant's recent window with its reference window (read-only).",
    ),
    "estimate": (
        "estimate",
        "The severe rate corrected by human labels (prediction-powered inference).",
    ),
    "inspect": ("inspect", "Show judged turns and why the judges scored them so (read-only)."),
    "judge": (
        "batch",
        "Judge every turn event of INPUT.jsonl; resumable (turns already in --out are skipped).",
    ),
    "labels": ("labels", "Human labels: export a random batch to label, import the labels."),
    "map-check": (
        "map_check",
        "Show the turn each JSON event of EVENTS.jsonl becomes under `mapping`, or why not.",
    ),
    "outcomes": ("outcomes", "End-user feedback and case outcomes: import them from a file."),
    "pairwise": (
        "pairwise",
        "Compare two answer sets to the same questions: per question A/B/Tie with confidence, "
        "totals, and A's win rate with a 95 % bootstrap interval.",
    ),
    "produce": (
        "daemon",
        "Publish the turns of a JSONL file to a Kafka topic, as raw bytes (one line, one message).",
    ),
    "rubric": (
        "rubric",
        "Rubric grading (Pencils Down): question generation, grading to qrels/runs, trec_eval.",
    ),
    "run": ("daemon", "Run the streaming daemon: consume, sample, judge, store, export metrics."),
    "tournament": (
        "pairwise",
        "Rank systems (one turn-event file each) by a Bradley-Terry fit on the Elo scale to a "
        "Swiss tournament (default) or a round-robin; ratings come with 95 % bootstrap "
        "intervals.",
    ),
}


def module_commands(name: str) -> list[click.Command]:
    module = importlib.import_module(f"{__name__}.{name}")
    return list(getattr(module, "COMMANDS", []))


def collect() -> list[click.Command]:
    found: list[click.Command] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        found.extend(module_commands(info.name))
    return found


class CommandTable(MutableMapping[str, click.Command]):
    """A click group's ``commands``, filled on first need: looking one ``INDEX`` command up
    (what click does to run it) imports its module only; anything else (listing, ``--help``,
    an unlisted name) collects every module first."""

    def __init__(self) -> None:
        self._table: dict[str, click.Command] = {}
        self._complete = False

    def _collect_all(self) -> None:
        if not self._complete:
            for command in collect():
                if command.name is not None:
                    self._table.setdefault(command.name, command)
            self._complete = True

    def get(self, key: str, default: click.Command | None = None) -> click.Command | None:  # type: ignore[override]
        if key not in self._table and not self._complete:
            listed = INDEX.get(key)
            if listed is not None:
                for command in module_commands(listed[0]):
                    if command.name is not None:
                        self._table.setdefault(command.name, command)
            if key not in self._table:
                self._collect_all()
        return self._table.get(key, default)

    def __getitem__(self, key: str) -> click.Command:
        found = self.get(key)
        if found is None:
            raise KeyError(key)
        return found

    def __setitem__(self, key: str, value: click.Command) -> None:
        self._table[key] = value

    def __delitem__(self, key: str) -> None:
        self._collect_all()
        del self._table[key]

    def __iter__(self) -> Iterator[str]:
        # The names only: listing them (``--help``) imports no command module.
        return iter(sorted({*self._table, *INDEX}))

    def __len__(self) -> int:
        return len({*self._table, *INDEX})

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None


def __getattr__(name: str) -> list[click.Command]:
    # ``COMMANDS`` (every command, all modules imported) for callers that want the whole list.
    if name == "COMMANDS":
        return collect()
    raise AttributeError(name)
