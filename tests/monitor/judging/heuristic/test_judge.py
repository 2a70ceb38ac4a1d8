import hashlib
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.judging.heuristic.judge import ALGORITHM_VERSION, HeuristicJudge, score_turn
from monitor.judging.judge import Judge
from monitor.schema.turn import MAX_JUSTIFICATION_CHARS, METRICS, JudgeScores, TurnEvent
from monitor.scoring import turn as scoring

KB_OVERVIEW = (
    "KB-1042: E4021 on Acme BackupPro 4.12.0. Symptom: full backups abort with E4021 "
    '"catalog lock held" while incremental jobs succeed. Cause: a stale catalog lock left '
    "behind when a job was killed during the upgrade. The 4.12.0 agent no longer removes a "
    "stale catalog lock at start-up. The issue is fixed in 4.12.2."
)
KB_STEPS = (
    "KB-1042 resolution. Restart the backup agent first: `systemctl restart backuppro-agent`. "
    "If E4021 persists, check whether a stale catalog lock exists: "
    "`ls -l /var/lib/backuppro/catalog.lock`. Next, release the stale lock while no job is "
    "running: `backupctl catalog unlock --force`. Logs are written to "
    "/var/log/backuppro/media-server.log."
)
KB_UNRELATED = (
    "KB-4101 resolution. Show the client's limits: `acme-admin api limits show --client etl`. "
    "Request a higher limit with `acme-admin api limits request --client etl --rpm 600`."
)
KB_UNRELATED_2 = (
    "KB-3017: NET-1045 on Acme EdgeRouter 3.4.1. Raise the BGP hold time with "
    "`edgectl bgp set neighbor 198.51.100.1 hold-time 90` and commit the configuration."
)
CLEAN = (
    "E4021 on Acme BackupPro 4.12.0 is caused by a stale catalog lock left behind when a job "
    "was killed during the upgrade. Since you already tried restarting the backup agent, go "
    "straight to the recovery steps from KB-1042:\n"
    "1. Check whether a stale catalog lock exists: `ls -l /var/lib/backuppro/catalog.lock`\n"
    "2. Release the stale lock while no job is running: `backupctl catalog unlock --force`\n"
    "If anything fails, the details are in /var/log/backuppro/media-server.log."
)


def turn(**overrides: Any) -> TurnEvent:
    event: dict[str, Any] = {
        "event_id": "e-1",
        "conversation_id": "c-1",
        "turn_index": 0,
        "timestamp": "2026-11-02T08:00:00Z",
        "assistant": {"name": "acme-support", "version": "2026.10", "model": "m"},
        "case": {
            "subject": "Nightly full backup fails with E4021 after upgrade to 4.12.0",
            "description": "Since the upgrade to BackupPro 4.12.0 the nightly full backup "
            'aborts with E4021 "catalog lock held". Incremental jobs still complete.',
        },
        "history": [],
        "query": "We're getting E4021 on Acme BackupPro 4.12.0. I already tried restarting the "
        "backup agent (`systemctl restart backuppro-agent`). How do I fix it?",
        "contexts": [
            {"id": "kb-1042#1", "text": KB_OVERVIEW},
            {"id": "kb-1042#2", "text": KB_STEPS},
            {"id": "kb-4101#2", "text": KB_UNRELATED},
        ],
        "answer": CLEAN,
    }
    event.update(overrides)
    return TurnEvent.model_validate(event)


def scores(**overrides: Any) -> JudgeScores:
    judgment = HeuristicJudge().judge(turn(**overrides))
    assert judgment.ok and judgment.scores is not None
    return judgment.scores


def band(s: JudgeScores, metric: str) -> str:
    return scoring.band(s.get(metric).score).value


# ---------------------------------------------------------------- the judgment itself


def test_it_is_a_judge_and_labels_itself_heuristic() -> None:
    judge = HeuristicJudge(name="offline", role="arbiter")
    assert isinstance(judge, Judge)
    assert judge.name == "offline"
    j = judge.judge(turn())
    assert (j.judge, j.kind, j.model, j.role, j.status) == (
        "offline",
        "heuristic",
        "heuristic-v2",
        "arbiter",
        "ok",
    )
    assert j.prompt_version == ALGORITHM_VERSION
    assert j.prompt_hash == hashlib.sha256(b"heuristic-v2").hexdigest()
    assert (j.attempts, j.input_tokens, j.output_tokens, j.cost_usd) == (1, 0, 0, 0.0)
    assert j.latency_seconds >= 0
    assert j.scores is not None and j.raw_output is not None
    assert JudgeScores.model_validate(json.loads(j.raw_output)) == j.scores
    judge.close()


def test_deterministic() -> None:
    first, second = HeuristicJudge().judge(turn()), HeuristicJudge().judge(turn())
    assert first.raw_output == second.raw_output


def test_same_results_from_many_threads() -> None:
    answers = [CLEAN, CLEAN.replace("E4021", "E4012"), "I don't know.", KB_UNRELATED]
    turns = [turn(answer=a, event_id=f"e-{i}") for i, a in enumerate(answers * 10)]
    judge = HeuristicJudge()
    sequential = [judge.judge(t).raw_output for t in turns]
    with ThreadPoolExecutor(max_workers=8) as pool:
        parallel = [j.raw_output for j in pool.map(judge.judge, turns)]
    assert parallel == sequential


def test_justifications_say_heuristic_and_name_the_evidence() -> None:
    s = scores()
    for metric in METRICS:
        text = s.get(metric).justification
        assert text.startswith("heuristic:")
        assert len(text) <= MAX_JUSTIFICATION_CHARS
    assert "kb-1042#" in s.retrieval_correctness.justification
    assert "E4021" in s.case_issue_identification.justification
    assert "E4021" in s.identifier_integrity.justification


# ---------------------------------------------------------------- the injected flaws


def test_a_clean_grounded_answer_scores_high_everywhere() -> None:
    s = scores()
    assert {m: band(s, m) for m in METRICS} == dict.fromkeys(METRICS, "none")
    assert scoring.turn_band(s.score_map(), scoring.DEFAULT_PROFILE).value == "none"


@pytest.mark.parametrize(
    ("old", "new", "evidence"),
    [
        ("E4021", "E4012", "answer has E4012, evidence has E4021 (digit swap)"),
        ("unlock --force", "unlock --forced", "flag differs: --forced vs --force"),
        ("/var/log/backuppro", "/var/logs/backuppro", "evidence has /var/log/backuppro"),
        ("BackupPro 4.12.0", "BackupPro 4.12.3", "(version contradiction)"),
    ],
)
def test_a_corrupted_identifier_is_severe(old: str, new: str, evidence: str) -> None:
    s = scores(answer=CLEAN.replace(old, new, 1))
    assert band(s, "identifier_integrity") == "severe"
    assert evidence in s.identifier_integrity.justification
    assert s.hallucination.score > 0.6  # a typo of a real step, not an invented one
    turn_band = scoring.turn_band(s.score_map(), scoring.DEFAULT_PROFILE)
    assert turn_band.value == "severe"


def test_a_hallucinated_step_is_at_least_moderate() -> None:
    invented = "3. Purge the job cache first with `backupctl cache purge --all --no-verify`."
    s = scores(answer=CLEAN.replace("\nIf anything", f"\n{invented}\nIf anything"))
    assert band(s, "hallucination") in ("moderate", "severe")
    assert "backupctl cache purge --all --no-verify" in s.hallucination.justification
    assert band(s, "identifier_integrity") == "none"  # invented, not corrupted


def test_an_answer_made_of_invented_steps_is_severe() -> None:
    answer = (
        "E4021 is usually caused by a corrupted local cache on the media server.\n"
        "1. Run `backupctl maintenance --rebuild-index --force` to rebuild the job index.\n"
        "2. Add `skip_catalog_check=true` to /etc/backupctl/agent.conf."
    )
    s = scores(answer=answer)
    assert band(s, "hallucination") == "severe"
    assert s.answer_helpfulness.score <= 0.6


def test_repeating_a_step_the_user_already_tried_is_penalised() -> None:
    answer = "First, restart the backup agent: `systemctl restart backuppro-agent`.\n" + CLEAN
    s = scores(answer=answer)
    assert s.resolution_alignment.score <= 0.6
    assert "systemctl restart backuppro-agent" in s.resolution_alignment.justification
    assert "I already tried restarting" in s.resolution_alignment.justification


def test_a_repeat_is_found_from_the_words_when_no_command_was_given() -> None:
    history = [
        {"role": "user", "content": "Pushes stopped. I reinstalled the Acme Authenticator app."},
        {"role": "assistant", "content": "Which phone model is it?"},
    ]
    s = scores(
        history=history,
        turn_index=1,
        query="An iPhone 15. What else can I do?",
        answer="Reinstall the Acme Authenticator app from the store and sign in again.",
    )
    assert s.resolution_alignment.score <= 0.6


def test_repeating_steps_the_user_ran_as_suggested_is_penalised() -> None:
    history = [
        {"role": "user", "content": "How do I fix E4021?"},
        {"role": "assistant", "content": CLEAN},
    ]
    s = scores(
        history=history,
        turn_index=1,
        query="I ran those as suggested but it still fails with E4021. What next?",
        answer="Run `backupctl catalog unlock --force` and retry the job.",
    )
    assert s.resolution_alignment.score <= 0.6


def test_acknowledging_a_tried_step_is_not_a_repeat() -> None:
    s = scores()  # CLEAN says "Since you already tried restarting the backup agent"
    assert s.resolution_alignment.score >= 0.86


def test_insufficient_information_is_fine_when_the_contexts_are_thin() -> None:
    answer = (
        "The articles I retrieved are about other products, not E4021, so I don't have enough "
        "information to give you a safe next step. Could you share the full error message?"
    )
    thin = [{"id": "kb-4101#2", "text": KB_UNRELATED}, {"id": "kb-3017#1", "text": KB_UNRELATED_2}]
    s = scores(answer=answer, contexts=thin)
    assert band(s, "retrieval_correctness") == "severe"
    assert band(s, "context_sufficiency") == "severe"
    assert s.answer_helpfulness.score >= 0.61
    assert band(s, "hallucination") == "none"
    assert band(s, "resolution_alignment") == "none"
    # ... and weak when the contexts held the answer.
    s = scores(answer=answer)
    assert s.answer_helpfulness.score <= 0.6
    assert s.answer_type_fit.score <= 0.6


def test_no_contexts_at_all() -> None:
    s = scores(contexts=[])
    assert s.retrieval_correctness.score <= 0.3 and s.context_sufficiency.score <= 0.3


def test_overview_without_steps_is_not_sufficient_for_a_how_to_query() -> None:
    s = scores(contexts=[{"id": "kb-1042#1", "text": KB_OVERVIEW}])
    assert band(s, "context_sufficiency") == "moderate"
    assert "no relevant context gives steps" in s.context_sufficiency.justification


def test_an_off_topic_answer_misses_the_case() -> None:
    answer = (
        "To resolve this, show the client's limits: `acme-admin api limits show --client etl`, "
        "then request a higher limit: `acme-admin api limits request --client etl --rpm 600`."
    )
    s = scores(answer=answer)
    assert band(s, "case_issue_identification") == "severe"
    assert s.answer_helpfulness.score <= 0.3
    assert band(s, "hallucination") == "none"  # grounded, in the wrong article


def test_citing_another_error_code_is_misidentification() -> None:
    s = scores(answer=CLEAN.replace("E4021", "E7102"))
    assert s.case_issue_identification.score <= 0.6
    assert "E7102" in s.case_issue_identification.justification


@pytest.mark.parametrize(
    ("query", "answer", "good"),
    [
        (
            "Why did this only start after the 4.12.0 upgrade?",
            "E4021 started after the upgrade because the 4.12.0 agent no longer removes a "
            "stale catalog lock at start-up.",
            True,
        ),
        (
            "Why did this only start after the 4.12.0 upgrade?",
            "Run `backupctl catalog unlock --force`.",
            False,
        ),
        (
            "Hmm, it's doing something different now.",
            "Can you tell me what you see now? Please share the last lines of "
            "/var/log/backuppro/media-server.log.",
            True,
        ),
    ],
)
def test_answer_type_fit_follows_the_query_intent(query: str, answer: str, good: bool) -> None:
    s = scores(query=query, answer=answer)
    assert (s.answer_type_fit.score >= 0.86) is good


def test_a_vague_answer_is_not_helpful() -> None:
    s = scores(answer="Backup problems can have many causes in complex environments.")
    assert s.answer_helpfulness.score <= 0.6


# ---------------------------------------------------------------- any input


some_text = st.lists(
    st.one_of(
        st.text(max_size=30),
        st.sampled_from(
            [
                "E4021",
                "E4012",
                "v4.12.0",
                "4.12.3",
                "`backupctl catalog unlock --force`",
                "`backupctl catalog unlock --forced`",
                "/var/log/backuppro/media-server.log",
                "I already tried restarting the backup agent.",
                "Why?",
                "I don't have enough information.",
                "\n1. ",
                "\n- ",
                "```\nls -l\n```",
                "KB-1042",
            ]
        ),
    ),
    max_size=10,
).map(" ".join)


@settings(max_examples=60, deadline=None)
@given(answer=some_text, query=some_text, context=some_text)
def test_scores_are_bounded_for_any_text(answer: str, query: str, context: str) -> None:
    contexts = [{"id": "c#1", "text": context}] if context else []
    j = HeuristicJudge().judge(turn(answer=answer, query=query, contexts=contexts))
    assert j.ok and j.scores is not None
    for metric in METRICS:
        m = j.scores.get(metric)
        assert 0.0 <= m.score <= 1.0
        assert m.justification.startswith("heuristic:")


def test_score_turn_is_the_pure_core() -> None:
    assert score_turn(turn()) == scores()


# ---------------------------------------------------------------- identifiers of every kind

KB_TIMEOUT = (
    "To end sessions idle inside a transaction, set idle_in_transaction_session_timeout with "
    "`msql params set --cluster <name> idle_in_transaction_session_timeout=5min`. The API "
    "endpoint is https://api.msql.example/v2/projects/{project}/params and the server listens "
    "on port 5432."
)
TIMEOUT_ANSWER = (
    "Set the timeout on the parameter group: "
    "`msql params set --cluster mer-stg-2 idle_in_transaction_session_timeout=5min`. "
    "Sessions idle in a transaction for five minutes are then ended."
)


def timeout_scores(answer: str) -> JudgeScores:
    return scores(
        case={
            "subject": "Sessions stuck idle in transaction",
            "description": "Reporting jobs leave sessions idle in transaction on mer-stg-2.",
        },
        query="Which setting ends sessions idle in a transaction?",
        contexts=[{"id": "kb-7", "text": KB_TIMEOUT}],
        answer=answer,
    )


def test_a_command_filling_the_evidence_placeholders_is_supported() -> None:
    s = timeout_scores(TIMEOUT_ANSWER)
    assert band(s, "identifier_integrity") == "none"
    assert band(s, "hallucination") == "none"


@pytest.mark.parametrize(
    ("old", "new", "kind_evidence"),
    [
        ("session_timeout=", "session_timout=", "idle_in_transaction_session_timeout"),
        ("mer-stg-2 idle", "mer-stg-20 idle", "mer-stg-2"),
        (
            "Sessions idle",
            "Or call https://api.msql.example/v2/params/{project}/projects. Sessions idle",
            "path segments transposed",
        ),
        ("Sessions idle", "The server listens on port 5423. Sessions idle", "digit swap"),
    ],
)
def test_near_misses_of_keys_names_urls_and_ports_are_severe(
    old: str, new: str, kind_evidence: str
) -> None:
    s = timeout_scores(TIMEOUT_ANSWER.replace(old, new, 1))
    assert band(s, "identifier_integrity") == "severe"
    assert kind_evidence in s.identifier_integrity.justification
    assert s.hallucination.score > 0.6  # a corrupted copy, not an invention


def test_invented_identifiers_count_against_hallucination() -> None:
    invented = (
        " Also clear the cache with `msql cache flush --all` and set "
        "`STRICT_SESSION_REAPER=1` in /etc/msql/agent.env."
    )
    s = timeout_scores(TIMEOUT_ANSWER + invented)
    assert band(s, "hallucination") == "severe"
    assert band(s, "identifier_integrity") == "none"
    assert "msql cache flush --all" in s.hallucination.justification
