"""tests/chromium.py against a few pages on a local stdlib HTTP server: navigation and
statuses, real clicks and keys, focus order, console and CSP errors, cookies,
screenshots, and that nothing of Chromium outlives its ``with`` block."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from PIL import Image

from tests import chromium
from tests.chromium import Browser, BrowserError, needs_chromium, png_is_blank

pytestmark = needs_chromium

INDEX = """<!doctype html><html><head><title>Index</title></head>
<body style="margin: 0; font: 16px sans-serif">
<nav><a id="first" href="/other">Other page</a> <a id="second" href="/other#two">Two</a></nav>
<h1>Reef index</h1>
<form action="/search" method="get"><input id="q" name="q"></form>
<button id="button" type="button">Press</button> <output id="out">idle</output>
<div id="box" style="width: 200px; height: 50px; background: #c33; color: white">Box</div>
<script>
  window.keys = [];
  document.addEventListener("keydown", (e) => keys.push([e.key, e.code, e.keyCode, e.shiftKey]));
  document.getElementById("button").addEventListener("click", (e) => {
    document.getElementById("out").textContent = e.isTrusted ? "trusted click" : "synthetic";
  });
</script>
</body></html>"""

PAGES: dict[str, tuple[dict[str, str], str]] = {
    "/": ({"Set-Cookie": "session=s3cret; Path=/; HttpOnly; SameSite=Strict"}, INDEX),
    "/other": ({}, "<!doctype html><title>Other</title><h1>Other page</h1>"),
    "/csp": (
        {"Content-Security-Policy": "default-src 'none'"},
        '<!doctype html><title>CSP</title><p>Locked</p><script>document.title = "ran"</script>',
    ),
    "/console-error": ({}, '<!doctype html><script>console.error("reef-e2e-broken", 7)</script>'),
}


class Site(ThreadingHTTPServer):
    """PAGES on 127.0.0.1, /search echoing its query; every request path is kept."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.requests: list[str] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    server: Site

    def do_GET(self) -> None:
        self.server.requests.append(self.path)
        path = urlsplit(self.path)
        status = 200
        headers: dict[str, str] = {}
        if path.path == "/search":
            query = parse_qs(path.query).get("q", [""])[0]
            body = f"<!doctype html><title>Search</title><h1>Results for {query}</h1>"
        elif path.path in PAGES:
            headers, body = PAGES[path.path]
        else:
            status, body = 404, '<!doctype html><h1>Not here</h1><a id="home" href="/">Home</a>'
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    server = Site()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with Browser() as browser:
        yield browser


def test_goto_waits_for_the_page_and_reports_its_status(browser: Browser, site: Site) -> None:
    browser.goto(site.url + "/")
    assert browser.last_status() == 200
    assert browser.evaluate("document.readyState") == "complete"
    browser.goto(site.url + "/nowhere")
    assert browser.last_status() == 404
    assert browser.text("h1") == "Not here"


def test_reading_the_page(browser: Browser, site: Site) -> None:
    browser.goto(site.url + "/")
    assert browser.text("h1") == "Reef index"
    assert browser.texts("nav a") == ["Other page", "Two"]
    assert browser.exists("#box") and not browser.exists("#absent")
    assert browser.texts("#absent") == []
    with pytest.raises(BrowserError, match="no element matches '#absent'"):
        browser.text("#absent")


def test_evaluate_awaits_promises_and_raises_page_exceptions(browser: Browser, site: Site) -> None:
    browser.goto(site.url + "/")
    assert browser.evaluate("new Promise((ok) => setTimeout(() => ok([1, 'two']), 10))") == [
        1,
        "two",
    ]
    assert browser.evaluate("undefined") is None
    with pytest.raises(BrowserError, match="Error: reef-nope"):
        browser.evaluate("(() => { throw new Error('reef-nope'); })()")
    with pytest.raises(BrowserError, match=r"Page\.navigate: "):
        browser.send("Page.navigate")  # no url: a CDP error, with its message


def test_clicking_a_link_navigates(browser: Browser, site: Site) -> None:
    browser.goto(site.url + "/nowhere")
    assert browser.last_status() == 404
    browser.click("#home")
    browser.wait_for_load()
    assert browser.text("h1") == "Reef index"
    assert browser.last_status() == 200
    browser.click("#first")
    browser.wait_for_load()
    assert browser.evaluate("location.pathname") == "/other"
    assert browser.text("h1") == "Other page"
    assert browser.last_status() == 200


def test_a_click_is_a_real_mouse_event(browser: Browser, site: Site) -> None:
    browser.goto(site.url + "/")
    browser.click("#button")
    assert browser.text("#out") == "trusted click"


def test_click_refuses_a_covered_element(browser: Browser, site: Site) -> None:
    browser.goto(site.url + "/")
    browser.evaluate(
        "document.body.insertAdjacentHTML('beforeend', '<div id=\"modal\" style=\"position:"
        " fixed; inset: 0; background: #0008\"></div>')"
    )
    with pytest.raises(BrowserError, match='covered by <div id="modal"'):
        browser.click("#button")
    assert browser.text("#out") == "idle"


def test_typing_and_enter_submit_a_get_form(browser: Browser, site: Site) -> None:
    browser.goto(site.url + "/")
    browser.type_text("#q", "coral ")
    for key in "reef":
        browser.press(key)
    assert browser.evaluate("document.getElementById('q').value") == "coral reef"
    browser.press("Enter")
    browser.wait_for_load()
    assert "/search?q=coral+reef" in site.requests
    assert browser.text("h1") == "Results for coral reef"


def test_keys_carry_key_code_and_modifiers(browser: Browser, site: Site) -> None:
    browser.goto(site.url + "/")
    for key in ("Escape", "ArrowDown", "ArrowUp", "a", "7", "Shift+Tab"):
        browser.press(key)
    assert browser.evaluate("keys") == [
        ["Escape", "Escape", 27, False],
        ["ArrowDown", "ArrowDown", 40, False],
        ["ArrowUp", "ArrowUp", 38, False],
        ["a", "KeyA", 65, False],
        ["7", "Digit7", 55, False],
        ["Tab", "Tab", 9, True],
    ]
    with pytest.raises(BrowserError, match="unknown key 'Tabb'"):
        browser.press("Tabb")


def test_tab_moves_focus_through_the_links_in_order(browser: Browser, site: Site) -> None:
    browser.goto(site.url + "/")
    browser.press("Tab")
    assert browser.focused() == {"tag": "a", "id": "first", "text": "Other page", "href": "/other"}
    browser.press("Tab")
    assert browser.focused()["id"] == "second"
    browser.press("Tab")
    assert browser.focused()["id"] == "q"
    browser.press("Shift+Tab")
    browser.press("Shift+Tab")
    assert browser.focused()["id"] == "first"


def test_console_errors_include_csp_violations(browser: Browser, site: Site) -> None:
    browser.goto(site.url + "/csp")
    assert browser.evaluate("document.title") == "CSP"  # the inline script was blocked
    errors = browser.console_errors()
    assert any("Content Security Policy" in error for error in errors), errors


def test_console_errors_are_the_pages_since_the_last_goto(browser: Browser, site: Site) -> None:
    browser.goto(site.url + "/console-error")
    assert browser.console_errors() == ["reef-e2e-broken 7"]
    browser.evaluate("setTimeout(() => { throw new Error('reef-late'); })")
    browser.wait_until("new Promise((ok) => setTimeout(() => ok(true), 50))")
    [first, late] = browser.console_errors()
    assert first == "reef-e2e-broken 7" and late.startswith("Error: reef-late")
    browser.goto(site.url + "/")
    assert browser.console_errors() == []


def test_wait_until_returns_the_value_or_names_the_expression(browser: Browser, site: Site) -> None:
    browser.goto(site.url + "/")
    browser.evaluate("setTimeout(() => { window.ready = 'yes'; }, 100)")
    assert browser.wait_until("window.ready") == "yes"
    with pytest.raises(BrowserError, match=r"'window\.never' still falsy after 0\.2s"):
        browser.wait_until("window.never", timeout=0.2)


def test_cookies_show_their_flags(browser: Browser, site: Site) -> None:
    browser.goto(site.url + "/")
    [cookie] = [c for c in browser.cookies() if c["name"] == "session"]
    assert cookie["value"] == "s3cret"
    assert cookie["httpOnly"] is True and cookie["sameSite"] == "Strict"


def test_screenshots(browser: Browser, site: Site, tmp_path: Path) -> None:
    browser.goto("about:blank")
    assert png_is_blank(browser.screenshot(tmp_path / "blank.png"))

    browser.goto(site.url + "/")
    page = browser.screenshot(tmp_path / "page.png")
    assert page.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(page) as image:
        assert image.size == browser.window_size
    assert not png_is_blank(page)

    box = browser.screenshot(tmp_path / "box.png", selector="#box")
    with Image.open(box) as image:
        assert image.size == (200, 50)
        assert image.convert("RGB").getpixel((195, 45)) == (0xCC, 0x33, 0x33)  # off the text


def test_the_browser_is_gone_after_the_with_block() -> None:
    with Browser() as browser:
        assert browser.evaluate("1 + 1") == 2
        assert len(browser.processes()) > 1  # renderers, a zygote, crashpad, ...
    assert browser.process is not None and browser.process.returncode is not None
    assert browser.processes() == []
    assert browser.data_dir is not None and not browser.data_dir.exists()


def test_a_chromium_that_cannot_start_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "chromium"
    fake.write_text("#!/bin/sh\necho 'reef-e2e: no display for you' >&2\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setattr(chromium, "CHROMIUM", fake)
    with pytest.raises(BrowserError, match="exited with 3") as error, Browser():
        pass
    assert "reef-e2e: no display for you" in str(error.value)
