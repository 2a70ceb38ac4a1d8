"""The Prometheus side: every series casewatch exports, its HTTP server, and the fast
``/metrics`` body."""
