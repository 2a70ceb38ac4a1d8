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
    ├── BrokerError                 Kafka unreachable or a commit failed
    │   └── OffsetsNotCommitted     the daemon stopped but its final commit failed
    └── MessageRejected             a pipeline step is full: backpressure, try again later
"""

from __future__ import annotations


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


class BrokerError(CasewatchError):
    """The Kafka cluster is unreachable or an offset commit failed."""


class OffsetsNotCommitted(BrokerError):
    """The daemon stopped, but its final offset commit failed (e.g. Kafka was unreachable).

    Nothing is lost: the uncommitted tail is read again after a restart and the store drops
    what it already holds. The message says so, on one line, for the operator.
    """

    def __init__(self, cause: BrokerError) -> None:
        super().__init__(
            f"offsets were not committed ({cause}); the uncommitted tail will be re-read and "
            "deduplicated on restart, nothing is lost"
        )
        self.cause = cause


class MessageRejected(CasewatchError):
    """A pipeline step cannot take the message now (it is full). Hold it and retry."""
