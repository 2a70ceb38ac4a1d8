"""The four dashboards ``generate.py`` writes, in the order docs/dashboards.md lists them."""

from __future__ import annotations

from dashboards.model import DashboardSpec
from dashboards.operations import JUDGES, PIPELINE
from dashboards.quality import METRICS, OVERVIEW

DASHBOARDS: tuple[DashboardSpec, ...] = (OVERVIEW, METRICS, JUDGES, PIPELINE)
