"""The "casewatch turns" dashboard: the judged turns behind an alert, read from the SQL store
through Grafana's PostgreSQL data source (the other dashboards read Prometheus).

Variables: ``assistant`` (multi, from the store), ``metric`` (``turn`` for the turn band, or
one of the eight metrics), ``band`` (multi) and the time range; ``event_id`` (a text box) is
set by the data link on the table's event id, which reopens this dashboard on that turn, so
the lower panels show the whole turn and every judgment. The quality alerts of rules/ link here
filtered to their assistant and window (the ``dashboard_url`` annotation in
rules/casewatch.rules.yml, rebased by ``monitor.reports.alert_links``).

Queries follow Grafana's PostgreSQL macros and interpolation: ``$__timeFilter(col)``,
``$__timeFrom()``/``$__timeTo()``, ``$__timeGroupAlias(col, '5m')``; a multi-value variable
becomes a quoted list (``IN ($assistant)``), a single value is inserted as is (``'${metric}'``
is quoted by the query), ``${event_id:sqlstring}`` quotes and escapes a free text.
tests/dashboards/test_turns_dashboard.py expands them the same way and runs every query on a
PostgreSQL holding a live daemon's verdicts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from grafana_foundation_sdk.builders import dashboard as dash_b
from grafana_foundation_sdk.builders import table, timeseries
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.cog import variants as cogvariants
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as dash_m

from monitor.schema.turn import METRICS

UID = "casewatch-turns"
TITLE = "casewatch / Turns"
PG_TYPE = "grafana-postgresql-datasource"  # Grafana >= 10.3's id of its PostgreSQL plugin
DATASOURCE = dash_m.DataSourceRef(type_val=PG_TYPE, uid="${datasource}")
BANDS = ("severe", "moderate", "minor", "none")

# A turn with its newest verdict only (the current judge configuration's).
_NEWEST = "NOT EXISTS (SELECT 1 FROM verdicts n WHERE n.event_id = v.event_id AND n.id > v.id)"
_BAND_OF = (
    "(CASE WHEN '${metric}' = 'turn' THEN v.turn_band ELSE v.metric_bands ->> '${metric}' END)"
)

# Grafana query templates (S608: Grafana interpolates them; casewatch never runs them).
TURNS_SQL = f"""SELECT t.event_timestamp AS "time", t.event_id, t.assistant_name AS assistant,
  v.turn_band, round(v.s_final::numeric, 3) AS s_final,
  w.metric, w.band, round(w.score::numeric, 2) AS score, w.justification
FROM turns t
JOIN verdicts v ON v.event_id = t.event_id
LEFT JOIN LATERAL (
  SELECT m.key AS metric, v.metric_bands ->> m.key AS band, m.value::float8 AS score,
    j.scores -> m.key ->> 'justification' AS justification
  FROM jsonb_each_text(v.metric_scores) m
  JOIN judgments j ON j.verdict_id = v.id AND j.scores IS NOT NULL
  WHERE '${{metric}}' = 'turn' OR m.key = '${{metric}}'
  ORDER BY m.value::float8, (j.scores -> m.key ->> 'score')::float8, j.id
  LIMIT 1
) w ON true
WHERE $__timeFilter(t.event_timestamp)
  AND t.assistant_name IN ($assistant)
  AND v.status = 'ok'
  AND {_BAND_OF} IN ($band)
  AND {_NEWEST}
ORDER BY t.event_timestamp DESC
LIMIT 500"""  # noqa: S608

COUNTS_SQL = """SELECT assistant, count(*) AS judged,
  sum(CASE WHEN turn_band = 'severe' THEN 1 ELSE 0 END) AS severe,
  sum(CASE WHEN status = 'judge_failed' THEN 1 ELSE 0 END) AS judge_failed,
  round(avg(s_final)::numeric, 3) AS mean_s_final
FROM turn_verdicts
WHERE event_time BETWEEN $__timeFrom() AND $__timeTo()
  AND assistant IN ($assistant)
GROUP BY assistant
ORDER BY assistant"""

# Each judged turn weighs 1/its inclusion probability (Hajek's ratio, as the Prometheus
# dashboards and rules/ weigh theirs): under sampling.strategy: cascade the share is the
# traffic's; a turn drawn uniformly stores no probability and weighs 1, so there it is the
# plain share of the judged turns.
_WEIGHT = "1.0 / coalesce(t.inclusion_probability, 1.0)"
SHARE_SQL = f"""SELECT $__timeGroupAlias(t.event_timestamp, '5m'),
  t.assistant_name AS metric,
  sum(CASE WHEN {_BAND_OF} IN ($band) THEN {_WEIGHT} ELSE 0.0 END) / sum({_WEIGHT}) AS share
FROM turns t
JOIN verdicts v ON v.event_id = t.event_id
WHERE $__timeFilter(t.event_timestamp)
  AND t.assistant_name IN ($assistant)
  AND v.status = 'ok'
  AND {_NEWEST}
GROUP BY 1, 2
ORDER BY 1"""  # noqa: S608

# The failure modes of the newest run per assistant active in range and unit (the turns'
# modes, then the cases' where a case run exists), largest first; an assistant without modes
# shows the run's note instead (too few failed turns, or not run yet).
FAILURE_MODES_SQL = """SELECT a.assistant, u.unit, coalesce(f.mode_id, '-') AS mode_id,
  coalesce(f.label, r.note, 'not grouped yet (the failure-modes job has not run)') AS label,
  f.size, round(f.share::numeric, 3) AS share, round(f.trend::numeric, 3) AS trend,
  CASE WHEN f.new THEN 'new' WHEN f.growing THEN 'growing' ELSE '' END AS emerging,
  f.metrics::text AS metrics, f.first_seen, r.run_at AS grouped_at
FROM (SELECT DISTINCT assistant_name AS assistant FROM turns
      WHERE $__timeFilter(event_timestamp) AND assistant_name IN ($assistant)) a
CROSS JOIN (VALUES ('turn'), ('case')) AS u(unit)
LEFT JOIN LATERAL (
  SELECT fr.run_at, fr.note FROM failure_mode_runs fr
  WHERE fr.assistant = a.assistant AND fr.unit = u.unit ORDER BY fr.id DESC LIMIT 1
) r ON true
LEFT JOIN failure_modes f ON f.assistant = a.assistant AND f.unit = u.unit AND f.present
WHERE u.unit = 'turn' OR r.run_at IS NOT NULL
ORDER BY a.assistant, u.unit DESC, f.size DESC NULLS LAST, f.mode_id
LIMIT 200"""

TURN_SQL = """SELECT t.event_id, t.assistant_name AS assistant, t.event_timestamp AS "time",
  t.conversation_id, t.turn_index,
  t.event -> 'case' ->> 'subject' AS case_subject,
  t.event -> 'case' ->> 'description' AS case_description,
  t.event ->> 'query' AS query,
  t.event ->> 'answer' AS answer,
  v.status, v.failure_reason, v.turn_band, round(v.s_final::numeric, 3) AS s_final,
  v.arbitrated, v.arbitration_trigger
FROM turns t
LEFT JOIN verdicts v ON v.event_id = t.event_id
  AND NOT EXISTS (SELECT 1 FROM verdicts n WHERE n.event_id = v.event_id AND n.id > v.id)
WHERE t.event_id = ${event_id:sqlstring}"""

CONTEXTS_SQL = """SELECT c.ordinality AS "#", c.value ->> 'id' AS id,
  (c.value ->> 'score')::float8 AS retrieval_score, c.value ->> 'source' AS source,
  c.value ->> 'text' AS text
FROM turns t
CROSS JOIN LATERAL jsonb_array_elements(t.event -> 'contexts') WITH ORDINALITY AS c(value)
WHERE t.event_id = ${event_id:sqlstring}
UNION ALL
SELECT 0, 'history', NULL, h.value ->> 'role', h.value ->> 'content'
FROM turns t
CROSS JOIN LATERAL jsonb_array_elements(t.event -> 'history') AS h(value)
WHERE t.event_id = ${event_id:sqlstring}
ORDER BY 1"""

JUDGMENTS_SQL = """SELECT j.judge, j.role, j.model, j.status, m.key AS metric,
  round((m.value ->> 'score')::numeric, 2) AS score, m.value ->> 'justification' AS justification,
  j.failure_reason, j.attempts, j.input_tokens + j.output_tokens AS tokens,
  round(j.cost_usd::numeric, 5) AS cost_usd, round(j.latency_seconds::numeric, 2) AS latency_s
FROM verdicts v
JOIN judgments j ON j.verdict_id = v.id
LEFT JOIN LATERAL jsonb_each(j.scores) m ON true
WHERE v.event_id = ${event_id:sqlstring}
  AND NOT EXISTS (SELECT 1 FROM verdicts n WHERE n.event_id = v.event_id AND n.id > v.id)
ORDER BY m.key, j.id"""

# The data link of the event id column: this dashboard again, same filters and time range,
# with the clicked turn selected.
TURN_LINK = (
    f"/d/{UID}/casewatch-turns?${{__url_time_range}}&${{assistant:queryparam}}"
    "&var-metric=${metric}&${band:queryparam}&var-event_id=${__value.raw}"
)


@dataclass(frozen=True)
class SqlPanel:
    kind: str  # table | timeseries
    title: str
    description: str
    sql: str
    fmt: str = "table"  # or time_series
    height: int = 8
    width: int = 24


PANELS: tuple[SqlPanel, ...] = (
    SqlPanel(
        "table",
        "Judged turns in range",
        "Per assistant: judged turns, severe turns, "
        "judge failures and the mean S_final over the dashboard's time range.",
        COUNTS_SQL,
        height=5,
    ),
    SqlPanel(
        "table",
        "Failure modes (newest run)",
        "Per assistant: the recurring causes the failure-modes job found among the failed "
        "(severe and moderate) turns of its window, largest first, with their share, trend "
        "(recent share minus earlier share), whether new or growing, and the failing metrics. "
        "Their turns: `casewatch inspect failure MODE_ID`.",
        FAILURE_MODES_SQL,
        height=7,
    ),
    SqlPanel(
        "timeseries",
        "Share of turns in the chosen band(s)",
        "Per assistant and 5 minutes: "
        "the share of judged turns whose band (of the chosen metric, or the turn) is one "
        "of the chosen bands, each weighted by 1/its inclusion probability "
        "(sampling.strategy: cascade; 1 under uniform sampling): the traffic's share.",
        SHARE_SQL,
        fmt="time_series",
    ),
    SqlPanel(
        "table",
        "Matching turns (click an event id for the whole turn)",
        "Judged turns whose band (of the chosen metric, or the turn band for 'turn') is "
        "one of the chosen bands, newest first, with the metric behind it (for 'turn', the "
        "lowest-scored one) and the justification of the judge that scored it lowest.",
        TURNS_SQL,
        height=12,
    ),
    SqlPanel(
        "table",
        "Selected turn",
        "The turn chosen in the table above (variable "
        "event_id): case, query, answer and its verdict.",
        TURN_SQL,
        height=6,
    ),
    SqlPanel(
        "table",
        "Selected turn: history and contexts",
        "The conversation before the "
        "turn (#0 rows, role in 'source') and the retrieved contexts with their scores.",
        CONTEXTS_SQL,
    ),
    SqlPanel(
        "table",
        "Selected turn: every judgment",
        "Every judge's score and justification "
        "per metric (primaries and, when they disagreed, the arbiter), with failures, "
        "attempts, tokens, cost and latency.",
        JUDGMENTS_SQL,
        height=14,
    ),
)


class _SqlTarget(cogvariants.Dataquery):
    def __init__(self, ref_id: str, sql: str, fmt: str) -> None:
        self.ref_id, self.sql, self.fmt = ref_id, sql, fmt

    def to_json(self) -> dict[str, Any]:
        return {
            "refId": self.ref_id,
            "datasource": {"type": PG_TYPE, "uid": "${datasource}"},
            "editorMode": "code",
            "format": self.fmt,
            "rawQuery": True,
            "rawSql": self.sql,
        }


class SqlQuery(cogbuilder.Builder[cogvariants.Dataquery]):
    """A raw-SQL target of Grafana's PostgreSQL data source (the SDK has no builder for it)."""

    def __init__(self, ref_id: str, sql: str, fmt: str) -> None:
        self._target = _SqlTarget(ref_id, sql, fmt)

    def build(self) -> cogvariants.Dataquery:
        return self._target


def _link_override() -> dash_m.DynamicConfigValue:
    link = {"title": "Show this turn", "url": TURN_LINK}
    return dash_m.DynamicConfigValue(id_val="links", value=[link])


def _panel(spec: SqlPanel, panel_id: int) -> Any:
    builder: Any = table.Panel() if spec.kind == "table" else timeseries.Panel()
    builder = (
        builder.id(panel_id)
        .title(spec.title)
        .description(spec.description)
        .datasource(DATASOURCE)
        .height(spec.height)
        .span(spec.width)
        .with_target(SqlQuery("A", spec.sql, spec.fmt))
    )
    if spec.sql is TURNS_SQL:
        builder = builder.override_by_name("event_id", [_link_override()])
    if spec.kind == "timeseries":
        builder = builder.unit("percentunit").min(0).max(1)
    return builder


def _variables() -> list[Any]:
    assistants = (
        dash_b.QueryVariable("assistant")
        .label("Assistant")
        .datasource(DATASOURCE)
        .query("SELECT DISTINCT assistant_name FROM turns ORDER BY 1")
        .refresh(dash_m.VariableRefresh.ON_DASHBOARD_LOAD)
        .multi(True)
        .include_all(True)
        .current(dash_m.VariableOption(text="All", value="$__all", selected=True))
    )
    metric = (
        dash_b.CustomVariable("metric")
        .label("Metric (turn: the turn band)")
        .values(",".join(("turn", *METRICS)))
        .current(dash_m.VariableOption(text="turn", value="turn", selected=True))
    )
    band = (
        dash_b.CustomVariable("band")
        .label("Band")
        .values(",".join(BANDS))
        .multi(True)
        .include_all(True)
        .current(dash_m.VariableOption(text="severe", value=["severe"], selected=True))
    )
    event = dash_b.TextBoxVariable("event_id").label("Event id (click one in the table)")
    return [assistants, metric, band, event]


def build() -> dict[str, Any]:
    builder = (
        dash_b.Dashboard(TITLE)
        .uid(UID)
        .description(
            "The judged turns behind an alert, from the SQL store: filter by "
            "assistant, metric, band and time; click an event id for the whole turn "
            "and every judgment."
        )
        .tags(["casewatch"])
        .timezone("utc")
        .time("now-6h", "now")
        .link(
            dash_b.DashboardLink("casewatch")
            .type(dash_m.DashboardLinkType.DASHBOARDS)
            .tags(["casewatch"])
            .as_dropdown(True)
            .keep_time(True)
        )
        .with_variable(
            dash_b.DatasourceVariable("datasource")
            .label("Data source (PostgreSQL: storage.url)")
            .type(PG_TYPE)
            .current(dash_m.VariableOption(text="default", value="default", selected=True))
        )
    )
    for var in _variables():
        builder = builder.with_variable(var)
    builder = builder.with_row(dash_b.Row("Turns").id(1))
    for n, spec in enumerate(PANELS, start=2):
        if spec.sql is TURN_SQL:
            builder = builder.with_row(dash_b.Row("The selected turn").id(len(PANELS) + 2))
        builder = builder.with_panel(_panel(spec, n))
    encoded: dict[str, Any] = json.loads(json.dumps(builder.build(), cls=JSONEncoder))
    return encoded


def render() -> str:
    return json.dumps(build(), indent=2, sort_keys=True) + "\n"
