"""What the tests of the CLI's judging commands (judge, pairwise, rubric) share: their inputs,
a fake-judge configuration for the rubric grader, and a child's SIGINT as a terminal gives it."""

from __future__ import annotations

import json
import math
import signal
from pathlib import Path

from tests.fake_judge_server import FakeJudgeServer
from tests.fixtures.judge_server import FAKE_JUDGE_KEY, FAKE_JUDGE_MODEL

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# Pairwise log-probabilities of a judge that calls every pair a tie.
TIE = {"Tie": math.log(0.9), "A": math.log(0.05), "B": math.log(0.05)}

RUBRICS = """\
- id: lock
  query: Backup fails with E4021
  reviewed: true
  questions:
    - What causes E4021?
    - Which command releases the lock?
- id: vpn
  query: VPN drops
  questions:
    - Which MTU is recommended?
"""
KEYWORDS = {
    "What causes E4021?": "stale catalog lock",
    "Which command releases the lock?": "unlock --force",
    "Which MTU is recommended?": "MTU 1400",
}


def sigint_as_from_a_terminal() -> None:
    """In the child before exec: SIGINT unblocked and at its default action, as a command
    started from a terminal has it. A child inherits an ignored or blocked SIGINT from
    whatever started the suite (a CI runner, a background job), and would then never see
    the interrupt a test sends; Python turns the default action into KeyboardInterrupt."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def system_file(tmp_path: Path, name: str, quality: int, turns: int = 3) -> Path:
    """``turns`` stable turns answered by assistant ``name`` with a quality marker."""
    rows = []
    for line in (EXAMPLES / "turns-stable.jsonl").read_text().splitlines()[:turns]:
        doc = json.loads(line)
        doc["assistant"]["name"] = name
        doc["answer"] = f"[quality {quality}] {doc['answer']}"
        rows.append(json.dumps(doc))
    path = tmp_path / f"{name}.jsonl"
    path.write_text("\n".join(rows) + "\n")
    return path


def rubric_config(tmp_path: Path, server: FakeJudgeServer) -> Path:
    """A configuration whose rubric grader is the fake judge server."""
    path = tmp_path / "casewatch.yaml"
    key = tmp_path / "judge-key"  # keys come from files or the environment, never the config
    key.write_text(FAKE_JUDGE_KEY)
    path.write_text(
        "judges:\n"
        "  grader:\n"
        "    kind: openai\n"
        f"    base_url: {server.base_url}\n"
        f"    model: {FAKE_JUDGE_MODEL}\n"
        f"    api_key_file: {key}\n"
        "    transport_retries: 0\n"
        "rubric:\n"
        "  judge: grader\n"
    )
    return path
