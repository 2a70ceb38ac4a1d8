"""Judge prompt construction (placeholder version marker; built out with the OpenAI judge)."""

PROMPT_VERSION = "case-aware-v1"
