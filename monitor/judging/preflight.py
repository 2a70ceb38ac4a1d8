"""Check a run's judge endpoints before it starts: one cheap request each.

A batch run against a judge that is down would otherwise record every turn ``judge_failed``
(each after its retries), and a wrong key the same; one request per endpoint finds out first
and the command stops with a message naming the judge, its URL and what to check.
"""

from __future__ import annotations

from monitor.errors import ConfigError, JudgeError, JudgeFatalError
from monitor.judging.chat_endpoint import ChatEndpoint
from monitor.settings import Settings

DEFAULT_PROBE_TIMEOUT_S = 10.0

_WHAT_TO_CHECK = {
    "auth": "check its api_key_env / api_key_file",
    "connection": "check its base_url and that the endpoint is running",
    "timeout": "check its base_url and that the endpoint is not overloaded",
}


def unreachable_judges(settings: Settings, timeout_s: float = DEFAULT_PROBE_TIMEOUT_S) -> list[str]:
    """One line per judge of the run (panel primaries and arbiter) that did not answer; the
    offline heuristic needs no check. Empty when every endpoint answered."""
    panel = settings.effective_panel()
    names = [*panel.primaries, *([panel.arbiter] if panel.arbiter else [])]
    problems = []
    for name in dict.fromkeys(names):
        config = settings.judge_config(name)
        if config.kind != "openai":
            continue
        where = config.base_url or "https://api.openai.com/v1"
        try:
            endpoint = ChatEndpoint(name, config)
        except ConfigError as exc:
            problems.append(f"judge {name!r}: {exc}")
            continue
        try:
            endpoint.probe(min(timeout_s, config.timeout_seconds))
        except JudgeError as exc:
            reason = getattr(exc, "reason", "")
            hint = _WHAT_TO_CHECK.get(reason, "check the endpoint")
            if isinstance(exc, JudgeFatalError) and reason == "bad_request":
                hint = "check its base_url (it should end in /v1 for most servers)"
            problems.append(f"judge {name!r} at {where} did not answer: {exc} ({hint})")
        finally:
            endpoint.close()
    return problems


__all__ = ["DEFAULT_PROBE_TIMEOUT_S", "unreachable_judges"]
