"""CPU per turn of the sample step with the cascade's cheap look (the offline judge) against
the uniform strategy, on the example turns (7 copies of examples/turns.jsonl's 144, each in its
own conversation), the identifier tripwire on in both; the cascade at several
``sampling.cascade_look_share``. Process CPU time per turn, median of 3 runs, and its ratio to
the uniform strategy's in the same run.

The offline judge remembers its readings of the last texts it read (a case, a knowledge-base
chunk or an earlier message comes back turn after turn); it forgets them before each copy, so
each copy is read as new traffic and the only texts read twice are those the examples repeat
(a conversation's case and history, the knowledge-base chunks retrieved for several turns).
``--cold`` forgets them before every turn: no text read twice at all.

    .venv/bin/python bench/cascade_cpu.py

``--screen`` measures who pays for the look instead: the records (the same turns as record
values) go through the daemon's chain, [screen →] decode → redact → sample, the tripwire and
redaction on as by default, under the uniform strategy and under the cascade at look shares
1.0 and 0.2, with no screening processes (the consumer's thread looks) and with
``--screen-processes`` of them (they take the look and hand the cell on; the thread draws).
Per turn, medians of 3 runs (the cases alternated, a full garbage collection before each):
the CPU of the consumer's thread (the loop's, ``thread_time``), of its whole process (the
thread plus the pool's feeder and result threads, which pickle batches and unpickle marks), of
the screening processes (``/proc``), and the wall time. The processes
start before the clock and are warmed by one record; they remember their readings across the
copies (they cannot be told to forget), so their CPU is that of remembered texts, lower than
the consumer's thread's where it forgets them before each copy.

    .venv/bin/python bench/cascade_cpu.py --screen --screen-processes 1
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # bench/ is not an installed package

from prometheus_client import CollectorRegistry  # noqa: E402

from consumers.dlq import FileDeadLetterSink  # noqa: E402
from consumers.records import RawMessage  # noqa: E402
from monitor.config.sampling import SamplingConfig  # noqa: E402
from monitor.errors import MessageRejected  # noqa: E402
from monitor.judging.heuristic.tokens import forget_readings  # noqa: E402
from monitor.judging.heuristic.tripwire import identifier_tripwire  # noqa: E402
from monitor.metrics.exporter import Metrics  # noqa: E402
from monitor.redaction.config import RedactionConfig  # noqa: E402
from monitor.runtime.clock import ManualClock  # noqa: E402
from monitor.sampling.sampler import Sampler  # noqa: E402
from monitor.schema.turn import TurnEvent  # noqa: E402
from monitor.stream.recorder import StreamRecorder  # noqa: E402
from monitor.stream.steps.base import ProcessingStep  # noqa: E402
from monitor.stream.steps.decisions import cheap_cell  # noqa: E402
from monitor.stream.steps.decode import DecodeStep  # noqa: E402
from monitor.stream.steps.redact import RedactStep  # noqa: E402
from monitor.stream.steps.sample import SampleStep  # noqa: E402
from monitor.stream.steps.screen import ScreenStep  # noqa: E402
from monitor.stream.turn_steps import TurnStepsConfig, turn_decisions  # noqa: E402
from tests.monitor.stream.steps.helpers import Recorder, env, raw  # noqa: E402

COPIES = 7


def example_turns() -> list[TurnEvent]:
    lines = (ROOT / "examples" / "turns.jsonl").read_text().splitlines()
    base = [TurnEvent.model_validate_json(line) for line in lines if line.strip()]
    return [
        t.model_copy(
            update={"event_id": f"{t.event_id}-{k}", "conversation_id": f"{t.conversation_id}-{k}"}
        )
        for k in range(COPIES)
        for t in base
    ]


def sampling(share: float | None) -> SamplingConfig:
    """``share`` None: the uniform strategy; else the cascade with that look share."""
    cfg: dict[str, Any] = {"budget_calls_per_hour": None, "budget_usd_per_hour": None}
    if share is not None:
        cfg.update(
            strategy="cascade",
            cascade_target_calls_per_hour=1e4,
            cascade_look_share=share,
            cascade_floor=min(0.01, share),
        )
    return SamplingConfig(**cfg)


def per_turn_us(turns: list[TurnEvent], share: float | None, *, cold: bool = False) -> float:
    """``share`` None: the uniform strategy; else the cascade with that look share."""
    sampler = Sampler(sampling(share), ManualClock())
    step = SampleStep(
        Recorder(),
        Recorder(),
        sampler,
        StreamRecorder(Metrics(CollectorRegistry())),
        tripwire=identifier_tripwire,
        cascade=(sampler, cheap_cell) if share is not None else None,
    )
    per_copy = len(turns) // COPIES
    started = time.process_time()
    for offset, turn in enumerate(turns):
        if cold or offset % per_copy == 0:
            forget_readings()
        step.submit(env(turn, offset=offset))
    step.poll()
    return (time.process_time() - started) / len(turns) * 1e6


def _cpu_s(pids: list[int]) -> float:
    """CPU seconds (user + system) the processes ``pids`` have used (Linux ``/proc``)."""
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    return total / os.sysconf("SC_CLK_TCK")


def chain_per_turn_us(
    turns: list[TurnEvent], share: float | None, processes: int
) -> dict[str, float]:
    """µs per turn through [screen →] decode → redact → sample: the consumer's thread, its
    process and the screening processes' CPU, and the wall time."""
    config = sampling(share)
    steps = TurnStepsConfig(
        concurrency=1,
        max_in_flight=1,
        max_bytes=1 << 20,
        flush_timeout_s=1.0,
        redaction=RedactionConfig(),
        identifier_tripwire=True,
    )
    decisions = turn_decisions(steps, sampling=config)
    metrics = StreamRecorder(Metrics(CollectorRegistry()))
    sampler = Sampler(config, ManualClock())
    drawn, done = Recorder(), Recorder()
    sample = SampleStep(
        drawn,
        done,
        sampler,
        metrics,
        tripwire=decisions.tripwire,
        cascade=(sampler, cheap_cell) if share is not None else None,
    )
    values = [t.model_dump_json().encode() for t in turns]
    per_copy = len(values) // COPIES
    with tempfile.TemporaryDirectory() as tmp:
        sink = FileDeadLetterSink(Path(tmp) / "dlq.jsonl")
        redact = RedactStep(sample, done, decisions, metrics)
        first: ProcessingStep[RawMessage] = DecodeStep(
            redact, done, sink, metrics, steps.max_bytes, decisions=decisions
        )
        screen: ScreenStep | None = None
        if processes:
            screen = ScreenStep(first, done, metrics, processes=processes, decisions=decisions)
            first = screen
        try:
            # Warm: the processes started and one record screened (their imports and the
            # judge's first reading are not per-turn costs).
            first.submit(env(raw(values[0], offset=-1), offset=-1))
            first.join(120)
            pids = list(screen._pool._processes) if screen and screen._pool else []
            started = (time.thread_time(), time.process_time(), _cpu_s(pids), time.monotonic())
            for offset, value in enumerate(values):
                if screen is None and offset % per_copy == 0:
                    forget_readings()  # as per_turn_us: each copy read as new traffic
                message = env(raw(value, offset=offset), offset=offset)
                while True:
                    try:
                        first.submit(message)
                        break
                    except MessageRejected:  # as the daemon's loop: poll, offer again
                        first.poll()
                        if screen is not None:
                            screen.wait_any(0.05)
            first.join(600)
            ended = (time.thread_time(), time.process_time(), _cpu_s(pids), time.monotonic())
            if screen is not None and (screen.fallbacks or screen.disabled):
                # Decided in this process instead (logged): not a figure of screening.
                raise SystemExit(f"a screening process failed ({screen.fallbacks} batches)")
        finally:
            first.close()
            sink.close()
    n = len(values)
    assert len(done.items) + len(drawn.items) == n + 1  # every turn decided, once
    return {
        key: (b - a) / n * 1e6
        for key, a, b in zip(
            ("thread", "process", "screening", "wall"), started, ended, strict=True
        )
    }


def screen_main(processes: int) -> int:
    turns = example_turns()
    cases = [
        (f"{name}, screen_processes {n}", share, n)
        for name, share in (
            ("uniform", None),
            ("cascade, look share 1.0", 1.0),
            ("cascade, look share 0.2", 0.2),
        )
        for n in (0, processes)
    ]
    runs: dict[str, list[dict[str, float]]] = {label: [] for label, _, _ in cases}
    for _ in range(3):  # the cases alternated, so a burst of load falls on all of them
        for label, share, n in cases:
            # Each run starts from a collected heap: a full collection of the turns held is
            # not the luck of one run (it made every other run's figure twice the next).
            gc.collect()
            runs[label].append(chain_per_turn_us(turns, share, n))
    results: dict[str, dict[str, float]] = {}
    for label, _, _ in cases:
        med = {k: statistics.median(r[k] for r in runs[label]) for k in runs[label][0]}
        results[label] = med
        print(
            f"{label}: consumer thread {med['thread']:.0f} us per turn, its process "
            f"{med['process']:.0f}, screening processes {med['screening']:.0f}, "
            f"wall {med['wall']:.0f} (thread in each run: "
            + ", ".join(f"{r['thread']:.0f}" for r in runs[label])
            + ")",
            flush=True,
        )
    print(json.dumps({"screen_processes": processes, "us_per_turn": results}))
    return 0


def main() -> int:
    if "--screen" in sys.argv[1:]:
        args = sys.argv[1:]
        processes = 1
        if "--screen-processes" in args:
            processes = int(args[args.index("--screen-processes") + 1])
        return screen_main(processes)
    cold = "--cold" in sys.argv[1:]
    turns = example_turns()
    uniform = 0.0
    for name, share in (
        ("uniform", None),
        ("cascade, look share 1.0", 1.0),
        ("cascade, look share 0.2", 0.2),
        ("cascade, look share 0.05", 0.05),
    ):
        us = statistics.median(per_turn_us(turns, share, cold=cold) for _ in range(3))
        uniform = uniform or us
        print(
            f"{name}: {us:.0f} us per turn (sample step, tripwire included), "
            f"{us / uniform:.1f} x uniform",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
