"""Open a page in headless Chromium and check that it renders, where things are and that its links resolve.

`render_check` and `layout_probe` load a copy of the page with a small script that, once the page has
loaded, writes what it measured (each image's `naturalWidth`, the bounding boxes of chosen elements,
every link as the browser resolves it, every resource fetched) into a `<pre id="render-check">`; the
DOM that Chromium dumps (`--dump-dom`) then carries the result.  The copy carries a `<base>` pointing
at the original's directory, so relative links and images resolve as they do for the original.  The
browser runs with networking side channels disabled, host names unresolvable and a throw-away profile,
so the check also catches a page that needs anything from outside itself.  On Debian the browser is
the `chromium` package.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from html import escape, unescape
from pathlib import Path
from urllib.parse import unquote, urlparse

#: executables tried in order on PATH, then fixed paths; `IMPLICITBIAS_CHROMIUM` overrides both
CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FIXED_PATHS = ("/usr/bin/chromium", "/usr/lib/chromium/chromium")

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--disable-extensions", "--mute-audio",
         "--host-resolver-rules=MAP * ~NOTFOUND")

#: runs once the page has loaded; writes what it measured as JSON into a `<pre id="render-check">`
_PROBE = """<script>
window.addEventListener("load", function () {
  var each = function (list, f) { return Array.prototype.map.call(list, f); };
  var box = function (el) {
    if (!el) { return null; }
    var r = el.getBoundingClientRect();
    return {top: r.top, bottom: r.bottom, left: r.left, right: r.right, width: r.width, height: r.height};
  };
  var rects = {};
  SELECTORS.forEach(function (s) { rects[s] = box(document.querySelector(s)); });
  var images = each(document.images, function (im) {
    return {alt: im.alt, src: (im.getAttribute("src") || "").slice(0, 200), url: im.src.slice(0, 2000),
            complete: im.complete, naturalWidth: im.naturalWidth, naturalHeight: im.naturalHeight};
  });
  var links = each(document.querySelectorAll("a[href]"), function (a) {
    var raw = a.getAttribute("href");
    var target = raw.charAt(0) === "#" ? document.getElementById(decodeURIComponent(raw.slice(1))) : null;
    return {href: raw, url: a.href, fragment_found: target !== null};
  });
  var resources = each(performance.getEntriesByType("resource"), function (e) { return e.name.slice(0, 2000); });
  var pre = document.createElement("pre");
  pre.id = "render-check";
  pre.textContent = JSON.stringify({count: images.length, images: images, rects: rects, links: links,
    resources: resources, viewport: {width: window.innerWidth, height: window.innerHeight,
                                     scroll_height: document.documentElement.scrollHeight}});
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
    result = _probe(report_path, (), 1280, 800, timeout, chromium)
    return {key: result[key] for key in ("count", "images", "rendered", "all_rendered")}


def layout_probe(page_path: str | os.PathLike, selectors: Sequence[str] = ("#headline", "figure img"), *,
                 width: int = 1280, height: int = 800, timeout: float = 60.0, chromium: str | None = None) -> dict:
    """Load a page in a `width` x `height` headless window and measure where things are and what resolves.

    Returns `{"viewport": {"width", "height", "scroll_height"}, "rects": {selector: {"top", "bottom",
    "left", "right", "width", "height"} or None}` (the first match of each CSS selector, in pixels from
    the top of the unscrolled window), `"images"`, `"rendered"`, `"all_rendered"` (as `render_check`),
    `"links"`: every `a[href]` as `{"href", "url", "fragment_found"}`, `"resources"`: every URL the page
    fetched, and `"missing"`: each link or image source that does not lead to an existing local file
    (or, for `#fragment`, to an element of the page).
    """
    return _probe(page_path, tuple(selectors), width, height, timeout, chromium)


def missing_targets(result: Mapping) -> list[str]:
    """Links and image sources of a probe result that do not resolve to an existing file or element."""
    missing = []
    for link in result["links"]:
        if link["href"].startswith("#"):
            if not link["fragment_found"]:
                missing.append(f"{link['href']} (no element with this id)")
        elif not _local_file_exists(link["url"]):
            missing.append(f"{link['href']} -> {link['url']}")
    for im in result["images"]:
        if not im["src"].startswith("data:") and not _local_file_exists(im["url"]):
            missing.append(f"image {im['src']} -> {im['url']}")
    return missing


def _local_file_exists(url: str) -> bool:
    parsed = urlparse(url)
    return parsed.scheme == "file" and Path(unquote(parsed.path)).is_file()


def _probe(page_path: str | os.PathLike, selectors: tuple[str, ...], width: int, height: int, timeout: float,
           chromium: str | None) -> dict:
    """Load a copy of the page with the probe script and a `<base>` at the original's directory (so its
    relative links and images resolve as they would for the original) and parse what the probe wrote."""
    page_path = Path(page_path).resolve()
    html = page_path.read_text(encoding="utf-8")
    base = f'<base href="{escape(page_path.parent.as_uri())}/">'
    head = re.search(r"<head[^>]*>", html, re.I)
    html = html[:head.end()] + base + html[head.end():] if head else base + html
    probe = _PROBE.replace("SELECTORS", json.dumps(list(selectors)).replace("</", "<\\/"))
    end = html.lower().rfind("</body>")
    probed = html[:end] + probe + html[end:] if end >= 0 else html + probe
    with tempfile.TemporaryDirectory(prefix="implicitbias-render-") as tmp:
        page = Path(tmp) / "page.html"
        page.write_text(probed, encoding="utf-8")
        dom = _run_chromium([f"--window-size={width},{height}", "--hide-scrollbars", "--virtual-time-budget=5000",
                             "--dump-dom", page.as_uri()], Path(tmp), timeout, chromium)
    match = _RESULT.search(dom)
    if match is None:
        raise BrowserError(f"Chromium loaded {page_path} but the render probe did not report; "
                           f"dumped DOM starts: {dom[:300]!r}")
    result = json.loads(unescape(match.group(1)))
    result["rendered"] = [im["naturalWidth"] > 0 for im in result["images"]]
    result["all_rendered"] = all(result["rendered"])
    result["missing"] = missing_targets(result)
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
