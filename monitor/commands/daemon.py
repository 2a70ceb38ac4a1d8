"""``casewatch run`` (the streaming daemon) and ``casewatch produce`` (replay turns into Kafka).

Operator errors (bad config, unreachable broker or database) print one clear line and exit 2;
SIGTERM/SIGINT drain in-flight work, commit and exit 0, or exit 1 with one line saying the
offsets were not committed (Kafka unreachable; the tail is re-read and deduplicated on restart);
a second SIGTERM/SIGINT ends the process at once.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import click
import structlog

from consumers.replay import Pacer, PublishStats, publish, replay
from monitor.commands.store_access import db_option, with_db
from monitor.commands.usage import fail, settings_or_fail
from monitor.errors import CasewatchError, OffsetsNotCommitted
from monitor.runtime.clock import SystemClock

if TYPE_CHECKING:
    from monitor.config.settings import Settings
    from monitor.stream.runner import DaemonRunner

log = structlog.get_logger(__name__)

_CONFIG = click.Path(dir_okay=False, path_type=Path)


# ---------------------------------------------------------------- run


@click.command()
@click.option("--config", "config_file", type=_CONFIG, default=None, help="YAML settings file.")
@click.option(
    "--file",
    "file_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Read turns from a JSONL file instead of Kafka (its position and dead letters are kept "
    "beside a SQLite database, else under ~/.local/state/casewatch); "
    "- reads standard input (dead letters: ./casewatch-stdin.dlq.jsonl).",
)
@click.option("--follow", is_flag=True, help="With --file: keep reading as lines are appended.")
@click.option(
    "--format",
    "file_format",
    type=click.Choice(["casewatch", "otlp_json", "otlp_proto", "mapped"]),
    default=None,
    help="With --file: what a line is: a turn event (default), one OTLP/JSON "
    "ExportTraceServiceRequest, one protobuf ExportTraceServiceRequest in base64, or any JSON "
    "event read through `mapping`.",
)
@db_option
def run(
    config_file: Path | None,
    file_path: Path | None,
    follow: bool,
    file_format: str | None,
    db: str | None,
) -> None:
    """Run the streaming daemon: consume, sample, judge, store, export metrics."""
    from monitor.errors import ListenError
    from monitor.metrics.exporter import process_registry
    from monitor.runtime.allocator import limit_arenas
    from monitor.runtime.heap import freeze_startup_heap
    from monitor.runtime.logs import configure_logging
    from monitor.stream.runner import DaemonRunner

    if follow and (file_path is None or str(file_path) == "-"):
        raise click.UsageError("--follow needs --file with a file (standard input ends at EOF)")
    if file_format is not None and file_path is None:
        raise click.UsageError("--format reads a file: give --file too")
    settings = with_db(settings_or_fail(config_file), db)
    if file_format is not None:
        settings = _file_format(settings, file_format)
    configure_logging(settings.log_level, settings.secret_values())
    log.info("settings loaded")
    # Before the first thread starts: the daemon's threads would each grow a malloc arena.
    limit_arenas()
    try:
        runner = DaemonRunner(settings, process_registry(), file_path=file_path, follow=follow)
    except ListenError as exc:
        fail(f"{exc}; set server.port to a free port")
    except CasewatchError as exc:
        fail(str(exc))
    # Built, not yet running: what exists now lives as long as the process.
    freeze_startup_heap()
    try:
        runner.run_foreground()
    except OffsetsNotCommitted as exc:
        _finish(runner, exc)
    log.info("daemon stopped")
    _finish(runner, None)


def _file_format(settings: Settings, file_format: str) -> Settings:
    """The settings with the file's lines read in ``file_format``."""
    from consumers.file_source import FILE_TOPIC
    from monitor.config.kafka import TopicConfig
    from monitor.errors import MappingError
    from monitor.schema.mapping import TurnMapping

    if file_format == "mapped":
        try:
            TurnMapping.compile(settings.mapping)
        except MappingError as exc:
            fail(f"--format mapped: {exc}")
    topic = TopicConfig.model_validate({"name": FILE_TOPIC, "format": file_format})
    kafka = settings.kafka.model_copy(update={"topics": [topic]})
    return settings.model_copy(update={"kafka": kafka})


def _finish(runner: DaemonRunner, uncommitted: OffsetsNotCommitted | None) -> None:
    """Exit 0, or 1 with one line when the offsets were not committed; at once either way."""
    code = 0 if uncommitted is None else 1
    abandoned = runner.daemon.abandoned_calls
    if abandoned > 0:
        log.warning("not waiting for judge calls still running", n=abandoned)
    if uncommitted is not None:
        click.echo(f"casewatch: {uncommitted}", err=True)
    if abandoned > 0:
        # Python would join the judge threads at exit, i.e. wait out their HTTP timeouts for
        # results nobody reads (their turns are uncommitted and re-read on restart).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    if code:
        raise click.exceptions.Exit(code)


# ---------------------------------------------------------------- produce


def _lines(path: Path) -> Iterator[bytes]:
    with path.open("rb") as fh:
        yield from fh


@click.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--topic", required=True, help="Topic to publish to.")
@click.option("--bootstrap", default=None, help="HOST:PORT (default: kafka.bootstrap_servers).")
@click.option("--config", "config_file", type=_CONFIG, default=None, help="YAML settings file.")
@click.option("--rate", type=click.FloatRange(min=0, min_open=True), default=None, help="msgs/s.")
@click.option("--loop", is_flag=True, help="Repeat the file (event ids get a -rN suffix).")
@click.option("--count", type=click.IntRange(min=0), default=None, help="Stop after N messages.")
@click.option(
    "--connect-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=10.0,
    show_default=True,
    help="Seconds to wait for the broker to accept connections.",
)
@click.option(
    "--compression",
    type=click.Choice(["none", "gzip", "snappy", "lz4", "zstd"]),
    default="none",
    show_default=True,
    help="Batch compression (every Kafka codec; the daemon reads them all).",
)
def produce(
    file: Path,
    topic: str,
    bootstrap: str | None,
    config_file: Path | None,
    rate: float | None,
    loop: bool,
    count: int | None,
    connect_timeout: float,
    compression: str,
) -> None:
    """Publish the turns of a JSONL file to a Kafka topic, as raw bytes (one line, one message)."""
    from consumers._kafka import broker_errors, close_producer
    from consumers.producer import open_producer

    if loop and count is None and rate is None:
        click.echo("casewatch: --loop without --count or --rate runs flat out until ^C", err=True)
    settings = settings_or_fail(config_file)
    servers = [bootstrap] if bootstrap else list(settings.kafka.bootstrap_servers)
    try:
        producer = open_producer(
            "the producer",
            servers,
            settings.kafka,
            connect_timeout_s=connect_timeout,
            client_id=f"{settings.kafka.client_id}-produce",
            acks="all",
            linger_ms=5,
            compression_type=None if compression == "none" else compression,
        )
    except CasewatchError as exc:
        fail(str(exc))
    stats = PublishStats()
    try:
        with broker_errors(f"publishing to {topic}", servers):
            messages = replay(lambda: _lines(file), loop=loop, count=count)
            publish(producer, topic, messages, Pacer(rate, SystemClock()), stats)
            producer.flush(timeout=60)
    except CasewatchError as exc:
        fail(f"{exc} (after {stats.sent} message(s))")
    except KeyboardInterrupt:
        pass  # what was sent is flushed by the close below
    finally:
        # Bounded whatever the broker does; what it cannot deliver fails into ``failures``.
        close_producer(producer, 10.0)
    if stats.failed:
        fail(
            f"{stats.failed} of {stats.sent} message(s) were not published to {topic}: "
            f"{stats.last_error}"
        )
    click.echo(f"produced {stats.sent} message(s) to {topic}", err=True)


COMMANDS: list[click.Command] = [run, produce]
