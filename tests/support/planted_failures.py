# ruff: noqa: E501  (the planted reasons read as a judge writes them, one a line)
"""Synthetic failed turns with planted failure modes and noise, for the grouping tests and
``bench/failure_modes.py``.

Each planted mode is a recurring cause as a judge words it: failing metrics of its own and,
per metric, several phrasings with slots (an error code, a flag, a product, a version) filled
at random, so no two reasons of a mode are the same string. Queries are drawn from one pool
shared by every mode (a customer asking about the VPN can meet any failure), so the query
never gives the mode away. Noise turns fail random metrics for reasons drawn from generic
phrases that belong to no mode. The truth of each turn is its mode's index, -1 for noise.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from monitor.stats.failure_features import FailedTurn

PRODUCTS = ["VPN client", "mail gateway", "printer driver", "SSO portal", "backup agent",
            "mobile app", "billing page", "Wi-Fi controller", "file sync", "password reset"]  # fmt: skip
QUERIES = [
    "My {p} stops working after the last update, what should I do?",
    "How do I reinstall the {p} on Windows 11?",
    "The {p} shows an error when I log in from home.",
    "Can you help me configure the {p} for a new laptop?",
    "Since this morning the {p} is very slow, any idea?",
    "I cannot find the settings page of the {p}.",
    "Is there a known outage of the {p} today?",
    "The {p} asks for a licence key again, why?",
]


@dataclass(frozen=True)
class PlantedMode:
    name: str
    reasons: dict[str, tuple[str, ...]]  # metric -> phrasings with {slots}


MODES: tuple[PlantedMode, ...] = (
    PlantedMode("invented error codes", {
        "identifier_integrity": (
            "The answer cites error code {code}, which appears in no retrieved context; the code is invented.",
            "Error code {code} quoted in the answer does not exist in the documentation of the {p}.",
            "The answer invents the error code {code}; no passage mentions such a code.",
        ),
        "hallucination": (
            "Claims about error {code} are unsupported by the contexts.",
            "The explanation of error {code} is fabricated, nothing in the evidence supports it.",
        ),
    }),
    PlantedMode("mistyped flags", {
        "identifier_integrity": (
            "The command uses the flag {flag}, a misspelling of the documented flag {flag2}.",
            "Flag {flag} in the suggested command is mistyped; the manual gives {flag2}.",
            "The suggested command line has a typo in its option {flag} (should be {flag2}).",
        ),
        "answer_helpfulness": (
            "Running the command as written fails because of the mistyped option.",
            "The user would get an unknown option error from the command.",
        ),
    }),
    PlantedMode("steps already tried", {
        "resolution_alignment": (
            "The answer repeats steps the customer already tried: {step}.",
            "It suggests to {step} although the history shows the customer already did that.",
            "The proposed fix ({step}) was already attempted by the user earlier in the conversation.",
        ),
        "case_issue_identification": (
            "The answer ignores what the customer reported having tried.",
            "The case history is not taken into account; earlier attempts are ignored.",
        ),
    }),
    PlantedMode("retrieval mismatch", {
        "retrieval_correctness": (
            "The retrieved passages are about the {p2} rather than the {p}; retrieval missed the relevant article.",
            "Retrieved contexts concern the {p2}, not the product in the question.",
            "None of the retrieved documents is about the {p}; they describe the {p2}.",
        ),
        "context_sufficiency": (
            "The contexts do not contain the information needed to answer.",
            "Insufficient context: the passages lack any instructions for this product.",
        ),
    }),
    PlantedMode("ignores stated version", {
        "case_issue_identification": (
            "The customer said they run version {ver} but the answer gives instructions for a different release.",
            "The answer ignores the stated version {ver} and describes menus of another version.",
            "Version {ver} mentioned by the customer is ignored; the steps apply to an older release.",
        ),
        "answer_type_fit": (
            "Instructions do not match the customer's version.",
            "The steps target the wrong release of the software.",
        ),
    }),
    PlantedMode("partial resolution", {
        "resolution_alignment": (
            "Only the first part of the question is answered; the {topic} question is left open.",
            "The answer resolves the login problem but leaves the {topic} issue unaddressed.",
            "Half of the request is handled; nothing is said about the {topic} part.",
        ),
        "answer_helpfulness": (
            "The customer will need to ask again about the {topic}.",
            "The response is incomplete regarding {topic}.",
        ),
    }),
    PlantedMode("policy fabricated", {
        "hallucination": (
            "The refund policy stated in the answer ({days} days) is not supported by any passage; the policy is fabricated.",
            "The answer promises a {days}-day refund window that no document mentions.",
            "A warranty period of {days} days is asserted without evidence in the contexts.",
        ),
        "retrieval_correctness": (
            "No policy document was retrieved for a policy question.",
            "The retrieval returned no passage about refunds or warranty terms.",
        ),
    }),
    PlantedMode("essay instead of steps", {
        "answer_type_fit": (
            "The customer asked for a short list of steps; the answer is a long essay without any steps.",
            "Answer format mismatch: a wall of prose where numbered steps were requested.",
            "Instead of concise steps the reply gives a lengthy narrative explanation.",
        ),
        "answer_helpfulness": (
            "Hard to follow; the actionable part is buried in the text.",
            "The user cannot easily extract what to do from this long reply.",
        ),
    }),
)  # fmt: skip

# Noise: one-off reasons, a random handful of everyday words, recurring as no cause does.
NOISE_WORDS = """account address advice after again agent almost amount answer anyway apology
area attempt average bad basic before better bill brief broken button call calm camera card
case change channel chat check clear click close colour comment common complete contact cost
country courier cover credit customer date day deal delay delivery desk detail device display
document door draft early email empty entry evening extra fair fast fee field file final
fine form free friday friendly full future gift good guest hand happy heavy help hint holiday
home hour idea image inbox item kind label late layout letter light limit line list local
lock long loud main manual market meeting menu message minor mistake money month morning
name near network night note number offer office order owner page paper parcel part pause
phone photo plain plan point polite price print quick quiet rate reply room route rule safe
sale screen second send short sign simple size slow small sound space speed staff start
store style summer support table team text thanks ticket time tone topic total track trial
upload user value voice wait week window winter word work""".split()  # noqa: SIM905
# The modes whose turns are severe when stored (they fail a critical metric: hallucination,
# identifier_integrity or resolution_alignment), for tests and benches that read them from SQL.
SEVERE_WHEN_STORED: tuple[int, ...] = (0, 1, 2, 5, 6)
METRICS = ("hallucination", "retrieval_correctness", "context_sufficiency",
           "answer_helpfulness", "answer_type_fit", "identifier_integrity",
           "case_issue_identification", "resolution_alignment")  # fmt: skip
STEPS = ["restart the router", "clear the browser cache", "reinstall the client",
         "reset the password", "update the driver", "log out and back in"]  # fmt: skip
FLAGS = [("--recusive", "--recursive"), ("--verbsoe", "--verbose"), ("--forse", "--force"),
         ("-configg", "-config"), ("--dry-rn", "--dry-run"), ("--no-cahce", "--no-cache")]  # fmt: skip
TOPICS = ["billing", "invoice", "licence transfer", "data export", "account deletion"]


def _fill(text: str, rng: random.Random, product: str) -> str:
    flag, flag2 = rng.choice(FLAGS)
    return text.format(
        code=f"E-{rng.randint(1000, 9999)}",
        flag=flag,
        flag2=flag2,
        p=product,
        p2=rng.choice([x for x in PRODUCTS if x != product]),
        step=rng.choice(STEPS),
        ver=f"{rng.randint(2, 9)}.{rng.randint(0, 20)}",
        topic=rng.choice(TOPICS),
        days=rng.choice([30, 45, 60, 90, 120]),
    )


def planted_turn(mode: int, rng: random.Random, at: datetime, event_id: str) -> FailedTurn:
    """One failed turn of planted mode ``mode`` (an index of ``MODES``), or noise for -1."""
    product = rng.choice(PRODUCTS)
    query = rng.choice(QUERIES).format(p=product)
    if mode < 0:
        failing = tuple(sorted(rng.sample(METRICS, rng.randint(1, 2))))
        reasons = {m: " ".join(rng.sample(NOISE_WORDS, 9)).capitalize() + "." for m in failing}
    else:
        planted = MODES[mode]
        failing = tuple(sorted(planted.reasons))
        reasons = {m: _fill(rng.choice(p), rng, product) for m, p in planted.reasons.items()}
    return FailedTurn(event_id, at, query, failing, reasons)


def planted_turns(
    n: int,
    k: int,
    *,
    noise: float = 0.1,
    seed: int = 0,
    start: datetime,
    span: timedelta,
    prefix: str = "t",
    modes: Sequence[int] | None = None,
) -> tuple[list[FailedTurn], list[int]]:
    """``n`` failed turns spread evenly over [start, start + span): a share ``noise`` of
    noise, the rest drawn evenly from the first ``k`` planted modes (or from ``modes``, indices
    of ``MODES``); and each turn's truth."""
    if not 1 <= k <= len(MODES):
        raise ValueError(f"k must be 1..{len(MODES)}")
    drawn = list(modes) if modes is not None else list(range(k))
    rng = random.Random(seed)
    turns, truth = [], []
    for i in range(n):
        mode = -1 if rng.random() < noise else drawn[rng.randrange(len(drawn))]
        at = start + span * (i / max(n, 1))
        turns.append(planted_turn(mode, rng, at, f"{prefix}-{seed}-{i}"))
        truth.append(mode)
    return turns, truth
