"""Check the built documentation site in a headless browser: maths rendered, no broken images.

    python docs/check_site.py SITE_DIR [--screenshots DIR PAGE ...] [--browser chromium]

For every page of ``SITE_DIR`` (an ``mkdocs build`` output):

* every ``<img src>`` resolves to a file of the site (a broken image is a missing file), and no page
  loads a script or stylesheet from outside the site (the site renders offline);
* every page with maths (``class="arithmatex"``) is opened in a headless browser over a local HTTP
  server, and its DOM after scripts have run must hold one rendered MathJax element
  (``<mjx-container>``) per maths span and no TeX error (``<mjx-merror>``).

``--screenshots DIR PAGE ...`` also saves a screenshot of each named page (paths of the site,
``methods/svgd/``) to ``DIR``. The browser is Debian's ``chromium`` (``apt-get install chromium``);
without one the script says so and exits with status 2. Exit status 1 lists every failure.
"""

from __future__ import annotations

import argparse
import functools
import html.parser
import http.server
import os
import re
import shutil
import subprocess
import sys
import threading
import urllib.parse


class _Refs(html.parser.HTMLParser):
    """The page's image sources, external script and stylesheet URLs, and maths spans."""

    def __init__(self):
        super().__init__()
        self.images, self.external, self.maths = [], [], 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img" and a.get("src"):
            self.images.append(a["src"])
        url = a.get("src") if tag == "script" else a.get("href") if tag == "link" and a.get("rel") == "stylesheet" else None
        if url and urllib.parse.urlparse(url).scheme in ("http", "https"):
            self.external.append(url)
        if "arithmatex" in (a.get("class") or "").split():
            self.maths += 1


def pages(site: str) -> list[str]:
    """Every HTML page of the site, as a path relative to it."""
    out = []
    for root, _, files in os.walk(site):
        out += [os.path.relpath(os.path.join(root, f), site) for f in files if f.endswith(".html")]
    return sorted(p for p in out if p != "404.html")


def static_failures(site: str, page: str) -> tuple[list[str], int]:
    """``(failures, maths spans)`` of one page, read from its HTML alone."""
    refs = _Refs()
    with open(os.path.join(site, page), encoding="utf-8") as f:
        refs.feed(f.read())
    failures = [f"{page}: external resource {u}" for u in refs.external]
    for src in refs.images:
        parsed = urllib.parse.urlparse(src)
        if parsed.scheme in ("http", "https", "data"):
            if parsed.scheme != "data":
                failures.append(f"{page}: image from outside the site {src}")
            continue
        target = os.path.normpath(os.path.join(site, os.path.dirname(page), urllib.parse.unquote(parsed.path)))
        if not os.path.isfile(target):
            failures.append(f"{page}: broken image {src}")
    return failures, refs.maths


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # one line per request would bury the report
        pass


def _serve(site: str) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = functools.partial(_Quiet, directory=site)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def _browser(name: str, *args: str) -> str:
    cmd = [name, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--virtual-time-budget=15000",
           *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout


def rendered_failures(browser: str, url: str, page: str, spans: int) -> list[str]:
    """Failures of one page's maths in the browser's DOM after its scripts ran."""
    dom = _browser(browser, "--dump-dom", url)
    rendered, errors = len(re.findall(r"<mjx-container", dom)), len(re.findall(r"<mjx-merror", dom))
    out = []
    if rendered < spans:
        out.append(f"{page}: {rendered} of {spans} maths spans rendered by MathJax")
    if errors:
        out.append(f"{page}: {errors} TeX errors (mjx-merror)")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("site")
    p.add_argument("--browser", default="chromium")
    p.add_argument("--screenshots", nargs="+", metavar=("DIR", "PAGE"), default=None)
    a = p.parse_args(argv)
    if shutil.which(a.browser) is None:
        print(f"check_site: no browser {a.browser!r} on PATH (Debian: apt-get install chromium)", file=sys.stderr)
        return 2
    server, base = _serve(a.site)
    failures, with_maths = [], 0
    try:
        for page in pages(a.site):
            bad, spans = static_failures(a.site, page)
            failures += bad
            if spans:
                with_maths += 1
                failures += rendered_failures(a.browser, base + page, page, spans)
        if a.screenshots:
            folder, *shots = a.screenshots
            os.makedirs(folder, exist_ok=True)
            for page in shots:
                path = os.path.join(os.path.abspath(folder), page.strip("/").replace("/", "_") or "index") + ".png"
                _browser(a.browser, "--window-size=1280,1600", f"--screenshot={path}", base + page)
                if not os.path.isfile(path):
                    failures.append(f"{page}: no screenshot taken")
    finally:
        server.shutdown()
    print(f"check_site: {len(pages(a.site))} pages, {with_maths} with maths rendered in {a.browser}; "
          f"{len(failures)} failures")
    for f in failures:
        print("  " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
