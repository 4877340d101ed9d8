"""The documentation site: ``python -m litseg_nb docs`` builds it with warnings as errors into a folder it may
write (never over a folder of the user's); a real headless browser (Debian's chromium, driven over the DevTools
protocol) opens every page and finds no broken link, anchor or image; the README is an entrance and the pages
carry no history (the changelog and the measurement log do)."""
from __future__ import annotations

import base64
import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import deque
from pathlib import Path

import pytest

from litseg_nb.cli import main
from litseg_nb.front import docs_site

REPO_ROOT = Path(__file__).resolve().parents[1]
DOCS = REPO_ROOT / "docs"
#: where the browser test leaves its screenshots (``LITSEG_DOCS_SCREENSHOTS`` elsewhere; ignored by git)
SHOTS = Path(os.environ.get("LITSEG_DOCS_SCREENSHOTS") or REPO_ROOT / "outputs" / "docs_screenshots")
#: pages that keep the history (dates, commits, issue numbers) on purpose, and generated pages
HISTORY_PAGES = {"changelog.md", "measurements.md", "smoke_timings.md"}
HISTORY = re.compile(r"issue\s*#?\d+|(?<![\w&])#\d{1,4}\b|\b20\d\d-\d\d-\d\d\b|"
                     r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,10}\b|\bat commit\b", re.I)


# ------------------------------------------------------------------ the build folder
def test_docs_out_refuses_a_folder_of_yours(tmp_path, capsys):
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("my own page\n")
    assert main(["docs", "--out", str(site)]) == 2
    err = capsys.readouterr().err.strip()
    assert "not a build of this site" in err and str(site) in err and len(err.splitlines()) == 1
    assert (site / "index.html").read_text() == "my own page\n" and sorted(p.name for p in site.iterdir()) == ["index.html"]


def test_docs_out_of_an_unknown_user_is_one_line(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    r = subprocess.run([sys.executable, "-m", "litseg_nb", "docs", "--out", "~nosuchuser_litseg/x"], cwd=tmp_path,
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "~nosuchuser_litseg/x" in r.stderr
    assert not (tmp_path / "~nosuchuser_litseg").exists()


def test_docs_out_takes_a_new_empty_or_earlier_build_folder(tmp_path):
    assert docs_site.resolve_out(tmp_path / "new") == tmp_path / "new"
    (tmp_path / "empty").mkdir()
    assert docs_site.resolve_out(tmp_path / "empty") == tmp_path / "empty"
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    (earlier / docs_site.MARKER).write_text("")
    (earlier / "index.html").write_text("an earlier build")
    assert docs_site.resolve_out(earlier) == earlier
    (tmp_path / "f").write_text("x")
    for bad in (tmp_path / "f", DOCS, DOCS / "guide"):
        with pytest.raises(docs_site.UsageError):
            docs_site.resolve_out(bad)
    assert docs_site.resolve_out(None) == DOCS / "_build" / "html"


def test_refresh_notebooks_copies_all_or_nothing(tmp_path):
    names = sorted(p.name for p in (REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    src, dest = tmp_path / "executed", tmp_path / "docs"
    src.mkdir()

    def executed(n):  # papermill's shape: an injected-parameters cell and the machine's paths
        return json.dumps({"metadata": {"papermill": {"input_path": f"/home/me/x/notebooks/{n}",
                                                      "output_path": f"/home/me/x/outputs/{n}",
                                                      "parameters": {"litseg_resolved": {"url": "http://h"}}}},
                           "cells": [{"cell_type": "code", "metadata": {"tags": ["injected-parameters"]},
                                      "source": "litseg_resolved = {...}"},
                                     {"cell_type": "markdown", "metadata": {}, "source": n}]})

    for n in names[:-1]:
        (src / n).write_text(executed(n))
    (src / names[-1].replace(".ipynb", ".FAILED.ipynb")).write_text("{}")
    with pytest.raises(docs_site.DocsError, match=names[-1]):
        docs_site.refresh_notebooks("smoke", outputs=src, dest=dest)
    assert not dest.exists() or not any(dest.iterdir())
    (src / names[-1]).write_text(executed(names[-1]))
    dest.mkdir(exist_ok=True)
    (dest / "99_gone.ipynb").write_text("{}")
    copied = docs_site.refresh_notebooks("smoke", outputs=src, dest=dest)
    assert [p.name for p in copied] == names == sorted(p.name for p in dest.iterdir())
    site = json.loads((dest / names[0]).read_text())
    assert [c["source"] for c in site["cells"]] == [names[0]]  # the injected configuration is not published
    assert "/home/me" not in (dest / names[0]).read_text() and "parameters" not in site["metadata"]["papermill"]


def test_committed_notebooks_are_the_executed_copies():
    names = sorted(p.name for p in (REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    copies = DOCS / "notebooks" / "smoke"
    assert sorted(p.name for p in copies.glob("*.ipynb")) == names
    for n in names:
        cells = json.loads((copies / n).read_text(encoding="utf-8"))["cells"]
        code = [c for c in cells if c["cell_type"] == "code"]
        assert code and all(c.get("execution_count") for c in code), f"{n}: not an executed copy"


# ------------------------------------------------------------------ README and pages
def test_readme_is_an_entrance():
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    assert "not the paper's results" in readme[:2000] and "small-model numbers" in readme[:2000]
    start, end = readme.index("<!-- splitter-example:start -->"), readme.index("<!-- splitter-example:end -->")
    assert start < readme.index("## Just the splitter") < end
    for page in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (REPO_ROOT / page).exists(), page


@pytest.mark.parametrize("page", ["README.md"] + sorted(str(p.relative_to(REPO_ROOT)) for p in DOCS.rglob("*.md")
                                                         if p.name not in HISTORY_PAGES and "_build" not in p.parts
                                                         and "_autosummary" not in p.parts
                                                         and "gallery" not in p.parts))
def test_pages_carry_no_history(page):
    """Issue numbers, commit ids and dates belong to the changelog and the measurement log."""
    text = (REPO_ROOT / page).read_text(encoding="utf-8")
    text = re.sub(r"`[0-9a-f]{16}`", "", text)  # content hashes (the boundary model's weights), not commits
    found = [m.group(0) for m in HISTORY.finditer(text)]
    assert not found, f"{page}: {found[:10]}"


# ------------------------------------------------------------------ the browser
def _chromium() -> str:
    found = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
    if found is None:
        if os.environ.get("LITSEG_REQUIRE_BROWSER"):
            pytest.fail("no chromium on PATH, and LITSEG_REQUIRE_BROWSER is set (.ci/run installs Debian's chromium)")
        pytest.skip("no chromium on PATH (Debian: apt-get install chromium)")
    return found


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class Browser:
    """A headless chromium driven over the DevTools protocol (websocket-client, the extra `docs`)."""

    def __init__(self, binary: str, profile_dir: Path):
        import websocket  # the extra `docs`

        self.proc = subprocess.Popen([binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                      "--disable-extensions", "--remote-debugging-port=0", "--remote-allow-origins=*",
                                      f"--user-data-dir={profile_dir}", "--window-size=1280,1000", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = profile_dir / "DevToolsActivePort"
        deadline = time.time() + 60
        while not (port_file.is_file() and port_file.read_text().strip()):
            if time.time() > deadline or self.proc.poll() is not None:
                raise RuntimeError("chromium did not start its DevTools endpoint")
            time.sleep(0.2)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json", timeout=30) as r:
            page = next(t for t in json.load(r) if t["type"] == "page")
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=120, suppress_origin=True)
        self.next_id, self.events = 0, []
        self.call("Page.enable")
        self.call("Network.enable")

    def call(self, method: str, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def wait_for(self, event: str, timeout: float = 120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            for e in self.events:
                if e["method"] == event:
                    self.events.remove(e)
                    return e
            msg = json.loads(self.ws.recv())
            if "method" in msg:
                self.events.append(msg)
        raise TimeoutError(event)

    def open(self, url: str) -> dict:
        """Load ``url``; returns its ids, links, images (each decoded or not) and failed requests."""
        self.events.clear()
        self.call("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired")
        js = """(async () => {
          const imgs = await Promise.all(Array.from(document.images).map(async i => {
            i.loading = 'eager';
            try { await i.decode(); return {src: i.currentSrc || i.src, ok: i.naturalWidth > 0}; }
            catch (e) { return {src: i.currentSrc || i.src, ok: false}; } }));
          return JSON.stringify({title: document.title,
            ids: Array.from(document.querySelectorAll('[id]')).map(e => e.id)
                 .concat(Array.from(document.querySelectorAll('a[name]')).map(e => e.name)),
            links: Array.from(document.querySelectorAll('a[href]')).map(a => a.href), imgs: imgs});
        })()"""
        res = self.call("Runtime.evaluate", expression=js, awaitPromise=True, returnByValue=True)
        info = json.loads(res["result"]["value"])
        urls = {e["params"]["requestId"]: e["params"]["request"]["url"] for e in self.events
                if e["method"] == "Network.requestWillBeSent"}
        failed = [f"{e['params']['response']['url']} ({e['params']['response']['status']})" for e in self.events
                  if e["method"] == "Network.responseReceived" and e["params"]["response"]["status"] >= 400]
        failed += [f"{urls.get(e['params']['requestId'], '?')} ({e['params']['errorText']})" for e in self.events
                   if e["method"] == "Network.loadingFailed"]
        info["failed"] = [f for f in failed if "favicon.ico" not in f]  # the browser's own request, no page's
        return info

    def screenshot(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"]))

    def close(self) -> None:
        self.ws.close()
        self.proc.terminate()
        self.proc.wait(timeout=30)


def check_site(site: Path, browser: Browser, shots: dict[str, Path] | None = None) -> tuple[list[str], int]:
    """Open every HTML page of ``site`` over HTTP; returns the problems (a page that fails to load, a request that
    fails, an image that does not decode, a link to a missing page, file or in-page anchor) and the page count."""
    class Server(http.server.ThreadingHTTPServer):
        request_queue_size = 128  # the default backlog (5) resets the browser's parallel connections on a busy machine

    server = Server(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    pages = sorted(str(p.relative_to(site)) for p in site.rglob("*.html") if not p.name.startswith("."))
    problems, seen, links = [], {}, []
    try:
        for rel in pages:
            info = browser.open(base + urllib.parse.quote(rel))
            if any("net::ERR_CONNECTION" in f for f in info["failed"]):  # the connection, not the site: once more
                info = browser.open(base + urllib.parse.quote(rel))
            seen[rel] = set(info["ids"])
            problems += [f"{rel}: request failed: {f}" for f in info["failed"]]
            problems += [f"{rel}: image does not load: {i['src']}" for i in info["imgs"] if not i["ok"]]
            links += [(rel, href) for href in info["links"]]
            if shots and rel in shots:
                browser.screenshot(shots[rel])
        for rel, href in links:
            if not href.startswith(base):
                if not re.match(r"(https?|mailto):", href):
                    problems.append(f"{rel}: link of an unknown kind: {href}")
                continue  # another site: not fetched (CI has no need of the internet)
            target, _, frag = urllib.parse.unquote(href[len(base):]).partition("#")
            target = target or "index.html"
            if target.endswith("/"):
                target += "index.html"
            if target.endswith(".html"):
                if target not in seen:
                    problems.append(f"{rel}: link to a missing page: {href}")
                elif frag and frag not in seen[target]:
                    problems.append(f"{rel}: link to a missing anchor: {href}")
            elif not (site / target).is_file():
                problems.append(f"{rel}: link to a missing file: {href}")
    finally:
        server.shutdown()
    return problems, len(pages)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    b = Browser(_chromium(), tmp_path_factory.mktemp("chromium"))
    yield b
    b.close()


def test_the_browser_check_finds_broken_links_anchors_and_images(tmp_path, browser):
    """The check itself: a page with a missing image, a link to a missing page and one to a missing anchor."""
    (tmp_path / "index.html").write_text('<html><body><h1 id="top">t</h1><a href="other.html#here">ok</a>'
                                         '<a href="#top">ok</a><img src="missing.png"><a href="gone.html">x</a>'
                                         '<a href="other.html#nowhere">x</a><a href="https://example.org/">ext</a>'
                                         '</body></html>')
    (tmp_path / "other.html").write_text('<html><body><p id="here">p</p></body></html>')
    problems, n = check_site(tmp_path, browser)
    assert n == 2
    assert sorted(p.split(": ", 2)[1] for p in problems) == [
        "image does not load", "link to a missing anchor", "link to a missing page", "request failed"], problems


@pytest.mark.slow
def test_the_built_site_has_no_broken_link_or_image(tmp_path, browser):
    """``python -m litseg_nb docs`` (warnings are errors) builds the site; every page loads in chromium with no
    failed request, no broken image and no link to a missing page, file or anchor; screenshots of the home page
    and of notebook 01 land in ``outputs/docs_screenshots/``."""
    out = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "litseg_nb", "docs", "--out", str(out)], cwd=REPO_ROOT,
                       capture_output=True, text=True, timeout=1800, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert r.returncode == 0, r.stderr[-4000:]
    shots = {"index.html": SHOTS / "home.png",
             "notebooks/smoke/01_preprocessing.html": SHOTS / "notebook_01_preprocessing.png"}
    problems, n = check_site(out, browser, shots)
    assert not problems, f"{len(problems)} problem(s) on {n} pages: " + "\n".join(problems[:40])
    assert n > 100  # the guide, eight notebooks, the gallery, one API page per module
    for path in shots.values():
        assert path.stat().st_size > 10_000, path
    api = sorted((out / "_autosummary").glob("litseg_nb*.html"))
    assert len(api) > 90 and (out / "_autosummary" / "litseg_nb.integrations.langchain.html") in api
    shown = [p.name for p in api if re.search(r"``|:(func|class|mod|data|meth):`", p.read_text(encoding="utf-8"))]
    assert shown == []  # the docstrings' reST is rendered, not shown as markup


def test_readme_segment_example_runs_as_written(data_dir, tmp_path):
    """The README's `segment()` example, up to its LitSeg lines (those need a served model), on a book file."""
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    block = re.findall(r"```python\n(.*?)```", readme.split("## Segment a book from Python", 1)[1], re.S)[0]
    assert len(block.strip().splitlines()) <= 10
    code = block.split("# LitSeg itself", 1)[0]
    shutil.copy(data_dir / "gutenberg" / "11.txt", tmp_path / "my_book.txt")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                       env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert r.returncode == 0, r.stderr[-2000:]
    n, unit, first, last, *_ = r.stdout.split()
    assert int(n) > 50 and int(first) == 1 and int(last) >= 1
