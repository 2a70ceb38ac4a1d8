"""What test modules share that is not a fixture: waiting on a condition (``waiting``), a
component that cannot run here (``components``), the daemon in a thread (``daemon``) or as
``casewatch run`` (``daemon_process``), the broker side of a Kafka test (``kafka``), a local
HTTP GET (``http``), turns as JSON lines files (``turn_lines``) and an instrumented RAG
program's traces (``rag_traces``).

Test modules import from here (and from tests/fixtures/), never from one another
(tests/test_test_modules.py).
"""
