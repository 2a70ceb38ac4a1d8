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
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # bench/ is not an installed package

from prometheus_client import CollectorRegistry  # noqa: E402

from monitor.config.sampling import SamplingConfig  # noqa: E402
from monitor.judging.heuristic.tokens import forget_readings  # noqa: E402
from monitor.judging.heuristic.tripwire import identifier_tripwire  # noqa: E402
from monitor.metrics.exporter import Metrics  # noqa: E402
from monitor.runtime.clock import ManualClock  # noqa: E402
from monitor.sampling.sampler import Sampler  # noqa: E402
from monitor.schema.turn import TurnEvent  # noqa: E402
from monitor.stream.recorder import StreamRecorder  # noqa: E402
from monitor.stream.steps.decisions import cheap_cell  # noqa: E402
from monitor.stream.steps.sample import SampleStep  # noqa: E402
from tests.monitor.stream.steps.helpers import Recorder, env  # noqa: E402

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


def per_turn_us(turns: list[TurnEvent], share: float | None, *, cold: bool = False) -> float:
    """``share`` None: the uniform strategy; else the cascade with that look share."""
    cfg: dict[str, Any] = {"budget_calls_per_hour": None, "budget_usd_per_hour": None}
    if share is not None:
        cfg.update(
            strategy="cascade",
            cascade_target_calls_per_hour=1e4,
            cascade_look_share=share,
            cascade_floor=min(0.01, share),
        )
    sampler = Sampler(SamplingConfig(**cfg), ManualClock())
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


def main() -> int:
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
