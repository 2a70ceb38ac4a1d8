"""Run casewatch as if some libraries were not installed (a "codec library missing" environment).

    python -m tests.without_modules zstandard,snappy run --config casewatch.yaml

Each named module is set to ``None`` in ``sys.modules`` before anything imports it, which makes
every ``import`` of it raise ImportError, exactly as in an environment without the package;
then the CLI runs with the remaining arguments. Only this process (and no other test) is
affected.
"""

from __future__ import annotations

import sys


def main() -> None:
    blocked, *args = sys.argv[1:]
    for name in blocked.split(","):
        sys.modules[name] = None  # type: ignore[assignment]
    from monitor.cli import main as cli

    cli(args=args, prog_name="casewatch")


if __name__ == "__main__":
    main()
