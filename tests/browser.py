"""Open a Kiln HTML report in headless Chromium (Debian's package) and read back what
the page drew: console errors, and per plot its axes, threshold marks and any label
outside the plot's box. A script added to a copy of the page measures in the browser
and writes its findings into the DOM, which `--dump-dom` prints after the page's
scripts ran; the screenshot is taken of the report itself."""

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

CHROMIUM = shutil.which("chromium")
ARTIFACTS = (
    Path(os.environ.get("KILN_ARTIFACTS", Path(__file__).resolve().parents[1] / "build"))
    / "screenshots"
)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--virtual-time-budget=10000"]  # fmt: skip

# First in <head>: every uncaught error, rejected promise and console.error, kept.
WATCH = """<script>
window.kilnErrors = [];
window.addEventListener('error', e => kilnErrors.push('uncaught: ' + e.message));
window.addEventListener('unhandledrejection', e => kilnErrors.push('rejected: ' + e.reason));
const kilnConsoleError = console.error;
console.error = (...args) => { kilnErrors.push(args.join(' ')); kilnConsoleError(...args); };
</script>"""

# Last in <body>: after the plots rendered, each plot's findings as JSON in #kiln-check.
MEASURE = """<script>
function kilnText(node) { return node ? node.textContent.trim() : ''; }
function kilnInside(r, box) {
  return r.left >= box.left - 1 && r.right <= box.right + 1 &&
         r.top >= box.top - 1 && r.bottom <= box.bottom + 1;
}
function kilnMeets(a, b) {
  return a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
}
function kilnCheck() {
  const plots = [...document.querySelectorAll('figure.plot')].map(figure => {
    const plot = figure.querySelector('.js-plotly-plot');
    if (!plot) return {title: figure.getAttribute('aria-label'), rendered: false};
    const box = plot.getBoundingClientRect();
    const clipped = [...plot.querySelectorAll('svg text')]
      .filter(t => kilnText(t) && t.getBoundingClientRect().width > 0)
      .filter(t => !kilnInside(t.getBoundingClientRect(), box))
      .map(kilnText);
    const legend = [...plot.querySelectorAll('.legendtext')];
    const axes = [...plot.querySelectorAll(
      '.xtick text, .ytick text, .g-xtitle text, .g-ytitle text')];
    const overlaps = [];
    for (const entry of legend)
      for (const label of axes)
        if (kilnMeets(entry.getBoundingClientRect(), label.getBoundingClientRect()))
          overlaps.push(kilnText(entry) + ' / ' + kilnText(label));
    return {
      title: figure.getAttribute('aria-label'),
      overlaps: overlaps,
      kind: figure.dataset.kind,
      rendered: true,
      x_title: kilnText(plot.querySelector('.g-xtitle text')),
      y_title: kilnText(plot.querySelector('.g-ytitle text')),
      x_ticks: [...plot.querySelectorAll('.xtick text')].map(kilnText),
      y_ticks: [...plot.querySelectorAll('.ytick text')].map(kilnText),
      thresholds: Number(figure.dataset.thresholds),
      threshold_labels: [...plot.querySelectorAll('.annotation-text')]
        .map(kilnText).filter(t => t.startsWith('threshold')).length,
      shapes: plot.querySelectorAll('.shapelayer path').length,
      legend: [...plot.querySelectorAll('.legendtext')].map(kilnText),
      traces: plot.querySelectorAll('.trace').length,
      // Per line series, its pieces: a gap in the data starts a new one (another path,
      // or another "M" in one).
      line_pieces: [...plot.querySelectorAll('.scatterlayer .trace')]
        .map(trace => [...trace.querySelectorAll('.js-line')]
          .map(line => (line.getAttribute('d') || '').split('M').length - 1)
          .reduce((a, b) => a + b, 0))
        .filter(pieces => pieces > 0),
      clipped: clipped,
    };
  });
  const out = document.createElement('pre');
  out.id = 'kiln-check';
  out.textContent = JSON.stringify({errors: kilnErrors, plots: plots,
                                    height: document.body.scrollHeight});
  document.body.appendChild(out);
}
window.addEventListener('load', () => setTimeout(kilnCheck, 200));
</script>"""


def measure(page: Path) -> dict:
    """What PAGE drew in Chromium: {"errors": [...], "plots": [...], "height": px}."""
    text = page.read_text()
    with tempfile.TemporaryDirectory() as work:
        probed = Path(work) / page.name
        probed.write_text(
            text.replace("<head>", "<head>" + WATCH, 1).replace("</body>", MEASURE + "</body>", 1)
        )
        done = subprocess.run(
            [CHROMIUM, *FLAGS, "--window-size=1280,1000", "--dump-dom", probed.as_uri()],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    start = done.stdout.find('<pre id="kiln-check">')
    assert done.returncode == 0 and start >= 0, done.stderr[-2000:]
    found = done.stdout[start + len('<pre id="kiln-check">') : done.stdout.index("</pre>", start)]
    return json.loads(found.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&"))


def screenshot(page: Path, name: str, height: int) -> Path:
    """The whole page as a PNG under ARTIFACTS (CI keeps the folder)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / f"{name}.png"
    shot.unlink(missing_ok=True)
    done = subprocess.run(
        [CHROMIUM, *FLAGS, f"--window-size=1280,{min(max(height + 200, 600), 16000)}",
         f"--screenshot={shot}", page.as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    return shot


def opened(page: Path, name: str) -> dict:
    """PAGE measured (measure) and its screenshot kept as NAME.png."""
    found = measure(page)
    screenshot(page, name, found["height"])
    return found


def assert_drawn(found: dict) -> None:
    """No console error; each plot rendered with titled axes and ticks, its threshold
    lines drawn and labelled, no label outside its box and no legend entry over an
    axis's labels."""
    assert found["errors"] == []
    for plot in found["plots"]:
        where = plot["title"]
        assert plot["rendered"], where
        assert plot["x_title"] and plot["y_title"], where
        assert plot["x_ticks"] and plot["y_ticks"], where
        assert plot["threshold_labels"] == plot["thresholds"], where
        assert plot["shapes"] >= plot["thresholds"], where
        assert plot["clipped"] == [], where
        assert plot["overlaps"] == [], where  # a legend entry over an axis's labels
