"""Write a report in every format into its run's directory."""

from pathlib import Path

from kiln import files
from kiln.report import html, junit, markdown
from kiln.report.document import FORMATS, Report, directory


def write_all(report: Report) -> dict[str, Path]:
    folder = directory(report.id)
    texts = {
        "json": files.json_text(report.to_json()) + "\n",
        "markdown": markdown.render(report),
        "html": html.render(report),
        "junit": junit.render(report),
    }
    written = {}
    for kind, text in texts.items():
        path = folder / FORMATS[kind]
        files.write_private(path, text)
        written[kind] = path
    return written
