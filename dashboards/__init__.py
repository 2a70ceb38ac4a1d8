"""casewatch's Grafana dashboards: the JSON files users import, and their generator
(``python -m dashboards.generate``; see generate.py)."""
