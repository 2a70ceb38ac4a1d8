"""``casewatch judge``: a JSONL file of turn events judged through the daemon's own steps.

A file source (``consumers.file_source``) feeds the chain ``monitor.stream.turn_steps`` builds
for one turn: decode → [redact] → sample (every turn once: ``judge_all``) → look-up (turns the
granular file already holds under this judge configuration) → judge → store (the granular
and compact files, ``verdict_files``), with the rejects file as the dead-letter sink
(``rejects``). ``runner`` drives it; ``summary`` and ``recorder`` count what happened.
"""
