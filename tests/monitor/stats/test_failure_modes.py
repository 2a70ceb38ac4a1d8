"""Grouping failed turns into failure modes: recovery of planted modes, stable ids across runs,
new and growing modes, and the bad inputs (too few turns, one giant mode, several languages,
very long reasons)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from sklearn.metrics import adjusted_rand_score

from monitor.stats.failure_features import FailedTurn, clip, label, reasons_text
from monitor.stats.failure_modes import (
    GROUPED,
    TOO_FEW_TURNS,
    Grouping,
    GroupingParams,
    KnownMode,
    group_failures,
)
from tests.support.planted_failures import METRICS, MODES, planted_turn, planted_turns

START = datetime(2026, 12, 1, tzinfo=UTC)
WEEK = timedelta(days=7)
RECENT = START + timedelta(days=6)
PARAMS = GroupingParams()


def _predicted(grouping: Grouping, turns: list[FailedTurn]) -> list[int]:
    where = {e: i for i, m in enumerate(grouping.modes) for e in m.members}
    return [where.get(t.event_id, -1) for t in turns]


def _known(grouping: Grouping) -> list[KnownMode]:
    return [KnownMode(m.mode_id, m.terms, m.metrics, m.first_seen) for m in grouping.modes]


def test_planted_modes_are_recovered_with_noise_left_unsorted() -> None:
    turns, truth = planted_turns(600, 5, noise=0.15, seed=3, start=START, span=WEEK)
    g = group_failures(turns, METRICS, [], PARAMS, recent_start=RECENT)
    assert g.status == GROUPED
    assert len(g.modes) == 5
    assert adjusted_rand_score(truth, _predicted(g, turns)) >= 0.8
    assert g.unsorted == g.turns - g.grouped
    assert [m.size for m in g.modes] == sorted((m.size for m in g.modes), reverse=True)
    by_name = {MODES[t].name: m for m in g.modes for t in {truth[0]}}
    assert by_name  # the first turn's mode was found
    codes = next(m for m in g.modes if "identifier_integrity" in m.metrics and "code" in m.label)
    assert set(codes.metrics) == {"identifier_integrity", "hallucination"}
    assert abs(sum(m.share for m in g.modes) + g.unsorted / g.turns - 1) < 1e-9
    for m in g.modes:
        assert len(m.examples) == PARAMS.examples
        newest = max((t for t in turns if t.event_id in set(m.members)), key=lambda t: t.at)
        assert m.examples[0] == newest.event_id


def test_too_few_turns_says_so_and_groups_nothing() -> None:
    turns, _ = planted_turns(PARAMS.min_turns - 1, 2, seed=1, start=START, span=WEEK)
    g = group_failures(turns, METRICS, [], PARAMS, recent_start=RECENT)
    assert g.status == TOO_FEW_TURNS
    assert g.modes == ()
    assert g.unsorted == g.turns == PARAMS.min_turns - 1
    assert f"fewer than the {PARAMS.min_turns}" in g.note
    assert group_failures([], METRICS, [], PARAMS, recent_start=RECENT).status == TOO_FEW_TURNS


def test_one_giant_mode_is_one_mode_and_named_in_the_note() -> None:
    turns, _ = planted_turns(300, 1, noise=0.0, seed=4, start=START, span=WEEK)
    g = group_failures(turns, METRICS, [], PARAMS, recent_start=RECENT)
    assert len(g.modes) == 1
    assert g.modes[0].size == 300 and g.modes[0].share == 1.0
    assert "one mode holds 100% of the grouped turns" in g.note


def _lang_turn(i: int, mode: str, rng: random.Random) -> FailedTurn:
    code = f"E-{rng.randint(1000, 9999)}"
    texts = {
        "de": (
            ("identifier_integrity",),
            f"Der Fehlercode {code} kommt in keinem Dokument vor; die Antwort erfindet ihn.",
            "Mein VPN-Client verbindet sich nicht mehr.",
        ),
        "fr": (
            ("resolution_alignment",),
            "La réponse répète des étapes que le client a déjà essayées sans succès "
            f"(redémarrer, réinstaller) ; réf {code}.",
            "Mon imprimante ne fonctionne plus depuis la mise à jour.",
        ),
        "ja": (
            ("retrieval_correctness",),
            f"検索された文書は別の製品についてのもので、質問に関係する記事が見つかっていません。{code}",
            "メールが送信できません。",
        ),
    }
    failing, reason, query = texts[mode]
    return FailedTurn(f"{mode}-{i}", START + WEEK * (i / 200), query, failing, {failing[0]: reason})


def test_modes_in_several_languages_are_told_apart_and_labelled_in_their_words() -> None:
    rng = random.Random(5)
    turns = [_lang_turn(i, rng.choice(["de", "fr", "ja"]), rng) for i in range(200)]
    g = group_failures(turns, METRICS, [], PARAMS, recent_start=RECENT)
    assert len(g.modes) == 3
    for m in g.modes:
        assert len({e.split("-")[0] for e in m.members}) == 1  # one language per mode
    labels = {m.members[0].split("-")[0]: m.label for m in g.modes}
    assert "fehlercode" in labels["de"]
    assert "essayées" in labels["fr"] or "étapes" in labels["fr"]
    assert labels["ja"]  # Japanese has no spaces: a run of letters is its "word"


def test_very_long_reasons_are_cut_and_group_like_short_ones() -> None:
    assert clip("a  b\n c", 100) == "a b c"
    assert clip("x" * 50, 10) == "x" * 10 + "…"
    turns, truth = planted_turns(300, 3, noise=0.0, seed=6, start=START, span=WEEK)
    padding = " ".join(["lorem ipsum dolor sit amet"] * 2_000)  # ~54 kB per reason
    long = [
        FailedTurn(t.event_id, t.at, t.query * 100, t.failing,
                   {m: r + " " + padding for m, r in t.reasons.items()})
        for t in turns
    ]  # fmt: skip
    assert len(reasons_text(long[0], PARAMS.reason_chars)) <= len(long[0].failing) * (
        PARAMS.reason_chars + 2
    )
    g = group_failures(long, METRICS, [], PARAMS, recent_start=RECENT)
    assert len(g.modes) == 3
    assert adjusted_rand_score(truth, _predicted(g, long)) >= 0.8


def test_ids_are_stable_across_runs_and_a_new_mode_gets_a_new_one() -> None:
    turns, _ = planted_turns(400, 3, noise=0.1, seed=7, start=START, span=WEEK)
    first = group_failures(turns, METRICS, [], PARAMS, recent_start=RECENT)
    # The next run: a day later, other turns of the same causes, and a fourth cause.
    later, _ = planted_turns(400, 3, noise=0.1, seed=8, start=START + timedelta(days=1),
                             span=WEEK, prefix="u")  # fmt: skip
    rng = random.Random(9)
    fresh = [
        planted_turn(3, rng, START + timedelta(days=7, hours=i / 4), f"new-{i}") for i in range(40)
    ]
    second = group_failures(later + fresh, METRICS, _known(first), PARAMS,
                            recent_start=RECENT + timedelta(days=1))  # fmt: skip
    old_ids = {m.mode_id for m in first.modes}
    by_member = {m.members[0].split("-")[0]: m for m in second.modes}
    assert {m.mode_id for m in second.modes} >= old_ids
    brand_new = by_member["new"]
    assert brand_new.mode_id not in old_ids
    assert brand_new.new and brand_new.emerging
    kept = [m for m in second.modes if m.mode_id in old_ids]
    first_seen = {m.mode_id: m.first_seen for m in first.modes}
    assert all(m.first_seen == first_seen[m.mode_id] for m in kept)
    assert not any(m.emerging for m in kept)
    # The same input twice gives the same modes (no randomness anywhere).
    again = group_failures(later + fresh, METRICS, _known(first), PARAMS,
                           recent_start=RECENT + timedelta(days=1))  # fmt: skip
    assert again == second


def test_a_mode_growing_faster_than_its_history_is_emerging() -> None:
    rng = random.Random(10)
    turns = []
    for i in range(600):
        at = START + WEEK * (i / 600)
        recent = at >= RECENT
        mode = 0 if rng.random() < (0.5 if recent else 0.05) else 1
        turns.append(planted_turn(mode, rng, at, f"g-{i}"))
    g = group_failures(turns, METRICS, [], PARAMS, recent_start=RECENT)
    codes = next(m for m in g.modes if "hallucination" in m.metrics)
    flags = next(m for m in g.modes if "answer_helpfulness" in m.metrics)
    assert codes.growing and codes.emerging and not codes.new
    assert codes.trend is not None and codes.trend > 0.3
    assert not flags.emerging


def test_a_mode_of_the_first_run_is_new_only_if_it_started_in_the_recent_part() -> None:
    turns, _ = planted_turns(300, 2, noise=0.0, seed=11, start=START, span=WEEK)
    g = group_failures(turns, METRICS, [], PARAMS, recent_start=RECENT)
    assert not any(m.new for m in g.modes)  # both span the whole week


def test_large_windows_are_sampled_and_the_rest_assigned_to_the_nearest_mode() -> None:
    params = GroupingParams(sample_size=300, chunk_size=250)
    turns, truth = planted_turns(1500, 4, noise=0.1, seed=12, start=START, span=WEEK)
    g = group_failures(turns, METRICS, [], params, recent_start=RECENT)
    assert g.turns == 1500 and len(g.modes) == 4
    assert g.grouped > 1200  # most turns outside the sample joined a mode (10 % are noise)
    assert adjusted_rand_score(truth, _predicted(g, turns)) >= 0.8


def test_labels_skip_words_already_in_a_chosen_pair() -> None:
    terms = [("error code", 0.9), ("error", 0.8), ("code", 0.7), ("invented", 0.6), ("no", 0.5)]
    assert label(terms, 3) == "error code, invented"
    noisy = [("kb kb", 0.9), ("has lic", 0.8), ("digit swap", 0.7), ("log", 0.6), ("ändern", 0.5)]
    assert label(noisy, 3) == "digit swap, ändern"
