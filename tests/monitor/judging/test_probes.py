"""The probe set format: strict loading, and the example set in examples/."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from monitor.errors import ConfigError
from monitor.judging.probes import TIERS, load_probes, normalise_query, parse_probes

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
ROOT = EXAMPLES.parent


def probe(**overrides: object) -> str:
    doc: dict[str, object] = {
        "id": "p1",
        "case": {"subject": "s", "description": "d"},
        "query": "q?",
        "baselines": {"high": "h", "medium": "m", "low": "l"},
    }
    doc.update(overrides)
    return json.dumps(doc)


def test_example_probe_set_is_complete_and_reproducible(tmp_path: Path) -> None:
    probes = load_probes(EXAMPLES / "probes.jsonl")
    assert len(probes) >= 20
    for p in probes:
        answers = [p.baselines.answer(t) for t in TIERS]
        assert len(set(answers)) == 3, f"{p.id}: tiers must differ"
        assert p.contexts and p.reference
    out = tmp_path / "probes.jsonl"
    subprocess.run(
        [sys.executable, str(EXAMPLES / "probes.py"), "--out", str(out)], check=True, cwd=ROOT
    )
    assert out.read_text() == (EXAMPLES / "probes.jsonl").read_text()


def test_a_probe_gives_the_judge_its_question_and_baselines() -> None:
    (p,) = parse_probes([probe(reference="r")])
    assert p.question().reference == "r" and p.question().query == "q?"
    assert p.baseline("medium").text == "m"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", r"x\.jsonl:1: not JSON"),
        (probe(baselines={"high": "h", "medium": "m"}), r"x\.jsonl:1: baselines\.low"),
        (probe(baselines={"high": "", "medium": "m", "low": "l"}), r"baselines\.high"),
        (probe(extra=1), r"x\.jsonl:1: extra"),
        (probe(query=""), r"query"),
    ],
)
def test_bad_probes_are_refused_with_the_line(line: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_probes([line], "x.jsonl")


def test_repeated_ids_and_empty_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"x\.jsonl:3: probe id 'p1' already used on line 1"):
        parse_probes([probe(), "", probe()], "x.jsonl")
    with pytest.raises(ConfigError, match="no probes"):
        parse_probes(["", "  "], "x.jsonl")
    with pytest.raises(ConfigError, match="cannot read"):
        load_probes(tmp_path / "missing.jsonl")


def test_queries_match_regardless_of_case_and_spacing() -> None:
    assert normalise_query("  What  NEXT?\n") == normalise_query("what next?")
