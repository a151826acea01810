"""Open a report in headless Chromium and check that it renders.

`render_check` loads a copy of the page with a small script that, once the page has loaded, writes
the number of `<img>` elements and each one's `naturalWidth` into a `<pre id="render-check">`; the
DOM that Chromium dumps (`--dump-dom`) then carries the result.  The browser runs with networking
side channels disabled and a throw-away profile, so the check also catches a page that needs
anything from outside itself.  On Debian the browser is the `chromium` package.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from html import unescape
from pathlib import Path

#: executables tried in order on PATH, then fixed paths; `IMPLICITBIAS_CHROMIUM` overrides both
CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FIXED_PATHS = ("/usr/bin/chromium", "/usr/lib/chromium/chromium")

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--disable-extensions", "--mute-audio")

_PROBE = """<script>
window.addEventListener("load", function () {
  var images = Array.prototype.map.call(document.images, function (im) {
    return {alt: im.alt, complete: im.complete, naturalWidth: im.naturalWidth,
            naturalHeight: im.naturalHeight};
  });
  var pre = document.createElement("pre");
  pre.id = "render-check";
  pre.textContent = JSON.stringify({count: images.length, images: images});
  document.body.appendChild(pre);
});
</script>
"""
_RESULT = re.compile(r'<pre id="render-check">(.*?)</pre>', re.S)


class BrowserError(RuntimeError):
    """Chromium is missing, failed or did not report back."""


def find_chromium() -> str | None:
    """Path of a Chromium or Chrome executable, or None (install Debian's `chromium` package)."""
    override = os.environ.get("IMPLICITBIAS_CHROMIUM")
    if override:
        return override if Path(override).exists() else shutil.which(override)
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return next((p for p in FIXED_PATHS if os.access(p, os.X_OK)), None)


def render_check(report_path: str | os.PathLike, *, timeout: float = 60.0,
                 chromium: str | None = None) -> dict:
    """Load `report_path` in headless Chromium and report whether every image rendered.

    Returns `{"count": n, "images": [{"alt", "complete", "naturalWidth", "naturalHeight"}, ...],
    "rendered": [naturalWidth > 0 per image], "all_rendered": bool}`.
    """
    html = Path(report_path).read_text(encoding="utf-8")
    end = html.lower().rfind("</body>")
    probed = html[:end] + _PROBE + html[end:] if end >= 0 else html + _PROBE
    with tempfile.TemporaryDirectory(prefix="implicitbias-render-") as tmp:
        page = Path(tmp) / "page.html"
        page.write_text(probed, encoding="utf-8")
        dom = _run_chromium(["--virtual-time-budget=5000", "--dump-dom", page.as_uri()], Path(tmp),
                            timeout, chromium)
    match = _RESULT.search(dom)
    if match is None:
        raise BrowserError(f"Chromium loaded {report_path} but the render probe did not report; "
                           f"dumped DOM starts: {dom[:300]!r}")
    result = json.loads(unescape(match.group(1)))
    result["rendered"] = [im["naturalWidth"] > 0 for im in result["images"]]
    result["all_rendered"] = all(result["rendered"])
    return result


def screenshot(report_path: str | os.PathLike, png_path: str | os.PathLike, *, width: int = 1200,
               height: int = 2400, timeout: float = 60.0, chromium: str | None = None) -> Path:
    """A PNG screenshot of the top `width` x `height` pixels of the report."""
    png_path = Path(png_path).resolve()
    png_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="implicitbias-shot-") as tmp:
        _run_chromium([f"--screenshot={png_path}", f"--window-size={width},{height}", "--hide-scrollbars",
                       "--virtual-time-budget=5000", Path(report_path).resolve().as_uri()], Path(tmp),
                      timeout, chromium)
    if not png_path.exists():
        raise BrowserError(f"Chromium did not write the screenshot {png_path}")
    return png_path


def _run_chromium(args: list[str], tmp: Path, timeout: float, chromium: str | None) -> str:
    exe = chromium or find_chromium()
    if exe is None:
        raise BrowserError("no Chromium found: install it (Debian: `apt-get install chromium`) or set "
                           "IMPLICITBIAS_CHROMIUM to its path")
    cmd = [exe, *FLAGS, f"--user-data-dir={tmp / 'profile'}", *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=tmp)
    except subprocess.TimeoutExpired as err:
        raise BrowserError(f"Chromium did not finish within {timeout} s: {' '.join(cmd[:3])} ...") from err
    if proc.returncode != 0:
        raise BrowserError(f"Chromium exited with {proc.returncode}: {proc.stderr[-1000:]}")
    return proc.stdout
