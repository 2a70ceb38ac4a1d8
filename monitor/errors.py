"""The casewatch exception tree.

Adapters translate third-party exceptions (openai, kafka-python, SQLAlchemy) into these at the
boundary (``raise ... from exc``) so callers never import a client library to catch an error.

    CasewatchError
    ├── ConfigError                 bad settings; raised at start, names the field
    ├── InvalidInput                a record that can never be processed (poison)
    │   └── InvalidEvent            turn event failed decoding / validation / size limit
    ├── JudgeError
    │   ├── JudgeOutputInvalid      the judge answered, but not with valid scores (retryable)
    │   ├── JudgeTransientError     429 / 5xx / timeout / connection (retryable with backoff)
    │   └── JudgeFatalError         4xx other than 429, auth errors (not retryable)
    ├── StorageError                database unreachable or a write failed
    │   └── UnstorableRow           the database refuses one row's data (permanent, never retried)
    ├── TransportError              the turn source or dead-letter sink failed (paused, retried)
    │   ├── BrokerError             Kafka unreachable or a commit failed
    │   └── TurnFileError           reading a turn file, writing an offsets or dead-letter file
    │   OffsetsNotCommitted         the daemon stopped but its final commit failed (a BrokerError)
    └── MessageRejected             a pipeline step is full: backpressure, try again later
"""

from __future__ import annotations

from pydantic import ValidationError


class CasewatchError(Exception):
    """Base of every error casewatch raises on purpose."""


class ConfigError(CasewatchError):
    """Settings are invalid; the message names the offending field and how to fix it."""


class InvalidInput(CasewatchError):
    """A record that will never become valid by retrying it."""

    def __init__(self, reason: str, detail: str = "") -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason}: {detail}" if detail else reason)


class InvalidEvent(InvalidInput):
    """A turn event failed decoding or validation. ``reason`` is a bounded label value."""


class JudgeError(CasewatchError):
    """Base of judge failures."""


class JudgeOutputInvalid(JudgeError):
    """The judge replied, but the reply did not validate against the score schema."""


class JudgeTransientError(JudgeError):
    """Rate limit, server error, timeout or connection failure: worth retrying."""

    def __init__(self, message: str, retry_after: float | None = None, reason: str = "") -> None:
        self.retry_after = retry_after
        self.reason = reason or "transient"
        super().__init__(message)


class JudgeFatalError(JudgeError):
    """A request that will fail the same way again (bad request, auth)."""

    def __init__(self, message: str, reason: str = "fatal") -> None:
        self.reason = reason
        super().__init__(message)


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


class MessageRejected(CasewatchError):
    """A pipeline step cannot take the message now (it is full). Hold it and retry."""


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
