#!/usr/bin/env python3
"""Renders the built docs site in a real headless Chromium and checks it (scripts/docs.sh --browser).

    python3 scripts/docs-browser.py --chromium /usr/bin/chromium --site DIR --screenshot FILE.png

- Serves DIR on 127.0.0.1 (a free port) and loads every page in one Chromium, driven over the
  DevTools protocol on a pipe (--remote-debugging-pipe: no websocket library, nothing but the
  standard library): each must answer 200, fire its load event, fetch every stylesheet, script
  and image it asks for, and throw no JavaScript exception.
- Follows every internal link of every page (href and src of the built HTML): the file must be
  in the site, and a #fragment must be an id of the target page. A fence (``` or ~~~) in the
  text outside code is a block that did not render as code, and a problem too.
- Search: the index (search/search_index.json) must hold the query, and in the browser, typing
  the query into the search box of the home page must fill the result list (mkdocs-material's search runs in a
  web worker, so only a browser shows it works).
- Saves a screenshot of the quick start (the page with a heading "Quick start", else the home
  page) and prints its path.
Exits 1 with every problem listed; prints one line per page either way.
"""

import argparse
import base64
import functools
import html.parser
import http.server
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse


class CDP:
    """Chromium driven over the DevTools protocol on fds 3 (commands) and 4 (replies)."""

    def __init__(self, chromium, profile, log):
        cmd_r, self.w = os.pipe()
        self.r, out_w = os.pipe()

        def to_fds():
            os.dup2(cmd_r, 3)
            os.dup2(out_w, 4)

        self.proc = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu",
             "--disable-dev-shm-usage", "--no-first-run", "--disable-extensions",
             "--remote-debugging-pipe", f"--user-data-dir={profile}",
             "--window-size=1280,900", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            preexec_fn=to_fds, close_fds=False)
        os.close(cmd_r)
        os.close(out_w)
        self.buf = b""
        self.next_id = 0
        self.events = []

    def recv(self, deadline):
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no message from Chromium")
            ready, _, _ = select.select([self.r], [], [], left)
            if ready:
                data = os.read(self.r, 1 << 20)
                if not data:
                    raise EOFError("Chromium closed its DevTools pipe")
                self.buf += data
        msg, _, self.buf = self.buf.partition(b"\0")
        return json.loads(msg)

    def send(self, method, params=None, session=None, timeout=30):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            m = self.recv(deadline)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, method, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            for m in self.events:
                if m.get("method") == method:
                    return m
            self.events.append(self.recv(deadline))

    def evaluate(self, session, expression):
        r = self.send("Runtime.evaluate",
                      {"expression": expression, "returnByValue": True}, session)
        return r.get("result", {}).get("value")

    def close(self):
        try:
            self.send("Browser.close", timeout=10)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Links(html.parser.HTMLParser):
    """The ids, and the href/src targets, of one HTML page."""

    def __init__(self):
        super().__init__()
        self.ids = set()
        self.targets = []
        self.headings = []
        self._in_h = False
        # Text outside <pre> and <code> that shows a fence: a block that did not render as code.
        self.stray_fences = []
        self._code = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag in ("pre", "code"):
            self._code += 1
        for key in ("id", "name"):
            if a.get(key):
                self.ids.add(a[key])
        if tag in ("a", "link") and a.get("href"):
            self.targets.append(a["href"])
        if tag in ("script", "img") and a.get("src"):
            self.targets.append(a["src"])
        if tag in ("h1", "h2", "h3"):
            self._in_h = a.get("id") or True
            self.headings.append([self._in_h, ""])

    def handle_endtag(self, tag):
        if tag in ("h1", "h2", "h3"):
            self._in_h = False
        if tag in ("pre", "code") and self._code:
            self._code -= 1

    def handle_data(self, data):
        if not self._code and ("```" in data or "~~~" in data):
            self.stray_fences.append(data.strip()[:80])
        if self._in_h:
            self.headings[-1][1] += data


def site_pages(site):
    """Every HTML page of the site, as paths relative to it, index pages first."""
    pages = []
    for dirpath, dirnames, filenames in os.walk(site):
        dirnames[:] = sorted(d for d in dirnames if d not in ("assets", "search"))
        for f in filenames:
            if f.endswith(".html"):
                pages.append(os.path.relpath(os.path.join(dirpath, f), site))
    return sorted(pages, key=lambda p: (p != "index.html", p))


def parse(site, page):
    p = Links()
    with open(os.path.join(site, page), encoding="utf-8") as f:
        p.feed(f.read())
    return p


def resolve(site, page, target):
    """The site file and fragment an internal link points to; None for an external one."""
    parts = urllib.parse.urlsplit(target)
    if parts.scheme or parts.netloc or target.startswith("//"):
        return None
    if not parts.path:
        return page, parts.fragment
    # The site is served at /: 404.html links from there (mkdocs without site_url).
    base = "" if parts.path.startswith("/") else os.path.dirname(page)
    path = os.path.normpath(os.path.join(base, urllib.parse.unquote(parts.path).lstrip("/")))
    if path.startswith(".."):
        return "..", parts.fragment  # outside the site
    full = os.path.join(site, path)
    if parts.path.endswith("/") or os.path.isdir(full):
        path = os.path.join(path, "index.html")
    return os.path.normpath(path), parts.fragment


def check_links(site, pages):
    problems, checked = [], 0
    parsed = {}

    def get(p):
        if p not in parsed:
            parsed[p] = parse(site, p)
        return parsed[p]

    for page in pages:
        for text in get(page).stray_fences:
            problems.append(f"{page}: a fenced block rendered as text: {text!r}")
        for target in get(page).targets:
            r = resolve(site, page, target)
            if r is None:
                continue
            checked += 1
            path, fragment = r
            if path == ".." or not os.path.isfile(os.path.join(site, path)):
                problems.append(f"{page}: broken link {target!r} (no {path} in the site)")
            elif fragment and path.endswith(".html") and fragment not in get(path).ids:
                problems.append(f"{page}: broken link {target!r} (no id {fragment!r} in {path})")
    return problems, checked


def check_search_index(site, query):
    path = os.path.join(site, "search", "search_index.json")
    try:
        with open(path, encoding="utf-8") as f:
            docs = json.load(f)["docs"]
    except (OSError, ValueError, KeyError) as e:
        return [f"search index {path}: {e}"], 0
    hits = [d["location"] for d in docs if query in d.get("text", "") + d.get("title", "")]
    if not hits:
        return [f"search index: no entry holds {query!r} ({len(docs)} entries)"], 0
    return [], len(hits)


def quick_start(site, pages):
    """The page (and anchor) of the quick start: a heading called so, else the home page."""
    for page in pages:
        for hid, text in parse(site, page).headings:
            if "quick start" in text.lower():
                return page, hid if isinstance(hid, str) else ""
    return "index.html", ""


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--chromium", required=True)
    ap.add_argument("--site", required=True)
    ap.add_argument("--screenshot", required=True)
    ap.add_argument("--query", default="worker_id")
    args = ap.parse_args()
    site = os.path.abspath(args.site)
    pages = site_pages(site)
    if "index.html" not in pages:
        print(f"docs browser: no index.html in {site}")
        return 1

    problems, checked = check_links(site, pages)
    index_problems, index_hits = check_search_index(site, args.query)
    problems += index_problems

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(QuietHandler, directory=site))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"

    profile = tempfile.mkdtemp(prefix="docs-chromium-")
    log_path = os.path.join(profile, "chromium.log")
    log = open(log_path, "w")
    browser = CDP(args.chromium, profile, log)
    results = 0
    try:
        target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        s = browser.send("Target.attachToTarget",
                         {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Network"):
            browser.send(f"{domain}.enable", session=s)
        browser.send("Emulation.setDeviceMetricsOverride",
                     {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False},
                     session=s)

        def load(url):
            """Loads url; returns its problems."""
            browser.events = []
            found = []
            nav = browser.send("Page.navigate", {"url": url}, s)
            if nav.get("errorText"):
                return [f"{url}: {nav['errorText']}"]
            browser.wait_event("Page.loadEventFired")
            for m in browser.events:
                p = m.get("params", {})
                if m.get("method") == "Network.responseReceived":
                    status = p["response"]["status"]
                    if status >= 400:
                        found.append(f"{url}: {p['response']['url']} answered {status}")
                elif m.get("method") == "Network.loadingFailed" and not p.get("canceled"):
                    found.append(f"{url}: a resource failed: {p.get('errorText')}")
                elif m.get("method") == "Runtime.exceptionThrown":
                    d = p["exceptionDetails"]
                    text = d.get("exception", {}).get("description") or d.get("text")
                    found.append(f"{url}: JavaScript exception: {text}")
            return found

        for page in pages:
            url = base + page
            found = load(url)
            title = browser.evaluate(s, "document.title")
            h1 = browser.evaluate(
                s, "(document.querySelector('article h1') || {}).textContent || ''")
            if page != "404.html" and not h1:
                found.append(f"{url}: no <h1> in the page's article")
            print(f"docs browser: {page}: {title!r}: {'ok' if not found else 'PROBLEMS'}")
            problems += found

        # Search in the browser: type the query into the search box of the home page.
        problems += load(base + "index.html")
        browser.evaluate(s, "document.querySelector('label[for=\"__search\"]').click(),"
                            " document.querySelector('input.md-search__input').focus()")
        # Typed key by key, as a reader does (the search box listens to key events).
        for ch in args.query:
            browser.send("Input.dispatchKeyEvent",
                         {"type": "keyDown", "text": ch, "key": ch, "unmodifiedText": ch}, s)
            browser.send("Input.dispatchKeyEvent", {"type": "keyUp", "key": ch}, s)
        deadline = time.monotonic() + 30
        meta = ""
        while time.monotonic() < deadline:
            results = browser.evaluate(
                s, "document.querySelectorAll('.md-search-result__item').length") or 0
            meta = browser.evaluate(
                s, "(document.querySelector('.md-search-result__meta') || {}).textContent"
                   " || ''")
            if results:
                break
            time.sleep(0.2)
        first = browser.evaluate(
            s, "(document.querySelector('.md-search-result__item a') || {}).href || ''")
        print(f"docs browser: search {args.query!r}: {results} results ({meta.strip()!r}),"
              f" first {first!r}; the index has {index_hits} entries with it")
        if not results:
            problems.append(f"search {args.query!r} in the browser: no results ({meta!r})")

        # The quick start, as a reader sees it first.
        # From a blank page: a reload of the page with search open could restore its state, and
        # a navigation to a #fragment of the page shown fires no load event.
        page, anchor = quick_start(site, pages)
        load("about:blank")
        problems += load(base + page + (f"#{anchor}" if anchor else ""))
        time.sleep(0.5)
        shot = browser.send("Page.captureScreenshot", {"format": "png"}, s)
        os.makedirs(os.path.dirname(os.path.abspath(args.screenshot)), exist_ok=True)
        with open(args.screenshot, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
        print(f"docs browser: screenshot of the quick start ({page}"
              f"{'#' + anchor if anchor else ''}): {os.path.abspath(args.screenshot)}")
    except (TimeoutError, EOFError, RuntimeError) as e:
        log.flush()
        with open(log_path, encoding="utf-8", errors="replace") as f:
            tail = f.read()[-3000:]
        problems.append(f"Chromium: {e}\n{tail}")
    finally:
        browser.close()
        server.shutdown()
        log.close()
        shutil.rmtree(profile, ignore_errors=True)

    print(f"docs browser: {len(pages)} pages loaded, {checked} internal links followed,"
          f" {len(problems)} problems")
    for p in problems:
        print(f"  {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
