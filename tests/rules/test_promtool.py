"""``promtool check rules`` and ``promtool test rules`` on rules/ (Debian's prometheus package;
under CI=true a missing promtool fails the test instead of skipping it).

Also checks that the two knobs of ``tune_rules`` produce valid rules that behave as documented:
a lower objective makes a 10 %-severe assistant page, and a capped ``for:`` fires sooner.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from monitor.demo.prometheus_config import tune_rules

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
