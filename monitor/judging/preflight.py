"""Check a run's judge endpoints before it starts: one cheap request each.

A batch run against a judge that is down would otherwise record every turn ``judge_failed``
(each after its retries), and a wrong key the same; one request per endpoint finds out first
and the command stops with a message naming the judge, its URL and what to check. The daemon
probes the same way at start but starts anyway (a judge may come back): it logs which judge is
down and reports it on /readyz until a later probe finds it answering (``JudgeWatch``).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

import structlog

from monitor.config.judges import JudgeConfig
from monitor.config.settings import Settings
from monitor.errors import ConfigError, JudgeError, JudgeFatalError
from monitor.judging.chat_endpoint import ChatEndpoint

DEFAULT_PROBE_TIMEOUT_S = 10.0
# How often the daemon asks a judge that was down again.
REPROBE_INTERVAL_S = 30.0

_log = structlog.get_logger(__name__)

_WHAT_TO_CHECK = {
    "auth": "check its api_key_env / api_key_file",
    "connection": "check its base_url and that the endpoint is running",
    "timeout": "check its base_url and that the endpoint is not overloaded",
}


@dataclass
class JudgeProbe:
    """What probing a run's judges found: ``misconfigured`` (a setting to fix: a missing key
    file or variable) and ``down`` (did not answer), one line per judge, keyed by its name."""

    misconfigured: dict[str, str] = field(default_factory=dict)
    down: dict[str, str] = field(default_factory=dict)


def judges_to_probe(settings: Settings) -> dict[str, JudgeConfig]:
    """The judges of the run that answer over HTTP (panel primaries and arbiter), by name; the
    offline heuristic needs no check."""
    configs = {n: settings.judge_config(n) for n, _ in settings.effective_panel().roles()}
    return {n: config for n, config in configs.items() if config.kind == "openai"}


def probe_judges(
    judges: Mapping[str, JudgeConfig], timeout_s: float = DEFAULT_PROBE_TIMEOUT_S
) -> JudgeProbe:
    """Probe each of ``judges`` (``judges_to_probe``'s) with one cheap request."""
    found = JudgeProbe()
    for name, config in judges.items():
        where = config.base_url or "https://api.openai.com/v1"
        try:
            endpoint = ChatEndpoint(name, config)
        except ConfigError as exc:
            found.misconfigured[name] = f"judge {name!r}: {exc}"
            continue
        try:
            endpoint.probe(min(timeout_s, config.timeout_seconds))
        except JudgeError as exc:
            reason = getattr(exc, "reason", "")
            hint = _WHAT_TO_CHECK.get(reason, "check the endpoint")
            if isinstance(exc, JudgeFatalError) and reason == "bad_request":
                hint = "check its base_url (it should end in /v1 for most servers)"
            found.down[name] = f"judge {name!r} at {where} did not answer: {exc} ({hint})"
        finally:
            endpoint.close()
    return found


class JudgeWatch:
    """The daemon's view of its judges for /readyz: probed once at start (``start`` logs each
    judge that does not answer), then, while one is down, again every ``interval_s`` on a
    thread of its own, so a scrape never waits on a probe."""

    def __init__(
        self,
        judges: Mapping[str, JudgeConfig],
        interval_s: float = REPROBE_INTERVAL_S,
        timeout_s: float = DEFAULT_PROBE_TIMEOUT_S,
    ) -> None:
        self._judges = dict(judges)
        self._interval = interval_s
        self._timeout = timeout_s
        self._down: dict[str, str] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        found = probe_judges(self._judges, self._timeout)
        with self._lock:
            self._down = dict(found.down)
        for line in found.down.values():
            _log.warning(
                f"{line}; the daemon starts anyway: turns judged meanwhile end judge_failed, "
                "and /readyz reports the judge until it answers"
            )
        if found.down:
            self._thread = threading.Thread(target=self._watch, name="judge-watch", daemon=True)
            self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(self._interval):
            with self._lock:
                names = sorted(self._down)
            if not names:
                return
            found = probe_judges({n: self._judges[n] for n in names}, self._timeout)
            with self._lock:
                for name in names:
                    if name not in found.down:
                        self._down.pop(name, None)
                        _log.info("judge answers again", judge=name)

    def down(self) -> list[str]:
        """One line per judge that did not answer its last probe."""
        with self._lock:
            return [self._down[n] for n in sorted(self._down)]

    def close(self) -> None:
        """Stop watching, without waiting: a probe in progress (a daemon thread's) closes its own
        endpoint when its timeout ends, and nobody reads what it found."""
        self._stop.set()


__all__ = [
    "DEFAULT_PROBE_TIMEOUT_S",
    "JudgeProbe",
    "JudgeWatch",
    "judges_to_probe",
    "probe_judges",
]
