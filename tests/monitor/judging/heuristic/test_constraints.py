"""Workflow constraints: steps the user ruled out, and steps the evidence forbids."""

from typing import Any

import pytest

from monitor.judging.heuristic.constraints import Step, steps_in, workflow
from monitor.judging.heuristic.evidence import analyse, stem
from monitor.judging.heuristic.judge import score_turn
from monitor.schema.turn import TurnEvent
from monitor.scoring import turn as scoring


def turn(answer: str, **overrides: Any) -> TurnEvent:
    event: dict[str, Any] = {
        "event_id": "e-1",
        "conversation_id": "c-1",
        "turn_index": 0,
        "timestamp": "2026-11-02T08:00:00Z",
        "assistant": {"name": "a", "version": "1", "model": "m"},
        "case": {"subject": "Reports time out at the ingress", "description": "Exports fail."},
        "history": [],
        "query": "What else can we try?",
        "contexts": [
            {
                "id": "kb-1",
                "text": "Raise nginx.ingress.kubernetes.io/proxy-read-timeout on the Ingress. "
                "A rolling restart of the controller "
                "(`kubectl rollout restart deployment/ctrl -n ingress`) forces a sync. "
                "Check the load balancer idle timeout as well.",
            }
        ],
        "answer": answer,
    }
    event.update(overrides)
    return TurnEvent.model_validate(event)


def flow(t: TurnEvent):  # type: ignore[no-untyped-def]
    return workflow(t, analyse(t))


def band(t: TurnEvent, metric: str) -> str:
    return scoring.band(score_turn(t).get(metric).score).value


# ---------------------------------------------------------------- steps


@pytest.mark.parametrize(
    ("text", "family", "objects"),
    [
        ("Turn off automatic tax calculation", "disable", {"automatic", "tax", "calculation"}),
        ("We raised the read timeout to 120", "change", {"read", "timeout"}),
        ("Set the read timeout", "change", {"read", "timeout"}),
        ("Restart the controller so it syncs", "restart", {"controller"}),
        ("purge the pipeline cache", "remove", {"pipeline", "cache"}),
    ],
)
def test_steps_have_a_verb_family_and_the_objects_of_their_clause(
    text: str, family: str, objects: set[str]
) -> None:
    assert Step(family, frozenset(stem(o) for o in objects)) in steps_in(text)


def test_purposes_and_nouns_are_not_steps_of_an_answer() -> None:
    assert steps_in("Set the key to stop the checks", purposes=False) == steps_in("Set the key")
    assert [s.family for s in steps_in("we tried to restart the agent", purposes=True)] == [
        "restart"
    ]


# ---------------------------------------------------------------- steps the user ruled out


def test_a_refused_step_put_back_in_the_answer_is_a_repeat() -> None:
    t = turn(
        "Restart the controller so it picks the change up.",
        case={
            "subject": "504 on exports",
            "description": "Restarting the controller pods is not an option during business hours.",
        },
    )
    f = flow(t)
    assert [p.refused for p in f.past] == [True]
    assert len(f.repeats) == 1 and f.refused == 1
    assert band(t, "resolution_alignment") == "severe"
    assert "refused" in score_turn(t).resolution_alignment.justification


def test_a_key_the_user_already_changed_set_again_is_a_repeat() -> None:
    t = turn(
        "Set the read timeout annotation on the reports Ingress to 120:\n"
        'nginx.ingress.kubernetes.io/proxy-read-timeout: "120"',
        case={
            "subject": "504 on exports",
            "description": "We already raised nginx.ingress.kubernetes.io/proxy-read-timeout "
            "to 120 on the reports Ingress, no change.",
        },
    )
    assert len(flow(t).repeats) == 1


def test_did_that_refers_to_the_previous_assistant_turn() -> None:
    t = turn(
        "Purge the pipeline cache with `foundry cache purge --pipeline web` and re-run.",
        history=[
            {"role": "user", "content": "npm install fails with EINTEGRITY."},
            {"role": "assistant", "content": "Run `foundry cache purge --pipeline web`."},
            {"role": "user", "content": "Purged it exactly like that, same EINTEGRITY."},
        ],
        query="What now?",
    )
    f = flow(t)
    assert [r.step for r in f.repeats] == ["`foundry cache purge --pipeline web`"]
    assert f.refused == 0


@pytest.mark.parametrize(
    "answer",
    [
        # Acknowledged, not repeated.
        "Since you already restarted the controller, check the load balancer idle timeout.",
        # A different step on the same thing.
        "Check the load balancer idle timeout in front of the controller.",
        # Warned against, not prescribed.
        "Don't restart the controller now; check the load balancer first.",
    ],
)
def test_not_a_repeat(answer: str) -> None:
    t = turn(answer, case={"subject": "504", "description": "I restarted the controller twice."})
    assert flow(t).repeats == ()


# ---------------------------------------------------------------- steps the evidence forbids

VOID = (
    "Voiding removes an invoice from the balance. Never void an invoice that has a payment "
    "applied: the ledger no longer balances. Issue a credit note instead."
)
LOCKED = (
    "Quota changes on a tenant in the locked state are not supported. Unlock the tenant first "
    "with `silo tenant unlock --tenant <name>`."
)


@pytest.mark.parametrize(
    ("context", "answer"),
    [
        (VOID, "Open the invoice INV-1 and choose Void."),
        (LOCKED, "Raise the hard quota directly: `silo quota set --tenant legal --hard 30TiB`."),
    ],
)
def test_prescribing_what_the_evidence_forbids_is_severe(context: str, answer: str) -> None:
    t = turn(answer, contexts=[{"id": "kb-9", "text": context}])
    assert len(flow(t).violations) == 1
    s = score_turn(t)
    assert scoring.band(s.resolution_alignment.score).value == "severe"
    assert scoring.band(s.hallucination.score).value == "severe"
    assert "forbids" in s.resolution_alignment.justification


@pytest.mark.parametrize(
    ("context", "answer"),
    [
        # Repeating the rule as a rule.
        (VOID, "Don't void it: issue a credit note for the open amount instead."),
        # Following the rule.
        (VOID, "Issue a credit note for the open amount of INV-1."),
        # A condition in the evidence, not a rule.
        (
            "If the registrar cannot publish the DS record, remove it at the registry first.",
            "Remove the DS record at the registry first.",
        ),
        # The answer speaks to the rule's condition ("nothing ... uses").
        (
            "Never drop a slot that a running consumer still uses.",
            "Nothing uses the slot any more, so drop it with `SELECT drop_slot('old');`",
        ),
    ],
)
def test_not_a_violation(context: str, answer: str) -> None:
    t = turn(answer, contexts=[{"id": "kb-9", "text": context}])
    assert flow(t).violations == ()


@pytest.mark.parametrize(
    ("description", "answer"),
    [
        # A symptom, not a refusal: nobody said the step may not be done.
        ("Cannot assign licenses to new hires, the seat limit is reached.", "Assign the license."),
        # The same verb on another thing.
        ("I flushed the DNS cache on the laptops.", "Clear the router's DNS cache."),
        # Asking for output is not prescribing the step again.
        ("I restarted the controller twice.", "Please share the controller log after a restart."),
    ],
)
def test_not_ruled_out(description: str, answer: str) -> None:
    t = turn(answer, case={"subject": "Problem", "description": description})
    assert flow(t).repeats == ()
