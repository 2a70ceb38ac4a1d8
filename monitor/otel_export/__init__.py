"""Verdicts written back as OpenTelemetry: ``gen_ai.evaluation.result`` log records on the
evaluated span (``records``: pure), sent by the official SDK's OTLP/HTTP log exporter
(``sender``)."""
