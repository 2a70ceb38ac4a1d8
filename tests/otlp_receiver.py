"""A real OTLP/HTTP logs receiver for tests: POST /v1/logs with an ExportLogsServiceRequest
(protobuf), decoded with the official message classes, kept for assertions."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)

from consumers.otel.otlp import attributes


@dataclass(frozen=True)
class ReceivedRecord:
    event_name: str
    trace_id: str
    span_id: str
    attributes: dict[str, Any]
    resource: dict[str, Any]


@dataclass
class Receiver:
    url: str
    records: list[ReceivedRecord] = field(default_factory=list)
    requests: int = 0
    cond: threading.Condition = field(default_factory=threading.Condition)

    def wait_for(self, count: int, timeout: float = 60.0) -> list[ReceivedRecord]:
        with self.cond:
            self.cond.wait_for(lambda: len(self.records) >= count, timeout)
            return list(self.records)


@contextmanager
def otlp_receiver() -> Iterator[Receiver]:
    receiver: Receiver

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.path != "/v1/logs":
                self.send_error(404)
                return
            request = ExportLogsServiceRequest()
            request.ParseFromString(body)
            got = []
            for resource_logs in request.resource_logs:
                resource = attributes(resource_logs.resource.attributes)
                for scope_logs in resource_logs.scope_logs:
                    for rec in scope_logs.log_records:
                        got.append(
                            ReceivedRecord(
                                rec.event_name,
                                rec.trace_id.hex(),
                                rec.span_id.hex(),
                                attributes(rec.attributes),
                                resource,
                            )
                        )
            with receiver.cond:
                receiver.records.extend(got)
                receiver.requests += 1
                receiver.cond.notify_all()
            payload = ExportLogsServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver = Receiver(f"http://127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
