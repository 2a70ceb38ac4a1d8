"""Traces of a real instrumented RAG program (``tests/consumers/otel/rag_app.py``, in a
process of its own), as the Collector's Kafka exporter writes them, and the questions asked.

The first question carries personal data (``EMAIL``) that must never leave casewatch unredacted.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

EMAIL = "Maria.Garcia@contoso-mail.com"
ANSWER = "Hold the reset button for ten seconds, then wait for the green light."
QUESTIONS: list[dict[str, Any]] = [
    {
        "conversation": "conv-router",
        "subject": "Router offline",
        "query": f"How do I reset my router? Write to {EMAIL}.",
        "docs": [
            {"id": "kb-1", "score": 0.92, "content": "Router reset: hold the button 10 s."},
            {"id": "kb-2", "score": 0.31, "content": "Warranty covers two years."},
        ],
    },
    {
        "conversation": "conv-vpn",
        "subject": "VPN drops",
        "query": "Why does my VPN drop every hour?",
        "history": [
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": "Hi, how can I help?"},
        ],
        "docs": [{"id": "kb-7", "score": 0.8, "content": "VPN client 4.2 fixes hourly drops."}],
    },
]


def rag_traces(
    tmp_path: Path,
    family: str,
    base_url: str,
    encoding: str,
    questions: list[dict[str, Any]],
    capture: str | None,
) -> list[tuple[bytes, bytes]]:
    """Run the RAG program on ``questions`` (instrumentation ``family``, content capture
    ``capture``, None: off) against the model at ``base_url``: the (key, value) Kafka records
    of its traces, ``encoding`` as the Collector's Kafka exporter writes them."""
    path = tmp_path / f"questions-{family}-{capture}.json"
    path.write_text(json.dumps(questions))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OPENINFERENCE_"))}
    env["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
    if capture is not None:
        env["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = capture
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.consumers.otel.rag_app",
            "--family",
            family,
            "--base-url",
            base_url,
            "--encoding",
            encoding,
            "--questions",
            str(path),
        ],
        capture_output=True,
        check=True,
        env=env,
        timeout=120,
    )
    lines = [json.loads(line) for line in out.stdout.decode().splitlines() if line]
    return [(line["key"].encode(), base64.b64decode(line["value"])) for line in lines]
