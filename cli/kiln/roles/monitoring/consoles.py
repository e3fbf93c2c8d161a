"""Prometheus console pages (/consoles/kiln-*.html): a page per Grafana dashboard of
kiln.roles.monitoring.dashboard_panels, a graph per panel of the same queries, so a cluster without
Grafana still has the pictures (and the docs their screenshots). Prometheus expands them
as Go html templates with Kiln's console library (roles/monitoring/files/kiln.lib:
"kiln_head", "kiln_tail"; Debian ships none) and draws the graphs with
PromConsole.Graph (rickshaw). The monitoring role writes them through the filter
kiln_monitoring_consoles."""

import html
import json
import re

from kiln.roles.monitoring.dashboard_panels import DASHBOARDS, Dashboard
from kiln.roles.monitoring.queries import for_nodes, query

# The node page's node, from its URL (kiln-node.html?node=gpu001); html/template
# escapes it for the JavaScript string it lands in.
NODE_PARAM = "{{ .Params.node }}"
NODE_LIST = "nodes"  # the overview lists every node a target carries, once


def _series_name(legend: str) -> str:
    """Grafana's legend "{{node}} GPU {{gpu}}" as PromConsole's "[[node]] GPU [[gpu]]"."""
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", r"[[\1]]", legend)


def _graph(number: int, title: str, names: tuple[str, ...], one_node: bool) -> str:
    exprs = [for_nodes(query(n).expr, NODE_PARAM if one_node else None) for n in names]
    legends = [_series_name(query(n).legend) or query(n).title for n in names]
    return "\n".join(
        [
            f"<h3>{html.escape(title)}</h3>",
            f'<div id="graph{number}"></div>',
            "<script>",
            "new PromConsole.Graph({",
            f'  node: document.querySelector("#graph{number}"),',
            f"  expr: {json.dumps(exprs)},",
            f"  name: {json.dumps(legends)},",
            "  yAxisFormatter: PromConsole.NumberFormatter.humanizeNoSmallPrefix,",
            "  yHoverFormatter: PromConsole.NumberFormatter.humanizeNoSmallPrefix,",
            f"  yTitle: {json.dumps(title)}",
            "})",
            "</script>",
        ]
    )


def _node_links() -> str:
    """The nodes Prometheus scrapes, each a link to its node page."""
    expr = json.dumps(for_nodes(query(NODE_LIST).expr))
    return (
        "<h3>Nodes</h3>\n<ul>\n"
        f'{{{{ range query {expr} | sortByLabel "node" }}}}'
        '{{ with .Labels.node }}<li><a href="kiln-node.html?node={{ . }}">{{ . }}</a></li>'
        "{{ end }}{{ end }}\n</ul>"
    )


# The templates of Kiln's console library each page opens and closes with.
HEAD, TAIL = "kiln_head", "kiln_tail"


def _links() -> str:
    """Every page of the whole cluster (the node page is reached from the overview), and
    Prometheus's own classic pages (Debian's package carries them)."""
    pages = [
        (f"{d.uid}.html", d.title.removeprefix("Kiln: ")) for d in DASHBOARDS if not d.one_node
    ]
    links = [f'<a href="{name}">{html.escape(title)}</a>' for name, title in pages]
    links += ['<a href="../classic/alerts">Alerts</a>', '<a href="../classic/graph">Graph</a>']
    return '<p class="kiln-links">' + " | ".join(links) + "</p>"


def page(dashboard: Dashboard) -> str:
    heading = dashboard.title + (f": {NODE_PARAM}" if dashboard.one_node else "")
    parts = [f'{{{{ template "{HEAD}" . }}}}', _links()]
    parts += [f"<h1>{html.escape(heading)}</h1>", f"<p>{html.escape(dashboard.description)}</p>"]
    if dashboard.uid == "kiln-overview":
        parts.append(_node_links())
    for number, panel in enumerate(dashboard.panels, 1):
        title = panel.title or query(panel.queries[0]).title
        parts.append(_graph(number, title, panel.queries, dashboard.one_node))
    parts.append(f'{{{{ template "{TAIL}" . }}}}')
    return "\n".join(parts) + "\n"


def console_pages() -> dict[str, str]:
    """{file name: page}: kiln-overview.html, kiln-node.html, ..., one per dashboard."""
    return {f"{d.uid}.html": page(d) for d in DASHBOARDS}
