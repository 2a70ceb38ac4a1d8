"""Batch judging throughput against a judge endpoint with fixed latency.

Starts the fake OpenAI-compatible judge server (tests/fake_judge_server.py) in its own process
(so its threads do not compete with ours for the GIL) answering after ``--latency`` seconds,
then judges ``--turns`` turns (examples/turns.jsonl repeated, with unique event ids) with
``run_batch`` and an OpenAI judge at ``--concurrency``. The ideal is concurrency / latency
turns per second (16 / 0.1 s = 160). As a baseline, in the same run, a bare loop of the same
number of threads sends the same chat-completions requests with the ``openai`` client and does
nothing with the replies: the gap between the two is casewatch's own overhead (prompt
building, validation, scoring, writing two JSONL files).

    .venv/bin/python bench/batch_throughput.py [--turns 480] [--concurrency 16] [--latency 0.1]

Prints a readable report, then one JSON line of results.
"""

from __future__ import annotations

import argparse
import json
import queue
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, cast

import openai
from openai.types.chat import ChatCompletionMessageParam
from openai.types.chat.completion_create_params import ResponseFormat

from monitor.batch.runner import run_batch
from monitor.config.settings import load_settings
from monitor.judging.evaluator import build_evaluator
from monitor.judging.prompt import build_messages
from monitor.judging.schema import SCHEMA_NAME, judge_output_json_schema
from monitor.runtime.logs import configure_logging
from monitor.schema.turn import TurnEvent

ROOT = Path(__file__).resolve().parent.parent
MODEL = "fake-judge"
KEY = "bench-key"  # the fake server accepts any key


def start_server(latency: float) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fake_judge_server", "--port", "0", "--latency", str(latency)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("base_url="):
        proc.terminate()
        raise SystemExit(f"fake judge server did not start (printed {line!r})")
    return proc, line.removeprefix("base_url=")


def make_input(examples: Path, turns: int, path: Path) -> list[bytes]:
    """``turns`` events from ``examples`` repeated, written to ``path`` one per line and
    returned; each copy gets fresh event/conversation ids."""
    base = [json.loads(line) for line in examples.read_text().splitlines() if line.strip()]
    if not base:
        raise SystemExit(f"{examples} holds no turn events")
    lines = []
    for i in range(turns):
        doc = dict(base[i % len(base)])
        copy = i // len(base)
        doc["event_id"] = f"{doc['event_id']}-r{copy}"
        doc["conversation_id"] = f"{doc['conversation_id']}-r{copy}"
        lines.append(json.dumps(doc).encode())
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return lines


Timeline = list[tuple[float, float]]  # (perf_counter, turns finished so far)


def bare_client_timeline(base_url: str, events: list[TurnEvent], concurrency: int) -> Timeline:
    """``concurrency`` threads sending the judge's requests with the bare openai client."""
    client = openai.OpenAI(api_key=KEY, base_url=base_url, max_retries=0, timeout=30)
    response_format: ResponseFormat = {
        "type": "json_schema",
        "json_schema": {"name": SCHEMA_NAME, "strict": True, "schema": judge_output_json_schema()},
    }
    work: queue.Queue[list[ChatCompletionMessageParam]] = queue.Queue()
    for e in events:
        work.put(cast(list[ChatCompletionMessageParam], build_messages(e)))
    finished: list[float] = []
    errors: list[BaseException] = []

    def worker() -> None:
        while True:
            try:
                messages = work.get_nowait()
            except queue.Empty:
                return
            try:
                client.chat.completions.create(
                    model=MODEL,
                    messages=messages,
                    temperature=0,
                    max_tokens=2000,
                    response_format=response_format,
                )
            except openai.APIError as exc:
                errors.append(exc)
            finished.append(time.perf_counter())  # list.append is atomic under the GIL

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    client.close()
    if errors:
        raise SystemExit(f"bare client: {len(errors)} requests failed, first: {errors[0]}")
    return [(started, 0.0)] + [(t, i + 1.0) for i, t in enumerate(sorted(finished))]


def bare_client(base_url: str, events: list[TurnEvent], concurrency: int) -> float:
    """Turns per second of the bare openai client sending the judge's requests."""
    timeline = bare_client_timeline(base_url, events, concurrency)
    return len(events) / (timeline[-1][0] - timeline[0][0])


def casewatch(base_url: str, src: Path, workdir: Path, concurrency: int) -> dict[str, Any]:
    settings = load_settings(
        judge="bench",
        judges={"bench": {"kind": "openai", "base_url": base_url, "model": MODEL, "api_key": KEY}},
    )
    evaluator = build_evaluator(settings, concurrency=concurrency)
    out = workdir / "granular.jsonl"
    out.unlink(missing_ok=True)
    try:
        summary = run_batch(
            src, out, workdir / "compact.jsonl", evaluator, concurrency=concurrency, progress=False
        )
    finally:
        evaluator.close()
    return summary.to_dict()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=Path, default=ROOT / "examples" / "turns.jsonl")
    parser.add_argument("--turns", type=int, default=480)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--latency", type=float, default=0.1)
    args = parser.parse_args(argv)
    configure_logging("warning")
    ideal = args.concurrency / args.latency
    proc, base_url = start_server(args.latency)
    try:
        with tempfile.TemporaryDirectory(prefix="casewatch-bench-") as tmp:
            workdir = Path(tmp)
            src = workdir / "turns.jsonl"
            events = [
                TurnEvent.model_validate_json(line)
                for line in make_input(args.examples, args.turns, src)
            ]
            bare = bare_client(base_url, events, args.concurrency)
            summary = casewatch(base_url, src, workdir, args.concurrency)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    ours = summary["turns_per_second"]
    result = {
        "bench": "batch_throughput",
        "turns": args.turns,
        "concurrency": args.concurrency,
        "latency_seconds": args.latency,
        "ideal_turns_per_second": round(ideal, 1),
        "casewatch_turns_per_second": round(ours, 1),
        "casewatch_ratio_to_ideal": round(ours / ideal, 3),
        "bare_client_turns_per_second": round(bare, 1),
        "bare_client_ratio_to_ideal": round(bare / ideal, 3),
        "casewatch_ratio_to_bare_client": round(ours / bare, 3),
        "judged": summary["judged"],
        "judge_failed": summary["judge_failed"],
    }
    print(
        f"{args.turns} turns, concurrency {args.concurrency}, judge latency {args.latency} s "
        f"(ideal {ideal:.0f} turns/s)\n"
        f"  bare openai client : {bare:6.1f} turns/s ({bare / ideal:.0%} of ideal)\n"
        f"  casewatch run_batch: {ours:6.1f} turns/s ({ours / ideal:.0%} of ideal, "
        f"{ours / bare:.0%} of the bare client); judge_failed {summary['judge_failed']}"
    )
    print(json.dumps(result))
    return 0 if summary["judge_failed"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
