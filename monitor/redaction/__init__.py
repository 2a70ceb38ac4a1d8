"""Redaction of personal data and secrets: pure detection and pseudonymization.

``Redactor(policy).redact_turn(turn)`` returns the turn with every e-mail address, phone number,
payment card, IBAN, secret (and, if configured, IP address, hostname or operator pattern)
replaced by a placeholder (``monitor.redaction.placeholders``), and the count per kind. The
pipeline step that runs it sits in ``monitor.stream.steps.redact``.
"""

from monitor.redaction.placeholders import PLACEHOLDER, Pseudonymizer, is_placeholder
from monitor.redaction.policy import BUILTIN_KINDS, RedactionPolicy
from monitor.redaction.redactor import Redactor, TooLargeToRedact, TurnRedaction

__all__ = [
    "BUILTIN_KINDS",
    "PLACEHOLDER",
    "Pseudonymizer",
    "RedactionPolicy",
    "Redactor",
    "TooLargeToRedact",
    "TurnRedaction",
    "is_placeholder",
]
