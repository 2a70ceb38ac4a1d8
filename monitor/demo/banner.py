"""What ``casewatch demo`` prints around its run: the opening lines (where the broker, topic,
metrics, database and alerts are; which judges judge; whether the detectors are armed; the
regression to come) and the closing line that opens a severe turn. The periodic summary is
``monitor.demo.summary``'s."""

from __future__ import annotations

from pathlib import Path

from monitor.config.settings import Settings
from monitor.demo.examples import MALFORMED
from monitor.demo.options import DEMO_PARTITIONS, DEMO_TOPIC
from monitor.demo.regression import RegressionPlan
from monitor.demo.severe_turn import severe_case, severe_turn
from monitor.reports.turn_view import inspect_hint
from monitor.runtime.program import casewatch_program


def describe_judges(settings: Settings) -> str:
    panel = settings.effective_panel()
    names = [*panel.primaries, *([f"arbiter {panel.arbiter}"] if panel.arbiter else [])]
    kinds = {n: settings.judge_config(n.removeprefix("arbiter ")).kind for n in names}
    text = ", ".join(n if n == kinds[n] else f"{n} ({kinds[n]})" for n in names)
    if all(k == "heuristic" for k in kinds.values()):
        text += " (offline and deterministic, not an LLM)"
    return text


def describe_detectors(settings: Settings) -> str:
    pinned = settings.detection.baselines
    if not settings.detection.enabled:
        return "  detectors: off (detection.enabled is false)"
    if not pinned:
        return (
            "  detectors: not armed until each assistant has "
            f"{settings.detection.min_reference_turns} judged turns in its reference window "
            "(pin detection.baselines to arm them at once)"
        )
    rates = ", ".join(f"{a} {r.get('turn_severe', 0.0):.1%}" for a, r in sorted(pinned.items()))
    return (
        f"  detectors: armed at once on baselines pinned from one healthy loop "
        f"(severe turns: {rates})"
    )


def describe_regression(plan: RegressionPlan | None, after: float | None) -> str:
    if after is None:
        return "  regression: none injected (--no-regression)"
    if plan is None:
        return "  regression: none (the examples have no <name>-canary/-stable pair with flaws)"
    return (
        f"  regression: {plan.canary} starts healthy ({plan.swapped} flawed answers swapped "
        f"for {plan.stable}'s) and turns bad after {after:g} s ({plan.flawed} flawed answers)"
    )


def opening(
    settings: Settings,
    *,
    bootstrap: str,
    examples: Path,
    rate: float,
    per_loop: int,
    metrics_url: str,
    db_path: Path,
    alerting: str,
    regression: RegressionPlan | None,
    regression_after_s: float | None,
    summary_interval_s: float,
) -> str:
    """The lines the demo prints once it runs."""
    dlq_topic = f"{DEMO_TOPIC}{settings.kafka.dlq_suffix}"
    return (
        f"casewatch demo: embedded Kafka (Tansu) at {bootstrap}, topic {DEMO_TOPIC} "
        f"({DEMO_PARTITIONS} partitions), dead letters in {dlq_topic}\n"
        f"  replaying {examples} at {rate:g} msgs/s "
        f"(+{len(MALFORMED)} malformed records per loop of {per_loop})\n"
        f"  judges:   {describe_judges(settings)}\n"
        f"  metrics:  {metrics_url}   (also /healthz and /readyz)\n"
        f"  database: {db_path}\n"
        f"{alerting}\n"
        f"{describe_detectors(settings)}\n"
        f"{describe_regression(regression, regression_after_s)}\n"
        f"  Ctrl-C to stop; a summary every {summary_interval_s:g} s"
    )


def closing_hint(db_path: Path, canary: str | None) -> str:
    """The demo's last lines: the commands that open the newest severe turn (of the canary)
    and the newest severe case (of the canary; else that turn's conversation)."""
    turn = severe_turn(db_path, canary)
    conversation = severe_case(db_path, canary, turn)
    program = casewatch_program()
    case = conversation if conversation is not None else "CONVERSATION_ID"
    return (
        f"{inspect_hint(str(db_path), canary, turn, program)}\n"
        f"  {program} inspect case {case} --db {db_path}   # the whole conversation, its "
        "case verdicts"
    )
