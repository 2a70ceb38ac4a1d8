"""``JudgingRedaction``: the stream's redaction decision, which the judge canary makes too.

The canary's turns go to the live judges: they must see what the live judges see (the same
placeholders for the same text), and a turn the stream would not judge (too large to redact)
must not reach them either, whatever ``redaction.before_judging`` says.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from monitor.config.judge_canary import JudgeCanaryConfig
from monitor.config.sampling import SamplingConfig
from monitor.errors import ConfigError
from monitor.jobs.inputs import canary_file_turns
from monitor.redaction.config import RedactionConfig
from monitor.sampling.judging_redaction import TOO_LARGE, JudgingRedaction, Unredactable
from monitor.stream.steps.decisions import TurnDecisions
from tests.monitor.stream.steps.helpers import chain_decisions

CANARY = Path(__file__).resolve().parents[3] / "examples" / "judge_canary.jsonl"
EMAIL, PHONE = "jane.roe@example.org", "+1 415 555 0132"


def _canary_file(tmp_path: Path, *, padding: int = 0) -> Path:
    lines = []
    for line in CANARY.read_text().splitlines():
        doc = json.loads(line)
        doc["turn"]["query"] += f" Reach me at {EMAIL} or {PHONE}." + " x" * padding
        lines.append(json.dumps(doc))
    path = tmp_path / "canary.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def _stream(redaction: RedactionConfig) -> TurnDecisions:
    """The daemon's chain decisions with this section."""
    return chain_decisions(SamplingConfig(), redaction)


@pytest.mark.parametrize("before_judging", [True, False])
def test_the_canary_sends_the_judges_what_the_stream_sends_them(
    tmp_path: Path, before_judging: bool
) -> None:
    path = _canary_file(tmp_path)
    stream = _stream(RedactionConfig(before_judging=before_judging, stored_turns=True))
    # The daemon hands the canary its chain's redaction (``Prepared.decisions``).
    canary = canary_file_turns(JudgeCanaryConfig(file=path), stream.redaction)
    originals = canary_file_turns(JudgeCanaryConfig(file=path), None)
    assert len(canary) == len(originals) > 1
    for sent, original in zip(canary, originals, strict=True):
        live = stream.redact(original.event)
        assert not isinstance(live, Unredactable)
        assert sent.event == live.turn
    if before_judging:
        assert all("<EMAIL_" in t.event.query and EMAIL not in t.event.query for t in canary)
    else:
        assert all(EMAIL in t.event.query for t in canary)


def test_a_turn_the_stream_would_not_judge_refuses_the_canary_file(tmp_path: Path) -> None:
    """Judged raw, stored redacted: the stream skips a turn too large to redact (it could not
    be stored), so the canary must not judge one either."""
    path = _canary_file(tmp_path, padding=400)
    redaction = RedactionConfig(before_judging=False, stored_turns=True, max_chars=500)
    [first, *_] = canary_file_turns(JudgeCanaryConfig(file=path), None)
    stream = _stream(redaction)
    live = stream.redact(first.event)
    assert isinstance(live, Unredactable) and live.decision == TOO_LARGE
    with pytest.raises(ConfigError, match="too large to redact"):
        canary_file_turns(JudgeCanaryConfig(file=path), stream.redaction)


def test_it_is_built_one_way_and_pickles() -> None:
    assert JudgingRedaction.from_config(None) is None
    assert JudgingRedaction.from_config(RedactionConfig(enabled=False)) is None
    off = RedactionConfig(before_judging=False, stored_turns=False)
    assert JudgingRedaction.from_config(off) is None  # nothing redacts turns
    built = JudgingRedaction.from_config(RedactionConfig(before_judging=False))
    assert built is not None and built.forward_redacted is False
    copy = pickle.loads(pickle.dumps(built))  # noqa: S301 - our own bytes
    assert copy.forward_redacted is False and copy.redactor.policy == built.redactor.policy
