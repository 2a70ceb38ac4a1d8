"""The daemon's sections: its processing loop (``daemon``) and the HTTP server of
``/metrics`` and its probes (``server``). Read by ``monitor/stream``.
"""

from __future__ import annotations

from pydantic import Field

from monitor.config.section import Section


class ServerConfig(Section):
    """The HTTP server of /metrics, /healthz and /readyz."""

    host: str = "127.0.0.1"
    port: int = Field(default=9464, ge=0, le=65535)


class DaemonConfig(Section):
    """The processing loop: concurrency, backpressure, commits and stopping."""

    concurrency: int = Field(default=8, gt=0, le=1024, description="Judge calls in flight.")
    max_in_flight: int = Field(default=256, gt=0, description="Turns held before pausing.")
    screen_processes: int = Field(
        default=0,
        ge=0,
        le=32,
        description=(
            "Worker processes that recognise the turns not to be judged (valid, not sampled, "
            "tripwire clean) off the consumer's thread, and under sampling.strategy cascade "
            "take the cheap look there (docs/cascade.md); 0 does it on that thread. 1 when "
            "ingest is the bottleneck and a core is free."
        ),
    )
    drain_timeout_seconds: float = Field(
        default=30.0, gt=0, description="On SIGTERM, how long in-flight turns may finish."
    )
    commit_interval_seconds: float = Field(
        default=1.0, gt=0, description="How often finished offsets are committed."
    )
    # On a rebalance, turns of revoked partitions still being judged are waited for this long
    # (capped by a quarter of kafka.max_poll_interval_ms) so the new owner does not pay for them
    # again; what is still running then is abandoned and counted.
    revoke_timeout_seconds: float = Field(default=10.0, ge=0)
    summary_interval_seconds: float = Field(
        default=60.0,
        gt=0,
        description=(
            "How often `casewatch run` logs its summary line (records read, turns sampled, "
            "judged, skipped and dead-lettered, by reason); also logged when the run ends."
        ),
    )
