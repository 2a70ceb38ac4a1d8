"""Which way of driving the openai client gets closest to the concurrency limit here?

Against the fake judge server (its own process) at ``--latency``, ``--requests`` calls at
``--concurrency``, five ways, alternated ``--rounds`` (3) times in the same run: N threads
sharing one ``openai.OpenAI`` client calling ``chat.completions.create`` (the judge until
this bench), N threads with a client each (no shared httpx connection-pool lock), one asyncio
loop with ``openai.AsyncOpenAI`` and N tasks, N threads through casewatch's own transport
(``monitor.judging.chat_endpoint.ChatEndpoint``: a client per thread sharing one TLS context,
requests sent with the client's generic ``post`` so the SDK's request transform is skipped),
and N threads with the standard library's ``http.client`` on a keep-alive connection each: no
SDK at all, the ceiling the fake server allows. Each warms its connections first; the figure
is requests per second as a share of the ideal concurrency / latency, median over the rounds.
Not part of ``run_all.py``: it is the evidence for the "asyncio or not" question and for where
the bare client's distance from the ideal goes, in bench/README.md.

    .venv/bin/python bench/client_models.py [--requests 480] [--concurrency 16] [--latency 0.1]

Prints a readable report, then one JSON line of results.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import queue
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.batch_throughput import KEY, MODEL, start_server  # noqa: E402

MESSAGES: Any = [{"role": "user", "content": "x" * 2000}]


def _threads(
    n: int, concurrency: int, start: Callable[[], tuple[Callable[[], object], Callable[[], None]]]
) -> float:
    """``n`` calls on ``concurrency`` threads; ``start()`` runs in each thread and gives its
    call and its clean-up. Each thread makes one warm-up call before the clock starts."""
    work: queue.Queue[int] = queue.Queue()
    for i in range(n):
        work.put(i)
    ready = threading.Barrier(concurrency + 1)

    def worker() -> None:
        call, cleanup = start()
        try:
            call()
            ready.wait()
            while True:
                try:
                    work.get_nowait()
                except queue.Empty:
                    return
                call()
        finally:
            cleanup()

    pool = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in pool:
        t.start()
    ready.wait()
    started = time.perf_counter()
    for t in pool:
        t.join()
    return n / (time.perf_counter() - started)


def _nothing() -> None:
    return None


def threads(base_url: str, n: int, concurrency: int, per_thread: bool) -> float:
    shared = openai.OpenAI(api_key=KEY, base_url=base_url, max_retries=0, timeout=30)

    def start() -> tuple[Callable[[], object], Callable[[], None]]:
        client = (
            openai.OpenAI(api_key=KEY, base_url=base_url, max_retries=0, timeout=30)
            if per_thread
            else shared
        )

        def call() -> object:
            return client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=10)

        return call, client.close if per_thread else _nothing

    try:
        return _threads(n, concurrency, start)
    finally:
        shared.close()


def chat_endpoint(base_url: str, n: int, concurrency: int) -> float:
    """casewatch's judge transport, as the judge calls it."""
    from pydantic import SecretStr

    from monitor.config.judges import JudgeConfig
    from monitor.judging.chat_endpoint import CallStats, ChatEndpoint

    config = JudgeConfig(
        kind="openai", base_url=base_url, model=MODEL, api_key=SecretStr(KEY), timeout_seconds=30
    )
    endpoint = ChatEndpoint("bench", config)

    def start() -> tuple[Callable[[], object], Callable[[], None]]:
        return (lambda: endpoint.send(MESSAGES, CallStats(), max_tokens=10)), _nothing

    try:
        return _threads(n, concurrency, start)
    finally:
        endpoint.close()


def raw_http(base_url: str, n: int, concurrency: int) -> float:
    """No SDK: one keep-alive ``http.client`` connection per thread (the server's ceiling)."""
    import http.client
    from urllib.parse import urlsplit

    url = urlsplit(base_url)
    path = url.path.rstrip("/") + "/chat/completions"
    body = json.dumps({"model": MODEL, "messages": MESSAGES, "max_tokens": 10}).encode()
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"}

    def start() -> tuple[Callable[[], object], Callable[[], None]]:
        conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=30)

        def call() -> object:
            conn.request("POST", path, body, headers)
            return conn.getresponse().read()

        return call, conn.close

    return _threads(n, concurrency, start)


def asyncio_tasks(base_url: str, n: int, concurrency: int) -> float:
    async def run() -> float:
        client = openai.AsyncOpenAI(api_key=KEY, base_url=base_url, max_retries=0, timeout=30)
        warm = [
            client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=10)
            for _ in range(concurrency)
        ]
        await asyncio.gather(*warm)
        left = [n]

        async def worker() -> None:
            while left[0] > 0:
                left[0] -= 1
                await client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=10)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
        await client.close()
        return n / elapsed

    return asyncio.run(run())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=480)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    ideal = args.concurrency / args.latency
    ways: dict[str, Callable[[str], float]] = {
        "threads_shared_client": lambda u: threads(u, args.requests, args.concurrency, False),
        "threads_client_per_thread": lambda u: threads(u, args.requests, args.concurrency, True),
        "asyncio_one_loop": lambda u: asyncio_tasks(u, args.requests, args.concurrency),
        "casewatch_chat_endpoint": lambda u: chat_endpoint(u, args.requests, args.concurrency),
        "raw_http_client": lambda u: raw_http(u, args.requests, args.concurrency),
    }
    server, base_url = start_server(args.latency)
    try:
        rounds: dict[str, list[float]] = {k: [] for k in ways}
        for _ in range(args.rounds):
            for name, way in ways.items():
                rounds[name].append(way(base_url) / ideal)
    finally:
        server.terminate()
        server.wait(timeout=10)
    result: dict[str, Any] = {
        "bench": "client_models",
        "requests": args.requests,
        "concurrency": args.concurrency,
        "latency_seconds": args.latency,
        "ideal_per_second": ideal,
    }
    for name, values in rounds.items():
        median = statistics.median(values)
        result[f"{name}_ratio_to_ideal"] = round(median, 3)
        result[f"{name}_rounds"] = [round(v, 3) for v in values]
        print(f"{name:28s} {median:.3f} of ideal {ideal:.0f}/s (rounds {result[name + '_rounds']})")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
