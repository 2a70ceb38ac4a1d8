from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from consumers.file_source import FILE_TP, FileTurnSource
from consumers.records import RawMessage, TopicPartition
from monitor.errors import ConfigError
from tests.consumers.turns import turn_bytes


def write_lines(path: Path, lines: list[bytes], mode: str = "wb") -> None:
    with path.open(mode) as fh:
        fh.write(b"".join(line + b"\n" for line in lines))


def drain(source: FileTurnSource, max_records: int = 100) -> list[RawMessage]:
    out: list[RawMessage] = []
    while batch := source.poll(0.0, max_records):
        out += batch
    return out


@pytest.fixture
def turns_file(tmp_path: Path) -> Path:
    path = tmp_path / "turns.jsonl"
    write_lines(path, [turn_bytes(f"e{i}") for i in range(5)])
    return path


def test_reads_lines_as_messages_numbered_from_zero(turns_file: Path) -> None:
    source = FileTurnSource(turns_file)
    try:
        first = source.poll(0.1, 2)
        rest = drain(source)
        messages = first + rest
        assert [m.offset for m in messages] == [0, 1, 2, 3, 4]
        assert len(first) == 2
        assert all(m.tp == FILE_TP == TopicPartition("file", 0) for m in messages)
        assert json.loads(messages[3].value or b"")["event_id"] == "e3"
        assert source.exhausted
        assert source.poll(0.0, 10) == []
    finally:
        source.close()


def test_blank_lines_keep_their_number_and_last_line_needs_no_newline(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"a\n\n  \r\nb\r\nc")
    source = FileTurnSource(path)
    try:
        assert [(m.offset, m.value) for m in drain(source)] == [(0, b"a"), (3, b"b"), (4, b"c")]
    finally:
        source.close()


def test_commit_persists_and_a_restart_resumes(turns_file: Path, tmp_path: Path) -> None:
    offsets = tmp_path / "state" / "turns.offsets.json"
    offsets.parent.mkdir()
    source = FileTurnSource(turns_file, offsets_path=offsets)
    try:
        assert len(source.poll(0.0, 3)) == 3
        source.commit({FILE_TP: 2})
        source.commit({FILE_TP: 1})  # never moves back
    finally:
        source.close()
    assert json.loads(offsets.read_text())["offset"] == 2
    assert [p.name for p in offsets.parent.iterdir()] == ["turns.offsets.json"]  # no temp left

    again = FileTurnSource(turns_file, offsets_path=offsets)
    try:
        assert again.committed == 2
        assert again.resume_note() == (
            f"resuming at line 2 of 5 from {turns_file}; 3 new; delete {offsets} to start over"
        )
        assert [m.offset for m in drain(again)] == [2, 3, 4]
    finally:
        again.close()


def test_corrupt_offsets_file_is_a_config_error(turns_file: Path, tmp_path: Path) -> None:
    offsets = tmp_path / "o.json"
    offsets.write_text("{torn")
    with pytest.raises(ConfigError, match="delete it"):
        FileTurnSource(turns_file, offsets_path=offsets)


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read input file"):
        FileTurnSource(tmp_path / "nope.jsonl")


def test_pause_stops_delivery_and_resume_restarts_it(turns_file: Path) -> None:
    source = FileTurnSource(turns_file)
    try:
        source.pause([FILE_TP])
        assert source.paused() == {FILE_TP}
        assert source.poll(0.01, 10) == []
        source.resume([FILE_TP])
        assert source.paused() == set()
        assert len(drain(source)) == 5
    finally:
        source.close()


def test_follow_sees_appended_lines_only_once_complete(turns_file: Path) -> None:
    source = FileTurnSource(turns_file, follow=True)
    try:
        assert len(drain(source)) == 5
        assert source.poll(0.05, 10) == []
        assert not source.exhausted
        with turns_file.open("ab") as fh:
            fh.write(turn_bytes("e5") + b"\n" + b'{"half": ')
        assert [m.offset for m in source.poll(1.0, 10)] == [5]
        assert source.poll(0.05, 10) == []  # the half-written line waits for its newline
        with turns_file.open("ab") as fh:
            fh.write(b'"line"}\n')
        assert [(m.offset, m.value) for m in source.poll(1.0, 10)] == [(6, b'{"half": "line"}')]
    finally:
        source.close()


def test_rebalance_callbacks_announce_the_single_partition(turns_file: Path) -> None:
    events: list[tuple[str, set[TopicPartition]]] = []
    source = FileTurnSource(turns_file)
    source.set_rebalance_listener(
        lambda tps: events.append(("assigned", tps)), lambda tps: events.append(("revoked", tps))
    )
    source.poll(0.0, 1)
    assert source.assignment() == {FILE_TP}
    assert source.ping()
    source.close()
    source.close()
    assert events == [("assigned", {FILE_TP}), ("revoked", {FILE_TP})]
    assert not source.ping()


def test_stdin(tmp_path: Path) -> None:
    script = (
        "from consumers.file_source import FileTurnSource\n"
        "s = FileTurnSource(None)\n"
        "got = []\n"
        "while not s.exhausted:\n"
        "    got += [m.value.decode() for m in s.poll(1.0, 10)]\n"
        "s.close()\n"
        "print(','.join(got))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        input=b"one\ntwo\n\nthree",
        capture_output=True,
        timeout=30,
        check=True,
        cwd=Path(__file__).parents[2],
        env={**os.environ, "PYTHONWARNINGS": "error"},
    )
    assert result.stdout.decode().strip() == "one,two,three"


def test_a_fresh_start_has_nothing_to_say_and_a_finished_file_says_nothing_new(
    turns_file: Path, tmp_path: Path
) -> None:
    offsets = tmp_path / "turns.offsets.json"
    source = FileTurnSource(turns_file, offsets_path=offsets)
    try:
        assert source.resume_note() is None
        source.commit({FILE_TP: 5})
    finally:
        source.close()
    again = FileTurnSource(turns_file, offsets_path=offsets)
    try:
        assert again.resume_note() == (
            f"resuming at line 5 of 5 from {turns_file}; nothing new; "
            f"delete {offsets} to start over"
        )
    finally:
        again.close()


def test_base64_lines_deliver_the_binary_messages_they_encode(tmp_path: Path) -> None:
    """otlp_proto in a file: protobuf bytes hold newlines, so each line is one message in
    base64; a line that is not base64 reaches the decoder as it is, to be refused with its
    reason."""
    messages = [b"\n\x01binary\nwith newlines\x00", b"\xff\xfe"]
    path = tmp_path / "p.b64"
    write_lines(path, [base64.b64encode(m) for m in messages] + [b'{"resourceSpans": []}'])
    source = FileTurnSource(path, base64_lines=True)
    try:
        got = drain(source)
    finally:
        source.close()
    assert [m.value for m in got] == [*messages, b'{"resourceSpans": []}']
    assert [m.offset for m in got] == [0, 1, 2]
