"""One Prometheus or Alertmanager binary supervised on a free loopback port.

The binaries are Debian's packages (``/usr/bin/prometheus``, ``/usr/bin/prometheus-alertmanager``,
``/usr/bin/promtool``, installed by ``make services``). A ``ServerProcess`` starts one in its
working directory with its output in its own log file (``monitor.runtime.processes``: a session of
its
own, dying with its parent), waits for the readiness condition its owner gives, retries on
another port when the binary exited at start (a free port can be taken between probe and
bind), and stops it. What the binary is configured with is ``monitor.demo.prometheus_stack``'s.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import IO

import structlog

from monitor.errors import PrometheusNotInstalled, PrometheusStackError
from monitor.runtime.processes import spawn_logged, stop_process, wait_ready

log = structlog.get_logger(__name__)

PROMETHEUS_BIN = Path("/usr/bin/prometheus")
ALERTMANAGER_BIN = Path("/usr/bin/prometheus-alertmanager")
PROMTOOL_BIN = Path("/usr/bin/promtool")
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
_PORT_ATTEMPTS = 3  # a free port can be taken between probe and bind: retry with another


def find_binary(path: Path) -> Path:
    """``path`` if it is an executable file, else ``PrometheusNotInstalled``."""
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise PrometheusNotInstalled(
            f"{path} is missing: run `make services` (installs Debian's 'prometheus' and "
            "'prometheus-alertmanager' packages as root)"
        )
    return path


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


class ServerProcess:
    """One binary on a free loopback port in ``workdir``, ready once ``ready(url)`` holds."""

    def __init__(self, name: str, binary: Path, workdir: Path, host: str) -> None:
        self.name = name
        self.binary = binary
        self.workdir = workdir
        self.host = host
        self.port: int | None = None
        self.log_path = workdir / f"{name}.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        if self.port is None:
            raise PrometheusStackError(f"{self.name} is not started")
        return f"http://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(
        self,
        args_for_port: Callable[[str], list[str]],
        ready: Callable[[str], bool],
        timeout_s: float,
    ) -> None:
        """Start the binary with ``args_for_port("host:port")`` and wait until ``ready(url)``;
        ``PrometheusStackError`` with the log's tail when it never is."""
        for attempt in range(_PORT_ATTEMPTS):
            port = _free_port(self.host)
            argv = [str(self.binary), *args_for_port(f"{self.host}:{port}")]
            self._log = self.log_path.open("ab")
            try:
                self._proc = spawn_logged(argv, self._log, cwd=self.workdir)
            except BaseException:
                self.stop()  # closes the log file: no caller's stop() follows a failed start
                raise
            self.port = port
            url = self.url
            if wait_ready(self._proc, functools.partial(ready, url), timeout_s):
                log.info(f"{self.name} started", url=url, log=str(self.log_path))
                return
            exited = not self.running
            self.stop()
            if not exited:  # alive but never ready: another port will not help
                break
            log.warning(f"{self.name} exited at start; retrying", port=port, attempt=attempt + 1)
        raise PrometheusStackError(
            f"{self.name} did not become ready (see {self.log_path}):\n{self.log_tail()}"
        )

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            stop_process(proc, STOP_TIMEOUT_S)
        if self._log is not None:
            self._log.close()
            self._log = None
        self.port = None

    def kill(self) -> None:
        """SIGKILL without waiting (safe in a signal handler); see ``PrometheusStack.kill``."""
        proc = self._proc
        if proc is not None:
            with contextlib.suppress(OSError):
                proc.kill()

    def log_tail(self, lines: int = 20) -> str:
        with contextlib.suppress(OSError):
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
            return "\n".join(text.splitlines()[-lines:])
        return ""
