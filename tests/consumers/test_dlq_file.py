from __future__ import annotations

import json
from pathlib import Path

from consumers.dlq import MAX_DETAIL_CHARS, FileDeadLetterSink, decode_file_value
from consumers.records import RawMessage


def test_records_carry_reason_position_and_original_bytes(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "turns.dlq.jsonl"
    sink = FileDeadLetterSink(path)
    try:
        sink.send(RawMessage("file", 0, 3, b'{"a": "\xc3\xa9"'), "not_json", "EOF at col 9")
        sink.send(RawMessage("file", 0, 4, b"\xff\xfe", key=b"k"), "bad_utf8", "x" * 2000)
        sink.send(RawMessage("file", 0, 5, None), "empty", "")
        sink.flush(1.0)
    finally:
        sink.close()
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [(r["offset"], r["reason"]) for r in records] == [
        (3, "not_json"),
        (4, "bad_utf8"),
        (5, "empty"),
    ]
    assert records[0]["value"] == '{"a": "é"' and records[0]["value_encoding"] == "utf-8"
    assert records[1]["value_encoding"] == "base64"
    assert decode_file_value(records[1]) == b"\xff\xfe"
    assert decode_file_value(records[1], "key") == b"k"
    assert decode_file_value(records[0]) == '{"a": "é"'.encode()
    assert decode_file_value(records[2]) is None
    assert len(records[1]["detail"]) == MAX_DETAIL_CHARS
    assert {"topic", "partition", "offset", "reason", "detail", "value"} <= set(records[0])


def test_appends_across_restarts(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    for offset in (1, 2):
        sink = FileDeadLetterSink(path)
        sink.send(RawMessage("file", 0, offset, b"x"), "not_json", "")
        sink.close()
    assert len(path.read_text().splitlines()) == 2
