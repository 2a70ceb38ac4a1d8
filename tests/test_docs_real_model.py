"""docs/real-model.md, "Run a local model and point casewatch at it", as written: its
``judges:`` block loads as settings naming the server its command starts; where the
``realmodel`` extra is built, the documented command starts the server, ``casewatch judge``
with the documented block gets replies from it for a prompt longer than the server's default
context, and the same command without ``--n_ctx 4096`` cannot serve that prompt."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from monitor.config.settings import load_settings
from monitor.runtime.processes import start_supervised, stop_process
from tests.model_server import DEFAULT_CONTEXT, free_port, server_installed, smollm2_gguf
from tests.support.components import unavailable

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "real-model.md"
BIN = Path(sys.executable).parent
SERVER_DEFAULT_CONTEXT = 2048  # llama-cpp-python's server without --n_ctx


def _section() -> str:
    text = DOC.read_text()
    start = text.index("## Run a local model and point casewatch at it\n")
    return text[start : text.index("\n## ", start + 1)]


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", _section(), flags=re.DOTALL)


def _server_line() -> str:
    (line,) = [x for x in _blocks("sh")[0].splitlines() if " -m llama_cpp.server " in x]
    return line


def _judges_block(tmp_path: Path, base_url: str | None = None, **judge: object) -> Path:
    (block,) = [b for b in _blocks("yaml") if b.startswith("judges:")]
    doc = yaml.safe_load(block)
    if base_url is not None:
        doc["judges"]["local"]["base_url"] = base_url
    doc["judges"]["local"].update(judge)
    path = tmp_path / "local-judge.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_the_judges_block_loads_and_names_the_server_the_command_starts(tmp_path: Path) -> None:
    settings = load_settings(_judges_block(tmp_path))
    judge = settings.judge_config(settings.judge)
    argv = shlex.split(_server_line())
    option = {argv[i]: argv[i + 1] for i in range(len(argv) - 1) if argv[i].startswith("--")}
    assert (settings.judge, judge.kind) == ("local", "openai")
    assert judge.model == option["--model_alias"]
    assert judge.base_url == f"http://{option['--host']}:{option['--port']}/v1"
    assert judge.max_concurrent_requests == 1 and judge.resolve_api_key() is None
    # The context the page gives is the one the test tier runs with, above the default.
    assert int(option["--n_ctx"]) == DEFAULT_CONTEXT > SERVER_DEFAULT_CONTEXT
    assert option["--n_threads"] == "1"


@contextmanager
def _server(tmp_path: Path, line: str, name: str) -> Iterator[str]:
    """The documented server line, run with this environment's Python on a free port; its
    base URL once ``GET /v1/models`` answers."""
    port = free_port()
    line = line.replace(".venv/bin/python", sys.executable).replace("--port 8080", f"--port {port}")
    argv = [a if a != "$GGUF" else str(smollm2_gguf()) for a in shlex.split(line)]
    log_path = tmp_path / f"{name}.log"
    base = f"http://127.0.0.1:{port}/v1"

    def ready() -> bool:
        try:
            with urllib.request.urlopen(f"{base}/models", timeout=5) as resp:  # noqa: S310
                return bool(json.load(resp)["data"])
        except OSError:
            return False

    with log_path.open("ab") as log:
        proc = start_supervised(argv, log, ready, 300.0, 20.0, interval_s=0.2)
        assert proc is not None, f"the {name} model server: {log_path.read_text()[-2000:]}"
        try:
            yield base
        finally:
            stop_process(proc, 20.0)


def _judge_one(tmp_path: Path, base: str) -> dict[str, object]:
    config = _judges_block(tmp_path, base, max_output_tokens=16, output_retries=0)
    turn = tmp_path / "one.jsonl"
    turn.write_text((ROOT / "examples" / "turns.jsonl").read_text().splitlines()[0] + "\n")
    out = tmp_path / f"judged-{base.split(':')[-1].split('/')[0]}.jsonl"
    done = subprocess.run(
        [str(BIN / "casewatch"), "judge", str(turn), "--config", str(config), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode in (0, 1), done.stderr  # 1: the judgment ended judge_failed
    (row,) = [json.loads(x) for x in out.read_text().splitlines()]
    (judgment,) = row["judgments"]
    result: dict[str, object] = judgment
    return result


@pytest.mark.integration
def test_the_documented_server_judges_a_prompt_longer_than_its_default_context(
    tmp_path: Path,
) -> None:
    if not server_installed():
        unavailable("the real model server", "llama-cpp-python is not installed ('realmodel')")
    with _server(tmp_path, _server_line(), "documented") as base:
        judgment = _judge_one(tmp_path, base)
    # The reply was cut at the 16 tokens asked for: the server read the whole prompt.
    assert judgment["failure_reason"] == "truncated", judgment
    assert isinstance(judgment["input_tokens"], int)
    assert SERVER_DEFAULT_CONTEXT < judgment["input_tokens"] < DEFAULT_CONTEXT
    without = _server_line().replace(f" --n_ctx {DEFAULT_CONTEXT}", "")
    with _server(tmp_path, without, "default-context") as base:
        refused = _judge_one(tmp_path, base)
    assert refused["failure_reason"] == "bad_request", refused
    assert "maximum context length is 2048 tokens" in str(refused["failure_detail"])
