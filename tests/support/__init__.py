"""What test modules share that is not a fixture: waiting on a condition (``waiting``), a
component that cannot run here (``components``), the daemon under test (``daemon``).

Test modules import from here (and from tests/fixtures/), never from one another.
"""
