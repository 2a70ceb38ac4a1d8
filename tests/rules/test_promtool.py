"""``promtool check rules`` and ``promtool test rules`` on rules/ (Debian's prometheus package;
under CI=true a missing promtool fails the test instead of skipping it).

Also checks that the two knobs of ``tune_rules`` produce valid rules that behave as documented:
a lower objective makes a 10 %-severe assistant page, and a capped ``for:`` fires sooner; and
that the per-metric shares the rules record from what the stream's recorder exports for turns
drawn with known probabilities are Hajek's ratios (``monitor.stats.weighted_rates.hajek``).
"""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path

import yaml
from prometheus_client import CollectorRegistry

from monitor.demo.prometheus_config import tune_rules
from monitor.judging.verdicts import single_judge_verdict
from monitor.metrics.exporter import Metrics
from monitor.runtime.clock import ManualClock
from monitor.sampling.cascade import CELLS, CascadePolicy, DrawLedger
from monitor.schema.turn import (
    METRICS,
    Assistant,
    Band,
    Case,
    JudgeScores,
    Judgment,
    MetricScore,
    TurnEvent,
)
from monitor.scoring.turn import DEFAULT_CRITICAL_METRICS, DEFAULT_PROFILE
from monitor.stats.weighted_rates import hajek
from monitor.stream.recorder import StreamRecorder

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "rules" / "casewatch.rules.yml"
TESTS = sorted((ROOT / "rules" / "tests").glob("*.test.yml"))


def promtool_run(promtool: Path, *args: str | Path, cwd: Path = ROOT) -> str:
    done = subprocess.run(
        [str(promtool), *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=120
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    return output


def test_promtool_check_rules(promtool: Path) -> None:
    out = promtool_run(promtool, "check", "rules", RULES)
    n_rules = sum(len(g["rules"]) for g in yaml.safe_load(RULES.read_text())["groups"])
    assert f"SUCCESS: {n_rules} rules found" in out


def test_promtool_unit_tests_pass(promtool: Path) -> None:
    assert len(TESTS) >= 3
    out = promtool_run(promtool, "test", "rules", *TESTS)
    assert out.count("SUCCESS") == len(TESTS) and "FAILED" not in out


def test_a_promtool_failure_is_reported(promtool: Path, tmp_path: Path) -> None:
    """The harness above would notice a failing unit test (the expected alert never comes)."""
    wrong = tmp_path / "wrong.test.yml"
    wrong.write_text(
        yaml.safe_dump(
            {
                "rule_files": [str(RULES)],
                "tests": [
                    {
                        "interval": "1m",
                        "input_series": [],
                        "alert_rule_test": [
                            {
                                "eval_time": "1h",
                                "alertname": "CasewatchDeadLettersAppearing",
                                "exp_alerts": [{"exp_labels": {"severity": "ticket"}}],
                            }
                        ],
                    }
                ],
            }
        )
    )
    done = subprocess.run(
        [str(promtool), "test", "rules", str(wrong)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0 and "FAILED" in done.stdout + done.stderr


def _slow_assistant_test(rules: Path, eval_time: str, expect_page: bool) -> dict[str, object]:
    """10 % of 10 judged turns a minute are severe."""
    alert = {
        "exp_labels": {"severity": "page", "assistant": "slow"},
        "exp_annotations": {
            "summary": "slow: severe answers at 5x the objective's burn rate",
            "description": (
                "Over the last hour (and the last 5 minutes) the share of slow's judged turns in"
                " the severe band spends the severe-share error budget 5 times faster than the"
                " objective allows (page threshold 3.36: 2 % of a 7-day budget in one hour). A"
                " regression is live in production."
            ),
            "runbook_url": (
                "https://github.com/casewatch/casewatch/blob/main/rules/RUNBOOK.md"
                "#casewatchsevereshareburnratehigh"
            ),
            "dashboard_url": (
                "http://localhost:3000/d/casewatch-turns/casewatch-turns?var-assistant=slow"
                "&var-metric=turn&var-band=severe&from=now-1h&to=now"
            ),
        },
    }
    return {
        "rule_files": [str(rules)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                # Uniform sampling: each judged turn weighs 1, so the weighted counter (the
                # burn rates' numerator and denominator) equals the count.
                "input_series": [
                    {
                        "series": f'{family}{{assistant="slow",band="{band}"}}',
                        "values": f"0+{per_minute}x120",
                    }
                    for family in (
                        "casewatch_turns_judged_total",
                        "casewatch_turns_judged_weight_total",
                    )
                    for band, per_minute in (("severe", 1), ("none", 9))
                ],
                "alert_rule_test": [
                    {
                        "eval_time": eval_time,
                        "alertname": "CasewatchSevereShareBurnRateHigh",
                        "exp_alerts": [alert] if expect_page else [],
                    }
                ],
            }
        ],
    }


def test_the_objective_is_one_knob(promtool: Path, tmp_path: Path) -> None:
    doc = yaml.safe_load(RULES.read_text())
    # Default objective 5 %: 10 % severe burns at 2x, under the page threshold.
    default_test = tmp_path / "default.test.yml"
    default_test.write_text(yaml.safe_dump(_slow_assistant_test(RULES, "1h", False)))
    promtool_run(promtool, "test", "rules", default_test)
    # Objective 2 %: the same traffic burns at 5x and pages.
    strict = tmp_path / "strict.rules.yml"
    strict.write_text(yaml.safe_dump(tune_rules(doc, objective=0.02)))
    promtool_run(promtool, "check", "rules", strict)
    strict_test = tmp_path / "strict.test.yml"
    strict_test.write_text(yaml.safe_dump(_slow_assistant_test(strict, "1h", True)))
    promtool_run(promtool, "test", "rules", strict_test)


def test_capped_for_durations_fire_sooner(promtool: Path, tmp_path: Path) -> None:
    doc = tune_rules(yaml.safe_load(RULES.read_text()), objective=0.02)
    strict = tmp_path / "strict.rules.yml"
    strict.write_text(yaml.safe_dump(doc))
    quick = tmp_path / "quick.rules.yml"
    quick.write_text(yaml.safe_dump(tune_rules(doc, max_for_s=0)))
    promtool_run(promtool, "check", "rules", quick)
    # At 4 minutes (30 judged turns, the volume guard, reached at 3): pending under the
    # production 2 m `for:`, firing with no `for:`.
    for rules, fires in ((strict, False), (quick, True)):
        test = tmp_path / f"{rules.stem}.test.yml"
        test.write_text(yaml.safe_dump(_slow_assistant_test(rules, "4m", fires)))
        promtool_run(promtool, "test", "rules", test)


# One minute of judged turns per assistant: (hallucination's score, every other metric's score,
# the probability the cascade drew the turn with; None: not drawn by the cascade, as a rule's
# turn or a uniform draw, weight 1).
MINUTE: tuple[tuple[float, float, float | None], ...] = (
    *((0.2, 0.9, 0.5),) * 3,  # hallucination severe
    *((0.5, 0.9, 0.25),) * 2,  # moderate
    *((0.95, 0.2, 0.04),) * 5,  # none; the other metrics severe
    (0.2, 0.95, None),  # a rule's turn: severe, weight 1
)
MINUTES = 90


def _verdict(event_id: str, assistant: str, hallucination: float, other: float) -> object:
    turn = TurnEvent(
        event_id=event_id,
        conversation_id=event_id,
        turn_index=0,
        timestamp=datetime(2026, 1, 1, tzinfo=UTC),
        assistant=Assistant(name=assistant, version="1", model="m"),
        case=Case(subject="s", description="d"),
        query="q",
        answer="a",
    )
    scores = {m: MetricScore(score=other, justification="j") for m in METRICS}
    scores["hallucination"] = MetricScore(score=hallucination, justification="j")
    judgment = Judgment.model_validate(
        {
            "judge": "j",
            "kind": "openai",
            "model": "m",
            "status": "ok",
            "scores": JudgeScores(**scores),
        }
    )
    return single_judge_verdict(
        turn,
        judgment,
        weights=DEFAULT_PROFILE,
        weight_profile="default",
        critical=DEFAULT_CRITICAL_METRICS,
    )


def test_the_per_metric_shares_are_hajek_ratios_of_the_recorded_weights(
    promtool: Path, tmp_path: Path
) -> None:
    """Turns drawn by the cascade with known probabilities go through the stream's recorder (the
    draw ledger the sample step fills, forgotten as the store step does), minute by minute; the
    recorded counters, scraped each minute, feed the recording rules, whose per-metric shares
    must be Hajek's ratio of those turns: the traffic's, not the judged turns' (which would say
    hallucination is 4 in 11 severe). An assistant judged without the cascade gets the plain
    share, the unweighted counter's."""
    registry = CollectorRegistry()
    ledger = DrawLedger(CascadePolicy(CELLS, 100.0, ManualClock()))
    recorder = StreamRecorder(Metrics(registry), draws=ledger)
    series = [
        (family, assistant, metric, band.value)
        for family in ("casewatch_metric_band_total", "casewatch_metric_band_weight_total")
        for assistant in ("cascaded", "uniform")
        for metric in METRICS
        for band in Band
    ]
    values: dict[tuple[str, str, str, str], list[float]] = {s: [] for s in series}
    n = 0
    for minute in range(MINUTES + 1):
        if minute:
            for assistant in ("cascaded", "uniform"):
                for hallucination, other, pi in MINUTE:
                    n += 1
                    event_id = f"e{n}"
                    if assistant == "cascaded" and pi is not None:
                        ledger.drawn(event_id, pi, "none")
                    recorder.record_verdict(_verdict(event_id, assistant, hallucination, other))  # type: ignore[arg-type]
                    ledger.stored(event_id, hallucination <= 0.3)
        for family, assistant, metric, band in series:
            value = registry.get_sample_value(
                family, {"assistant": assistant, "metric": metric, "band": band}
            )
            values[(family, assistant, metric, band)].append(value or 0.0)

    # The weighted counter: 1/pi per judged turn, each minute.
    def weight(band: str, metric: str = "hallucination") -> float:
        return values[("casewatch_metric_band_weight_total", "cascaded", metric, band)][-1]

    assert weight("severe") == MINUTES * (3 * 2 + 1)
    assert weight("moderate") == MINUTES * (2 * 4)
    assert weight("none") == MINUTES * (5 * 25)
    assert weight("severe", "retrieval_correctness") == MINUTES * (5 * 25)

    def expected(assistant: str, metric: str, bands: frozenset[str]) -> float:
        band_of = {0.2: "severe", 0.5: "moderate", 0.9: "minor", 0.95: "none"}
        turns = [(h if metric == "hallucination" else o, pi) for h, o, pi in MINUTE]
        rate = hajek(
            [band_of[score] in bands for score, _ in turns],
            [pi if assistant == "cascaded" else None for _, pi in turns],
        )
        assert rate.point is not None
        return rate.point

    severe, bad = frozenset({"severe"}), frozenset({"severe", "moderate"})
    checks = []
    for rule, bands, at in (
        ("assistant_metric:casewatch_metric_severe:ratio_rate1h", severe, "80m"),
        ("assistant_metric:casewatch_metric_severe:ratio_rate6h", severe, "80m"),
        ("assistant_metric:casewatch_metric_severe_or_moderate:ratio_rate1h", bad, "80m"),
    ):
        for assistant in ("cascaded", "uniform"):
            for metric in ("hallucination", "retrieval_correctness"):
                want = expected(assistant, metric, bands)
                selector = f'{rule}{{assistant="{assistant}",metric="{metric}"}}'
                checks.append(
                    {
                        "expr": f"abs({selector} - {want!r}) < bool 1e-9",
                        "eval_time": at,
                        "exp_samples": [
                            {"labels": f'{{assistant="{assistant}",metric="{metric}"}}', "value": 1}
                        ],
                    }
                )
    # Not the plain share: the cascade's weights move hallucination from 4/11 to 7/140.
    assert expected("cascaded", "hallucination", severe) == 7 / 140
    assert expected("uniform", "hallucination", severe) == 4 / 11
    test = tmp_path / "weighted.test.yml"
    test.write_text(
        yaml.safe_dump(
            {
                "rule_files": [str(RULES)],
                "evaluation_interval": "1m",
                "tests": [
                    {
                        "interval": "1m",
                        "input_series": [
                            {
                                "series": (
                                    f'{family}{{assistant="{assistant}",metric="{metric}",'
                                    f'band="{band}"}}'
                                ),
                                "values": " ".join(repr(v) for v in vals),
                            }
                            for (family, assistant, metric, band), vals in values.items()
                        ],
                        "promql_expr_test": checks,
                    }
                ],
            }
        )
    )
    promtool_run(promtool, "test", "rules", test)
