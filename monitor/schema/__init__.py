"""What casewatch reads and writes, as pydantic models (pure): the turn event and its verdicts,
cases and their verdicts, outcome events, and the mapping from a team's own JSON shape."""
