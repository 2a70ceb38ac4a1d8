"""Imports point from the entry points toward the core, never back (ARCHITECTURE.md, "Layers").

Every module of ``monitor`` and ``consumers`` is listed here by name, twice over:

- ``LAYERS`` puts each group (a top-level module, or a package with everything under it) on a
  layer, lowest first. A module may import its own group or any lower layer; groups on one
  layer are independent of each other (judging, storage and stream intake know nothing of one
  another).
- ``INSIDE`` orders the modules of each package, lowest first: inside a package a module may
  import only modules of lower sub-layers, so two siblings on one sub-layer (two jobs, two
  steps) never import each other, and a shared piece moves down to a sub-layer of its own.

A module listed nowhere fails ``test_every_module_has_a_layer``: a new module is placed on
purpose. Imports under ``TYPE_CHECKING`` and inside functions count too: a lazy import is still
a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Lowest first. "monitor" is the package's __init__ (the version) only.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("monitor", "monitor.errors"),
    ("monitor.runtime", "monitor.schema"),
    ("monitor.scoring",),
    ("monitor.metrics", "monitor.config"),
    ("monitor.redaction",),
    # The root of the settings holds the redaction section, so it sits above redaction, which
    # reads its secret through the config package below.
    ("monitor.config.settings",),
    # Pure statistics sit under every group that does I/O (store, judges, intake), so an
    # import of one from stats/ fails here.
    ("monitor.stats",),
    (
        "monitor.judging",
        "monitor.annotation",
        "monitor.storage",
        "consumers",
        "monitor.otel_export",
        "monitor.sampling",
    ),
    ("monitor.reports",),
    ("monitor.jobs",),
    ("monitor.stream",),
    ("monitor.demo", "monitor.batch"),
    ("monitor.commands",),
    ("monitor.cli",),
)

# Each package's modules (relative names; "__init__" is the package itself), lowest first.
INSIDE: dict[str, tuple[tuple[str, ...], ...]] = {
    "monitor.runtime": (
        ("__init__", "allocator", "clock", "heap", "logs", "processes", "program", "workers"),
    ),
    "monitor.schema": (("__init__", "turn"), ("case", "mapping", "outcome")),
    "monitor.scoring": (("__init__", "turn"), ("case",)),
    "monitor.metrics": (("__init__", "scrape_body"), ("exporter",)),
    "consumers": (
        (
            "__init__",
            "broker_quirks",
            "group_health",
            "rebalance_handoff",
            "records",
            "replay",
            "patch_fallbacks",
            "otel.__init__",
            "otel.otlp",
        ),
        (
            "unreadable",
            "partition_pauses",
            "resume_points",
            "otel.assembly",
            "otel.attribute_values",
        ),
        ("_kafka", "decode", "offsets", "source", "otel.openinference", "otel.semconv"),
        (
            "_kafka_fetch",
            "_kafka_fetch_order",
            "_kafka_group",
            "_kafka_records",
            "broker_ping",
            "lag_meter",
            "record_reader",
            "otel.genai",
            "producer",
            "rebalance_listener",
        ),
        ("early_join", "group_consumer", "group_rejoin", "unreadable_holds"),
        ("dlq", "file_source", "kafka_source", "repartition", "tansu"),
    ),
    "monitor.judging": (
        # contracts and pure pieces
        (
            "__init__",
            "arbitration",
            "chat_reply",
            "judge",
            "pairwise_scoring",
            "passages",
            "rubric_scoring",
            "rubric_set",
            "schema",
            "verdicts",
            "heuristic.__init__",
            "heuristic.kinds",
            "heuristic.lexicon",
        ),
        ("case_schema", "chat_options", "http_transport"),
        ("chat_endpoint", "embeddings", "prompt", "recorder", "rubric_match", "heuristic.tokens"),
        (
            "case_prompt",
            "openai_judge",
            "preflight",
            "pairwise_prompt",
            "rubric_prompt",
            "heuristic.identifiers",
        ),
        (
            "case_judge",
            "pairwise_judge",
            "probes",
            "rubric_grader",
            "heuristic.case_judge",
            "heuristic.evidence",
            "heuristic.tripwire",
        ),
        ("heuristic.constraints",),
        ("heuristic.judge",),
        # composition: which judge a setting names, the panel, the evaluator
        ("case_panel", "config_hash", "factory", "pairwise_heuristic"),
        ("pairwise_factory", "panel"),
        ("evaluator",),
    ),
    "monitor.config": (
        ("__init__", "secrets", "messages"),
        ("section",),
        # one section per concept; the baseline's names a judge, so it sits above judges
        (
            "cases",
            "daemon",
            "detection",
            "drift",
            "failure_modes",
            "judge_canary",
            "judges",
            "kafka",
            "otel",
            "outcomes",
            "quality_estimate",
            "review",
            "rubric",
            "sampling",
            "storage",
        ),
        ("baseline",),
    ),
    "monitor.otel_export": (("__init__", "records"), ("sender",)),
    "monitor.annotation": (("__init__", "label_studio", "label_studio_server"),),
    "monitor.redaction": (
        ("detectors", "placeholders", "policy", "turn_texts"),
        ("redactor",),
        ("__init__", "config"),
    ),
    "monitor.storage": (
        ("__init__", "tables", "engine", "location", "refusals"),
        ("schema",),
        ("store",),
        # Kept turns under the labels and the drift and detection reads, which leave out the
        # turns judged because of feedback with its predicate; outcomes join them.
        ("retained_turns",),
        ("outcomes",),
        ("audit", "leases", "labels", "retention", "turn_queries"),
        # What the three detectors' saves share, under their queries.
        ("detector_saves",),
        (
            "canary_runs",
            "case_labels",
            "cascade_pairs",
            "case_queries",
            "detection_queries",
            "drift_queries",
            "failure_modes",
            "matches",
            "review_queue",
            "rubric_gradings",
        ),
        ("case_detection_queries", "case_drift_queries", "outcome_detection_queries"),
    ),
    "monitor.sampling": (
        ("__init__", "budget", "cascade"),
        ("sampler",),
        ("judging_redaction",),
    ),
    "monitor.stats": (
        (
            "__init__",
            "active_sampling",
            "baseline_policy",
            "confidence_sequence",
            "cusum_calibration",
            "detection_signals",
            "cheap_agreement",
            "elo",
            "failure_features",
            "inclusion",
            "judge_user_agreement",
            "lazy",
            "ppi",
        ),
        ("bradley_terry", "cell_cusum", "failure_modes", "weighted_rates"),
        ("detection", "drift_stats", "paired", "tournament"),
        ("weighted_drift",),
        ("agreement", "comparison", "detector_state", "drift", "run_cusum"),
        ("case_comparison", "case_drift"),
    ),
    "monitor.reports": (
        (
            "__init__",
            "alert_links",
            "cascade_check",
            "case_view",
            "failure_view",
            "judge_change",
            "label_files",
            "pairwise_report",
            "panel_report",
            "rubric_runs",
            "tournament_plot",
            "trec",
            "turn_view",
        ),
        ("case_label_files", "judge_canary"),
    ),
    "monitor.jobs": (
        ("__init__", "assistant_template", "recorders"),
        ("assistant_client", "inputs"),
        # the sequential detectors' run, shared by the case and outcome detection jobs, and
        # the helpers the turn detection job shares with it
        ("signal_detection",),
        # the jobs themselves and their scheduler: siblings, none imports another
        (
            "baseline_tiers",
            "case_detection",
            "cases",
            "detection",
            "drift",
            "failure_modes",
            "feedback_judging",
            "judge_canary",
            "outcome_detection",
            "outcome_join",
            "quality_estimate",
            "retention",
            "review_queue",
            "rubric",
            "scheduler",
        ),
        # built on a job's module: the case-level estimate reuses quality_estimate's
        ("case_estimate",),
        ("build",),
    ),
    "monitor.stream": (
        (
            "__init__",
            "file_state",
            "http",
            "readiness",
            "recorder",
            "signals",
            "watchdog",
            "steps.__init__",
            "steps.base",
        ),
        (
            "run_summary",
            "steps.decisions",
            "steps.rebalance",
            "steps.republishing",
            "steps.ticket_gate",
        ),
        # the steps: siblings, none imports another (what two share lives in steps.base)
        (
            "steps.assemble",
            "steps.commit",
            "steps.decode",
            "steps.export",
            "steps.judge",
            "steps.lookup",
            "steps.outcomes",
            "steps.redact",
            "steps.retain",
            "steps.sample",
            "steps.screen",
            "steps.store",
        ),
        # the keeper of unsampled turns' process, fed by steps.retain
        ("steps.keeper_process",),
        ("turn_steps", "shutdown_budget", "reread"),
        ("pipeline", "drain"),
        ("rebalances",),
        # the daemon's configuration checked, and the chain's decisions built once (pipeline's)
        ("prepare", "daemon"),
        ("runner",),
    ),
    "monitor.demo": (
        (
            "__init__",
            "baselines",
            "examples",
            "failure_modes",
            "regression",
            "summary",
            "severe_turn",
            "prometheus_api",
            "prometheus_config",
            "prometheus_process",
        ),
        ("producer", "prometheus_stack"),
        ("alerts", "options"),
        ("banner",),
        ("run",),
    ),
    "monitor.batch": (
        ("__init__", "judge_all", "rejects", "summary", "verdict_files"),
        ("recorder",),
        ("runner",),
    ),
    "monitor.commands": (
        ("__init__", "usage", "output"),
        ("batch_report", "store_access"),
        ("inspect_failures",),  # inspect's failure-mode commands, over store_access
        ("case_compare", "case_labels", "inspect_case"),
        ("detect", "estimate", "inspect", "labels"),
        (
            "batch",
            "broker",
            "cascade",
            "daemon",
            "db",
            "demo",
            "drift",
            "map_check",
            "outcomes",
            "pairwise",
            "rubric",
        ),
    ),
}


def _index() -> dict[str, tuple[int, str, int]]:
    """module -> (layer, group, sub-layer inside the group's package)."""
    found: dict[str, tuple[int, str, int]] = {}
    for layer, groups in enumerate(LAYERS):
        for group in groups:
            if group not in INSIDE:
                found[group] = (layer, group, 0)
                continue
            for sub, names in enumerate(INSIDE[group]):
                for name in names:
                    module = group if name == "__init__" else f"{group}.{name}"
                    module = module.removesuffix(".__init__")
                    assert module not in found, f"{module} is listed twice"
                    found[module] = (layer, group, sub)
    return found


INDEX = _index()


def place(module: str) -> tuple[int, str, int]:
    assert module in INDEX, f"{module} is in no layer: add it to LAYERS or INSIDE"
    return INDEX[module]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            # `from monitor import scoring` imports the module monitor.scoring.turn
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {n for n in names if n.split(".")[0] in {"monitor", "consumers"}}


def project_module(name: str) -> str:
    """The longest prefix of ``name`` that is a module or package of the project."""
    parts = name.split(".")
    while parts:
        base = ROOT.joinpath(*parts)
        if base.with_suffix(".py").is_file() or (base / "__init__.py").is_file():
            return ".".join(parts)
        parts.pop()
    raise AssertionError(f"{name} is not a project module")


def project_modules() -> list[tuple[str, Path]]:
    found = []
    for package in ("monitor", "consumers"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue  # Alembic loads env.py; it may read the tables it migrates
            found.append((module_name(path), path))
    return found


def violations() -> list[str]:
    found = []
    for here, path in project_modules():
        layer, group, sub = place(here)
        targets = {project_module(t) for t in imported(ast.parse(path.read_text(), str(path)))}
        for module in sorted(targets - {here}):
            target_layer, target_group, target_sub = place(module)
            if target_group == group:
                if target_sub >= sub:
                    found.append(
                        f"{here} (sub-layer {sub} of {group}) imports {module} "
                        f"(sub-layer {target_sub})"
                    )
            elif target_layer >= layer:
                found.append(f"{here} (layer {layer}) imports {module} (layer {target_layer})")
    return found


def test_imports_point_toward_the_core() -> None:
    assert violations() == []


def test_every_module_has_a_layer() -> None:
    for here, _ in project_modules():
        place(here)


def test_every_listed_module_exists() -> None:
    """A module moved or deleted leaves no stale entry behind."""
    present = {here for here, _ in project_modules()}
    assert sorted(set(INDEX) - present) == []
