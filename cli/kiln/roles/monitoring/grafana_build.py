"""Kiln's dashboards (kiln.roles.monitoring.dashboards) through Grafana's foundation SDK:
its typed builders write the dashboard JSON, so every field name and enum value is
Grafana's own schema's, not Kiln's spelling of it. Imported only when dashboards are
built (kiln --help stays fast)."""

import json
from typing import Any

from grafana_foundation_sdk.builders import common as gcommon
from grafana_foundation_sdk.builders import dashboard as gdash
from grafana_foundation_sdk.builders import prometheus, stat, table, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as cm
from grafana_foundation_sdk.models import dashboard as dm
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

from kiln.roles.monitoring.dashboard_panels import (
    NODE_VALUES,
    WIDTH,
    Dashboard,
    Panel,
    panel_title,
)
from kiln.roles.monitoring.panel_display import Display, display
from kiln.roles.monitoring.queries import query

# Every panel and target reads the dashboard's `datasource` variable.
DATASOURCE = dm.DataSourceRef(type_val="prometheus", uid="${datasource}")
_BUILDERS = {"timeseries": timeseries.Panel, "stat": stat.Panel, "table": table.Panel}


def _target(name: str, ref: str, panel: Panel, text_label: str) -> prometheus.Dataquery:
    q = query(name)
    target = prometheus.Dataquery().datasource(DATASOURCE).ref_id(ref).expr(q.expr)
    if panel.kind != "timeseries":  # a stat or a table shows the value now
        target = target.instant()
    if panel.kind == "table" or text_label:  # each series a row, its labels columns
        target = target.format(PromQueryFormat.TABLE)
    if q.legend:
        target = target.legend_format(q.legend)
    return target


def _thresholds(shown: Display) -> gdash.ThresholdsConfig:
    steps = [
        dm.Threshold(value=None, color=step) if isinstance(step, str)
        else dm.Threshold(value=step[0], color=step[1])
        for step in shown.thresholds
    ]  # fmt: skip
    return gdash.ThresholdsConfig().mode(dm.ThresholdsMode.ABSOLUTE).steps(steps)


def _mappings(shown: Display) -> list[Any]:
    found: list[Any] = []
    if shown.mappings:
        found.append(
            dm.ValueMap(
                options={
                    str(value): dm.ValueMappingResult(text=text, color=colour, index=i)
                    for i, (value, text, colour) in enumerate(shown.mappings)
                }
            )
        )
    # Colour only: the text stays the value itself (Slurm's state as it printed it).
    for i, (pattern, colour) in enumerate(shown.patterns, len(found)):
        result = dm.ValueMappingResult(color=colour, index=i)
        found.append(dm.RegexMap(options=dm.DashboardRegexMapOptions(pattern, result)))
    return found


def _panel(number: int, panel: Panel, x: int, y: int) -> Any:
    first = query(panel.queries[0])
    shown = display(panel.queries[0])
    refs = [chr(ord("A") + i) for i in range(len(panel.queries))]
    built = (
        _BUILDERS[panel.kind]()
        .id(number)
        .title(panel_title(panel))
        .description(_description(panel))
        .datasource(DATASOURCE)
        .grid_pos(dm.GridPos(h=panel.height, w=panel.width, x=x, y=y))
        .unit(first.unit)
        .targets([_target(n, r, panel, shown.text_label) for n, r in zip(panel.queries, refs,
                                                                          strict=True)])
    )  # fmt: skip
    if shown.thresholds:
        built = built.thresholds(_thresholds(shown)).color_scheme(
            gdash.FieldColor().mode(dm.FieldColorModeId.THRESHOLDS)
        )
    if mappings := _mappings(shown):
        built = built.mappings(mappings)
    if shown.low is not None:
        built = built.min(shown.low)
    if shown.high is not None:
        built = built.max(shown.high)
    if panel.kind == "stat":
        built = _stat_options(built, shown)
    elif panel.kind == "timeseries":
        built = built.legend(
            gcommon.VizLegendOptions()
            .display_mode(cm.LegendDisplayMode.LIST)
            .placement(cm.LegendPlacement.BOTTOM)
            .show_legend(True)
        )
        if shown.thresholds:  # the threshold drawn as a dashed line
            built = built.thresholds_style(
                gcommon.GraphThresholdsStyleConfig().mode(cm.GraphThresholdsStyleMode.DASHED)
            )
    return built


def _stat_options(built: stat.Panel, shown: Display) -> stat.Panel:
    built = built.graph_mode(cm.BigValueGraphMode.NONE).color_mode(
        cm.BigValueColorMode.BACKGROUND if shown.thresholds or shown.patterns
        else cm.BigValueColorMode.NONE
    )  # fmt: skip
    if shown.text_label:  # the label's text is the value shown, one per series
        return built.text_mode(cm.BigValueTextMode.VALUE).reduce_options(
            gcommon.ReduceDataOptions()
            .values(True)
            .calcs(["lastNotNull"])
            .fields(f"/^{shown.text_label}$/")
        )
    return built.reduce_options(gcommon.ReduceDataOptions().values(False).calcs(["lastNotNull"]))


def _description(panel: Panel) -> str:
    """The PromQL behind each query: what a reader checks the numbers against."""
    return "\n".join(f"{query(n).title}: {query(n).expr}" for n in panel.queries)


def _variables(dashboard: Dashboard, datasource_uid: str) -> list[Any]:
    many = not dashboard.one_node
    node = (
        gdash.QueryVariable("node")
        .label("Node")
        .datasource(DATASOURCE)
        .query(NODE_VALUES)
        .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED)  # nodes come and go
        .sort(dm.VariableSort.ALPHABETICAL_ASC)
        .multi(many)
        .include_all(many)
    )
    if many:
        node = node.all_value(".+").current(dm.VariableOption(text="All", value="$__all"))
    current = dm.VariableOption(text=datasource_uid, value=datasource_uid)
    return [
        gdash.DatasourceVariable("datasource").label("Prometheus").type("prometheus")
        .current(current),
        node,
    ]  # fmt: skip


def _built_in_annotations() -> gdash.AnnotationQuery:
    """Grafana's own "Annotations & Alerts", as a new dashboard has it."""
    return (
        gdash.AnnotationQuery()
        .name("Annotations & Alerts")
        .datasource(dm.DataSourceRef(type_val="grafana", uid="-- Grafana --"))
        .enable(True)
        .hide(True)
        .icon_color("rgba(0, 211, 255, 1)")
        .type("dashboard")
        .built_in(1)
    )


def dashboard(model: Dashboard, datasource_uid: str) -> dict:
    """Grafana's dashboard JSON model of MODEL, panels placed left to right, a new row
    where the next one does not fit."""
    built = (
        gdash.Dashboard(model.title)
        .uid(model.uid)
        .description(model.description)
        .tags(["kiln"])
        .readonly()  # provisioned: a change belongs in kiln.roles.monitoring.dashboards
        .tooltip(dm.DashboardCursorSync.CROSSHAIR)
        .refresh("1m")
        .time("now-6h", "now")
        .timezone("browser")
        .version(1)
        .annotation(_built_in_annotations())
        .variables(_variables(model, datasource_uid))
    )
    x = y = row_height = 0
    for number, panel in enumerate(model.panels, 1):
        if x + panel.width > WIDTH:
            x, y, row_height = 0, y + row_height, 0
        built = built.with_panel(_panel(number, panel, x, y))
        x += panel.width
        row_height = max(row_height, panel.height)
    return json.loads(json.dumps(built.build(), cls=JSONEncoder))
