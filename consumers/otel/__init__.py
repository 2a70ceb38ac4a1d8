"""OpenTelemetry intake: OTLP span batches (as the Collector's Kafka exporter writes them) and
any JSON event shape by a declarative mapping, turned into turn events."""
