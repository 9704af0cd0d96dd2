"""The built site in a real browser: ``make docs`` (the gallery executed), then Debian's headless Chromium renders it.

Each page is loaded in an iframe of a checking page served from the same local HTTP server, which waits for the
page's images and reports, per image, whether it decoded (``naturalWidth > 0``), and the links of the navigation
(the header bar, its "More" menu, the section sidebar and the toctrees). Every such link must be served, every image
must load, and the header must reach every top-level page. Screenshots of the pages are kept in
``docs/_build/screenshots``.
"""

from __future__ import annotations

import functools
import html
import json
import re
import shutil
import subprocess
import threading
import urllib.error
import urllib.parse
import urllib.request
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "docs" / "_build" / "html"
SCREENSHOTS = ROOT / "docs" / "_build" / "screenshots"
PAGES = ["index.html", "getting_started.html", "language.html", "reference/catalogue.html",
         "reference/methods.html", "reference/cli.html", "reference/api.html", "studies.html", "comparisons.html",
         "gallery/index.html"]
"""Pages every build must render; each gallery example's page and each case study's page (the ones with figures)
are added to them."""
TOP_LEVEL = ["getting_started.html", "gallery/index.html", "language.html", "inference.html",
             "reference/catalogue.html", "reference/methods.html", "reference/api.html", "studies.html",
             "comparisons.html"]

CHECKER = """<!doctype html><html><body><pre id="result">pending</pre>
<iframe id="page" width="1400" height="1200"></iframe>
<script>
const frame = document.getElementById("page");
frame.onload = async () => {
  const doc = frame.contentDocument;
  const images = Array.from(doc.images);
  await Promise.all(images.map(img => img.complete ? null :
    new Promise(done => { img.addEventListener("load", done); img.addEventListener("error", done); })));
  const navigation = doc.querySelectorAll(
    ".bd-header a[href], .bd-sidebar-primary a[href], .toctree-wrapper a[href], .bd-breadcrumbs a[href]");
  document.getElementById("result").textContent = JSON.stringify({
    title: doc.title,
    images: images.map(img => ({src: img.currentSrc || img.src, loaded: img.complete && img.naturalWidth > 0})),
    links: Array.from(navigation).map(a => a.href).filter(href => href.startsWith(location.origin)),
  });
};
frame.src = new URLSearchParams(location.search).get("page");
</script></body></html>"""


class _Handler(SimpleHTTPRequestHandler):
    """The site's files, and the checking page at ``/__check__``."""

    def do_GET(self):
        if self.path.startswith("/__check__"):
            body = CHECKER.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()

    def log_message(self, *args):
        pass


def chromium() -> str:
    """Debian's Chromium (``apt-get install chromium``), installed if it is missing and apt can."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None and shutil.which("apt-get"):
        subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", "chromium"], capture_output=True,
                       timeout=900)
        found = shutil.which("chromium")
    if found is None:
        pytest.skip("no headless browser: Debian's chromium is not installed and apt-get could not install it")
    return found


def browse(browser: str, url: str, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--virtual-time-budget=20000", *flags, url], capture_output=True, text=True, timeout=180)


def checked(browser: str, origin: str, page: str) -> dict:
    """What the checking page reports of ``page`` once its images settled."""
    run = browse(browser, f"{origin}/__check__?page={urllib.parse.quote('/' + page)}", "--dump-dom")
    found = re.search(r'<pre id="result">(.*?)</pre>', run.stdout, re.S)
    assert found and found.group(1) != "pending", f"{page}: the browser did not finish rendering it\n{run.stderr[-2000:]}"
    return json.loads(html.unescape(found.group(1)))


def served(url: str) -> int:
    try:
        with urllib.request.urlopen(url.split("#")[0], timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


@pytest.fixture(scope="module")
def site():
    build = subprocess.run(["make", "docs"], cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Handler, directory=str(SITE)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.mark.slow
def test_pages_render_with_their_images_and_working_navigation(site):
    browser = chromium()
    studies = sorted(path.relative_to(SITE).as_posix() for path in (SITE / "studies").glob("*/index.html"))
    examples = sorted(path.relative_to(SITE).as_posix() for path in (SITE / "gallery").glob("plot_*.html"))
    assert studies and examples, "no case study or gallery page was built"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    reached, images = set(), []
    for page in PAGES + examples + studies:
        report = checked(browser, site, page)
        assert report["title"], page
        broken = [image["src"] for image in report["images"] if not image["loaded"]]
        assert broken == [], f"{page}: images that did not load: {broken}"
        images += report["images"]
        for link in set(report["links"]):
            assert served(link) == 200, f"{page}: navigation link {link} is not served"
            reached.add(urllib.parse.urlparse(link).path.lstrip("/"))
        shot = SCREENSHOTS / (page.removesuffix(".html").replace("/", "_") + ".png")
        browse(browser, f"{site}/{page}", f"--screenshot={shot}", "--window-size=1400,1800")
        assert shot.stat().st_size > 10_000, f"{page}: the screenshot is empty"
    assert len(images) >= len(studies) + len(examples), "figures are missing from the gallery or the case studies"
    gallery_figures = [image for image in images if "/_images/sphx_glr_plot_" in image["src"]]
    assert len({image["src"] for image in gallery_figures}) >= len(examples), "an example drew no figure"
    assert set(TOP_LEVEL) <= reached, f"top-level pages the navigation never links: {set(TOP_LEVEL) - reached}"
