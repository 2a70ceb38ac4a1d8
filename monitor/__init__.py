"""casewatch: production monitoring for RAG support assistants."""

__version__ = "0.1.0"
