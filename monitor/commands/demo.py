"""``casewatch demo``: the pipeline end to end on one machine (what ``make run`` runs).

The orchestration lives in ``monitor.demo.run``; this only parses options, wires signals and maps
errors to exit codes (2: the demo could not start, 1: the daemon failed while running or could
not commit its offsets). Ctrl-C stops the demo; a second Ctrl-C ends it at once.
"""

from __future__ import annotations

from pathlib import Path

import click

from monitor.commands.usage import fail, settings_or_fail
from monitor.errors import CasewatchError

_FILE = click.Path(dir_okay=False, path_type=Path)


@click.command()
@click.option("--config", "config_file", type=_FILE, default=None, help="YAML settings file.")
@click.option("--port", type=click.IntRange(0, 65535), default=9464, show_default=True,
              help="Port of /metrics, /healthz, /readyz (0: any free port).")  # fmt: skip
@click.option("--rate", type=click.FloatRange(min=0, min_open=True), default=20.0,
              show_default=True, help="Turns replayed per second.")  # fmt: skip
@click.option("--duration", type=click.FloatRange(min=0), default=None,
              help="Stop by itself after this many seconds (CI smoke runs).")  # fmt: skip
@click.option("--db", "db_path", type=_FILE, default=None,
              help="SQLite file to keep the verdicts in (default: a temporary file).")  # fmt: skip
@click.option("--examples", type=_FILE, default=None,
              help="Turns to replay (default: examples/turns.jsonl of the checkout).")  # fmt: skip
@click.option("--alerts/--no-alerts", default=True, show_default=True,
              help="Prometheus + Alertmanager with rules/ loaded (if installed).")  # fmt: skip
@click.option("--regression-after", type=click.FloatRange(min=0), default=90.0,
              show_default=True, help="Seconds until the canary regresses.")  # fmt: skip
@click.option("--no-regression", is_flag=True, default=False,
              help="Never inject the canary regression.")  # fmt: skip
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]),
              default="warning", show_default=True, help="Daemon log level (stderr).")  # fmt: skip
def demo(
    config_file: Path | None,
    port: int,
    rate: float,
    duration: float | None,
    db_path: Path | None,
    examples: Path | None,
    alerts: bool,
    regression_after: float,
    no_regression: bool,
    log_level: str,
) -> None:
    """Run the daemon against an embedded Kafka broker fed with the example turns.

    Uses the heuristic judge unless --config names judges (or a panel). Kafka, storage and
    server settings of the config are replaced by the demo's own. When Prometheus and
    Alertmanager are installed (`make services`), starts them with rules/ loaded; the canary of
    the examples regresses after --regression-after seconds, and the summary shows the alerts.
    """
    from monitor.demo.options import DemoOptions
    from monitor.demo.run import Demo
    from monitor.runtime.logs import configure_logging
    from monitor.stream.signals import drain_signals

    settings = settings_or_fail(config_file, prog="casewatch demo")
    configure_logging(log_level, settings.secret_values())
    options = DemoOptions(
        rate=rate,
        port=port,
        db_path=db_path,
        examples=examples,
        alerts=alerts,
        regression_after_s=None if no_regression else regression_after,
    )
    runner = Demo(settings, options, echo=click.echo)
    try:
        runner.start()
    except CasewatchError as exc:
        fail(str(exc), prog="casewatch demo")

    try:
        with drain_signals(runner.request_stop, before_exit=runner.kill_broker):
            runner.run(duration)
    except CasewatchError as exc:
        fail(str(exc), code=1, prog="casewatch demo")
    finally:
        runner.cleanup()
    click.echo("casewatch demo: stopped")


COMMANDS: list[click.Command] = [demo]
