"""The stream's recorder: intake, sampling, dead letters, storage, commits and lag series,
read back from a fresh registry."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from consumers.patch_fallbacks import fallback_states
from monitor.metrics.exporter import OTHER, Metrics
from monitor.stream.recorder import StreamRecorder


class _Decision:
    def __init__(self, sampled: bool, reason: str) -> None:
        self.sampled = sampled
        self.reason = reason


def test_sampling_consumed_dead_letter_stored_commit(registry: CollectorRegistry) -> None:
    metrics = StreamRecorder(Metrics(registry))
    metrics.record_consumed("turns", 3)
    metrics.record_sampling("helpdesk", _Decision(True, "rate"))
    metrics.record_sampling("helpdesk", _Decision(False, "budget"))
    metrics.record_dead_letter("invalid_json")
    metrics.record_stored(inserted=2, duplicate=1)
    metrics.record_commit(["turns"])
    get = registry.get_sample_value
    assert get("casewatch_turns_consumed_total", {"topic": "turns"}) == 3
    assert get("casewatch_turns_sampled_total", {"assistant": "helpdesk", "reason": "rate"}) == 1
    assert get("casewatch_turns_skipped_total", {"assistant": "helpdesk", "reason": "budget"}) == 1
    assert get("casewatch_dead_letter_total", {"reason": "invalid_json"}) == 1
    assert get("casewatch_stored_total", {"outcome": "inserted"}) == 2
    assert get("casewatch_stored_total", {"outcome": "duplicate"}) == 1
    assert get("casewatch_offsets_committed_total", {"topic": "turns"}) == 1


def test_lag_series_are_replaced(registry: CollectorRegistry) -> None:
    metrics = StreamRecorder(Metrics(registry))
    metrics.set_lag({("turns", 0): 5, ("turns", 1): 7}.items())
    metrics.set_lag({("turns", 1): 2}.items())
    get = registry.get_sample_value
    assert get("casewatch_consumer_lag", {"topic": "turns", "partition": "0"}) is None
    assert get("casewatch_consumer_lag", {"topic": "turns", "partition": "1"}) == 2


def test_assistant_label_cardinality_is_capped(registry: CollectorRegistry) -> None:
    metrics = StreamRecorder(Metrics(registry, max_assistants=2))
    for name in ["a", "b", "c", "d", "a"]:
        metrics.record_sampling(name, _Decision(True, "rate"))
    get = registry.get_sample_value
    assert get("casewatch_turns_sampled_total", {"assistant": "a", "reason": "rate"}) == 2
    assert get("casewatch_turns_sampled_total", {"assistant": OTHER, "reason": "rate"}) == 2
    assert get("casewatch_turns_sampled_total", {"assistant": "c", "reason": "rate"}) is None


def test_prime_exports_zero_series_for_known_labels(registry: CollectorRegistry) -> None:
    metrics = StreamRecorder(Metrics(registry))
    get = registry.get_sample_value
    assert get("casewatch_stored_total", {"outcome": "duplicate"}) == 0
    assert get("casewatch_turns_consumed_total", {"topic": "turns"}) is None
    metrics.prime(topics=["turns"], dead_letter_reasons=["schema"])
    assert get("casewatch_turns_consumed_total", {"topic": "turns"}) == 0
    assert get("casewatch_offsets_committed_total", {"topic": "turns"}) == 0
    assert get("casewatch_dead_letter_total", {"reason": "schema"}) == 0


def test_kafka_patch_fallbacks_are_one_per_patch_that_fell_back(
    registry: CollectorRegistry,
) -> None:
    metrics = StreamRecorder(Metrics(registry))
    states = fallback_states(
        ("read_raw_records", "refetch_left_out"),
        ["refetch_left_out", "close_failed_connects", "CASEWATCH_KAFKA_OPTIMISATIONS=fast-please"],
    )
    metrics.set_kafka_patch_fallbacks(states)
    got = {
        s.labels["patch"]: s.value
        for family in registry.collect()
        if family.name == "casewatch_kafka_patch_fallback"
        for s in family.samples
    }
    # The user's text never becomes a label value: a bad switch value is one bounded label.
    assert got == {
        "read_raw_records": 0.0,
        "refetch_left_out": 1.0,
        "close_failed_connects": 1.0,
        "optimisations_switch": 1.0,
    }


class _Ledger:
    """The cascade's draws as ``record_verdict`` reads them (``DrawLedger.of``)."""

    def __init__(self, draws: dict[str, tuple[float, str]]) -> None:
        self._draws = draws

    def of(self, event_id: str) -> tuple[float, str] | None:
        return self._draws.get(event_id)


def test_a_verdict_weighs_one_over_the_probability_its_draw_stored(
    registry: CollectorRegistry,
) -> None:
    """Drawn at 0.25: weight 4; a turn the ledger does not hold (drawn uniformly, or evicted:
    its row stores no probability either) weighs 1, as without the cascade."""
    from datetime import UTC, datetime

    from monitor.judging.verdicts import failed_verdict
    from monitor.schema.turn import Assistant, Case, Judgment, TurnEvent

    def verdict(event_id: str) -> object:
        turn = TurnEvent(
            event_id=event_id,
            conversation_id="c1",
            turn_index=0,
            timestamp=datetime(2026, 1, 1, tzinfo=UTC),
            assistant=Assistant(name="helpdesk", version="1", model="m"),
            case=Case(subject="s", description="d"),
            query="q",
            answer="a",
        )
        failed = Judgment.model_validate(
            {
                "judge": "j",
                "kind": "openai",
                "model": "m",
                "status": "judge_failed",
                "failure_reason": "timeout",
            }
        )
        return failed_verdict(turn, [failed], "timeout", weight_profile="default")

    metrics = StreamRecorder(Metrics(registry), draws=_Ledger({"drawn": (0.25, "none")}))
    metrics.record_verdict(verdict("drawn"))  # type: ignore[arg-type]
    metrics.record_verdict(verdict("uniform"))  # type: ignore[arg-type]
    labels = {"assistant": "helpdesk", "band": "judge_failed"}
    assert registry.get_sample_value("casewatch_turns_judged_weight_total", labels) == 5.0
    assert registry.get_sample_value("casewatch_turns_judged_total", labels) == 2
