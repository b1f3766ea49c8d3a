"""A small synchronous Chrome DevTools Protocol (CDP) driver for end-to-end tests.

It runs Debian's headless Chromium (``apt-get install chromium``) and drives one page
with real mouse and key events, so a test sees what a user would (focus order, Content-
Security-Policy errors, cookie flags) without selenium or playwright. The websocket is
aiohttp's, on an asyncio loop in a background thread; every method here blocks until
Chromium has answered, so tests read as plain sequential code."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Coroutine
from contextlib import suppress
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar, cast

import aiohttp
import pytest

CHROMIUM = Path("/usr/bin/chromium")

needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"needs {CHROMIUM}: apt-get install chromium"
)

# --no-sandbox: CI runs the tests as root. The rest keep a test run off the network (no
# updates, sync, metrics or pings) and off /dev/shm, which containers keep small.
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--remote-debugging-port=0",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--metrics-recording-only",
    "--no-pings",
)

# key -> (code, windowsVirtualKeyCode, text) for Input.dispatchKeyEvent; a single
# printable character not listed here is typed as itself.
KEYS: dict[str, tuple[str, int, str]] = {
    "Tab": ("Tab", 9, ""),
    "Enter": ("Enter", 13, "\r"),
    "Escape": ("Escape", 27, ""),
    "Backspace": ("Backspace", 8, ""),
    "Delete": ("Delete", 46, ""),
    "Home": ("Home", 36, ""),
    "End": ("End", 35, ""),
    "ArrowLeft": ("ArrowLeft", 37, ""),
    "ArrowUp": ("ArrowUp", 38, ""),
    "ArrowRight": ("ArrowRight", 39, ""),
    "ArrowDown": ("ArrowDown", 40, ""),
    " ": ("Space", 32, " "),
}
MODIFIERS = {"Alt": 1, "Control": 2, "Ctrl": 2, "Meta": 4, "Shift": 8}

T = TypeVar("T")


class BrowserError(RuntimeError):
    """Chromium would not start, a CDP command failed or timed out, page JavaScript
    threw, or no element matched a selector."""


class Browser:
    """One headless Chromium with one page, for ``with Browser() as browser:``.

    Every CDP event is kept in ``events`` (in arrival order), so a test can assert on
    anything the page did; the helpers below cover the common questions."""

    def __init__(self, *, timeout: float = 10.0, window_size: tuple[int, int] = (1280, 900)):
        self.timeout = timeout  # seconds any one command, load or start may take
        self.window_size = window_size  # also the viewport, in CSS pixels
        self.events: list[dict[str, Any]] = []
        self.process: subprocess.Popen[bytes] | None = None
        self.data_dir: Path | None = None  # profile, log, crashpad; close() removes it
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._session: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._reader: asyncio.Task[None] | None = None
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._ids = itertools.count(1)
        self._changed = threading.Condition()  # guards events and _closed
        self._closed = False
        self._frame_id = ""  # the page's main frame (its target id)
        self._action_mark = 0  # len(events) when the last action began: wait_for_load
        self._page_mark = 0  # len(events) when the last goto began: console_errors

    # -- lifecycle ---------------------------------------------------------------------

    def __enter__(self) -> Browser:
        try:
            self._connect(self._launch())
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _launch(self) -> int:
        """Start Chromium in its own process group (so close() can kill all of it) and
        return its DevTools port, which it writes to DevToolsActivePort once listening."""
        self.data_dir = data_dir = Path(tempfile.mkdtemp(prefix="reef-chromium-"))
        profile = data_dir / "profile"
        width, height = self.window_size
        # crashpad's database and any cache go to data_dir too, not ~/.config or ~/.cache
        env = {**os.environ, "XDG_CONFIG_HOME": str(data_dir), "XDG_CACHE_HOME": str(data_dir)}
        with open(data_dir / "chromium.log", "wb") as log:
            self.process = subprocess.Popen(
                [
                    str(CHROMIUM),
                    *FLAGS,
                    f"--user-data-dir={profile}",
                    f"--window-size={width},{height}",
                    "about:blank",
                ],
                stdin=subprocess.DEVNULL,
                env=env,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        deadline = time.monotonic() + self.timeout
        while True:
            with suppress(FileNotFoundError, IndexError, ValueError):
                return int((profile / "DevToolsActivePort").read_text().split()[0])
            if self.process.poll() is not None:
                raise BrowserError(
                    f"chromium exited with {self.process.returncode} before it listened:\n"
                    + self._log_tail()
                )
            if time.monotonic() > deadline:
                raise BrowserError(
                    f"chromium wrote no DevToolsActivePort in {self.timeout}s:\n" + self._log_tail()
                )
            time.sleep(0.05)

    def _log_tail(self, lines: int = 20) -> str:
        assert self.data_dir is not None
        text = (self.data_dir / "chromium.log").read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def _connect(self, port: int) -> None:
        """Attach to the page Chromium opened (or a new one), and turn on the events
        the helpers read."""
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + min(self.timeout, 2.0)
        while not (pages := [t for t in _get_json(f"{base}/json/list") if t["type"] == "page"]):
            if time.monotonic() > deadline:
                pages = [_get_json(f"{base}/json/new?about:blank", method="PUT")]
                break
            time.sleep(0.05)
        self._frame_id = pages[0]["id"]
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="cdp", daemon=True)
        self._thread.start()
        self._run(self._open(pages[0]["webSocketDebuggerUrl"]), "connect")
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")
        # the viewport is the window size (headless's window keeps ~140 px for its
        # toolbars), at one device pixel per CSS pixel: screenshots have known sizes
        width, height = self.window_size
        self.send(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

    def close(self) -> None:
        """Kill all of Chromium, close the socket, remove the profile."""
        if self.process is not None and self.process.returncode is None:
            with suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(self.timeout)
            # crashpad's handlers have left the group; and the group's processes die a
            # moment after the leader: wait, so none outlives the block or writes to the
            # profile while it is removed
            deadline = time.monotonic() + self.timeout
            while (pids := self.processes()) and time.monotonic() < deadline:
                for pid in pids:
                    with suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                time.sleep(0.02)
        if self._loop is not None and self._thread is not None:
            with suppress(BrowserError):
                self._run(self._shut(), "close")
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(self.timeout)
            self._loop.close()
            self._loop = None
        if self.data_dir is not None:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def processes(self) -> list[int]:
        """This browser's live (not zombie) processes, from /proc: its process group,
        and crashpad's handlers, which leave the group but keep their database in
        ``data_dir`` (XDG_CONFIG_HOME)."""
        if self.process is None or self.data_dir is None:
            return []
        mark = f"{self.data_dir}/".encode()
        pids = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with suppress(OSError, IndexError, ValueError):
                    # after the command's ")": state, ppid, process group, ...
                    stat = Path(f"/proc/{entry}/stat").read_text().rpartition(")")[2].split()
                    if stat[0] != "Z" and (
                        int(stat[2]) == self.process.pid
                        or mark in Path(f"/proc/{entry}/cmdline").read_bytes()
                    ):
                        pids.append(int(entry))
        return pids

    # -- the websocket, on the background loop -----------------------------------------

    def _run(self, coro: Coroutine[Any, Any, T], what: str) -> T:
        assert self._loop is not None
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(self.timeout)
        except TimeoutError:
            future.cancel()
            raise BrowserError(f"{what}: no answer from chromium in {self.timeout}s") from None

    async def _open(self, url: str) -> None:
        self._session = aiohttp.ClientSession()
        # max_msg_size=0: screenshots and big evaluate results exceed aiohttp's 4 MiB
        self._ws = await self._session.ws_connect(url, max_msg_size=0)
        self._reader = asyncio.create_task(self._read(self._ws))

    async def _read(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        try:
            async for message in ws:
                if message.type != aiohttp.WSMsgType.TEXT:
                    continue
                data = json.loads(message.data)
                if "id" in data:
                    future = self._pending.pop(data["id"], None)
                    if future is not None and not future.done():
                        future.set_result(data)
                else:
                    with self._changed:
                        self.events.append(data)
                        self._changed.notify_all()
        finally:
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(BrowserError("the connection to chromium closed"))
            self._pending.clear()
            with self._changed:
                self._closed = True
                self._changed.notify_all()

    async def _call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self._ws is not None
        if self._ws.closed:
            raise BrowserError(f"{method}: the connection to chromium is closed")
        message_id = next(self._ids)
        future = asyncio.get_running_loop().create_future()
        self._pending[message_id] = future
        try:
            await self._ws.send_str(
                json.dumps({"id": message_id, "method": method, "params": params})
            )
            return await future
        finally:
            self._pending.pop(message_id, None)

    async def _shut(self) -> None:
        if self._ws is not None:
            await self._ws.close()
        if self._reader is not None:
            await self._reader
        if self._session is not None:
            await self._session.close()

    # -- CDP -----------------------------------------------------------------------------

    def send(self, method: str, /, **params: Any) -> dict[str, Any]:
        """One CDP command (``send("Page.reload", ignoreCache=True)``); its result."""
        reply = self._run(self._call(method, params), method)
        if "error" in reply:
            error = reply["error"]
            raise BrowserError(f"{method}: {error.get('message')} {error.get('data', '')}".strip())
        result: dict[str, Any] = reply.get("result", {})
        return result

    def _wait_event(
        self,
        method: str,
        since: int,
        match: Callable[[dict[str, Any]], bool] = lambda params: True,
    ) -> dict[str, Any]:
        """The params of the first ``method`` event at or after index ``since`` that
        ``match``es, waiting for it up to the timeout."""
        deadline = time.monotonic() + self.timeout
        with self._changed:
            while True:
                for event in self.events[since:]:
                    if event["method"] == method and match(event.get("params", {})):
                        return event.get("params", {})
                since = len(self.events)
                left = deadline - time.monotonic()
                if self._closed:
                    raise BrowserError(f"the connection to chromium closed before {method}")
                if left <= 0:
                    raise BrowserError(f"no {method} from chromium in {self.timeout}s")
                self._changed.wait(left)

    def _mark(self) -> int:
        with self._changed:
            self._action_mark = len(self.events)
            return self._action_mark

    # -- navigation ----------------------------------------------------------------------

    def goto(self, url: str) -> None:
        """Navigate and wait for the document's response and its load event."""
        self._page_mark = mark = self._mark()
        navigation = self.send("Page.navigate", url=url)
        if navigation.get("errorText"):
            raise BrowserError(f"goto {url}: {navigation['errorText']}")
        loader = navigation.get("loaderId")
        if loader is None:  # same-document (#fragment) navigation: nothing loads
            return
        try:
            if url.startswith(("http:", "https:")):  # about:blank, data: get no response
                self._wait_event(
                    "Network.responseReceived", mark, lambda p: p.get("loaderId") == loader
                )
            self._wait_event("Page.loadEventFired", mark)
        except BrowserError as e:
            raise BrowserError(f"goto {url}: {e}") from None

    def wait_for_load(self) -> None:
        """Wait for a load event since the last action (click, press, type_text), so a
        load that finished before this call still counts."""
        self._wait_event("Page.loadEventFired", self._action_mark)

    def last_status(self) -> int | None:
        """The HTTP status of the page's latest main-frame document response."""
        with self._changed:
            events = list(self.events)
        for event in reversed(events):
            params = event.get("params", {})
            if (
                event["method"] == "Network.responseReceived"
                and params.get("type") == "Document"
                and params.get("frameId") == self._frame_id
            ):
                status: int = params["response"]["status"]
                return status
        return None

    # -- the page ------------------------------------------------------------------------

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression (promises awaited), as JSON-like data;
        an exception in the page is raised here with its message."""
        result = self.send(
            "Runtime.evaluate",
            expression=expression,
            returnByValue=True,
            awaitPromise=True,
            userGesture=True,
        )
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise BrowserError(f"{expression!r} threw: {text}")
        return result["result"].get("value")

    def _element(self, selector: str, body: str) -> Any:
        """Run ``body`` (JavaScript that uses ``e``) on the selector's first match."""
        value = self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            f" if (e === null) return {{missing: true}}; return {{value: {body}}}; }})()"
        )
        if value.get("missing"):
            raise BrowserError(f"no element matches {selector!r}")
        return value.get("value")

    def exists(self, selector: str) -> bool:
        return bool(self.evaluate(f"document.querySelector({json.dumps(selector)}) !== null"))

    def text(self, selector: str) -> str:
        """The rendered text (innerText) of the selector's first match."""
        text: str = self._element(selector, "e.innerText")
        return text

    def texts(self, selector: str) -> list[str]:
        texts: list[str] = self.evaluate(
            f"[...document.querySelectorAll({json.dumps(selector)})].map(e => e.innerText)"
        )
        return texts

    def focused(self) -> dict[str, Any]:
        """What keyboard focus is on: tag, id, text and href attribute."""
        focused: dict[str, Any] = self.evaluate(
            "(() => { const e = document.activeElement;"
            " return {tag: e ? e.tagName.toLowerCase() : null, id: e ? e.id : null,"
            " text: e ? e.innerText.trim() : null, href: e ? e.getAttribute('href') : null}; })()"
        )
        return focused

    def wait_until(self, expression: str, timeout: float = 10.0) -> Any:
        """Poll a JavaScript expression until it is truthy and return its value; errors
        while polling (a page mid-navigation) count as not yet."""
        deadline = time.monotonic() + timeout
        error: BrowserError | None = None
        while True:
            try:
                if value := self.evaluate(expression):
                    return value
            except BrowserError as e:
                error = e
            if time.monotonic() > deadline:
                last = f" (last error: {error})" if error else ""
                raise BrowserError(f"{expression!r} still falsy after {timeout}s{last}")
            time.sleep(0.05)

    def console_errors(self) -> list[str]:
        """Errors the page reported since the last goto(): console.error and failed
        console.assert calls, uncaught exceptions, and Chromium's own error log entries
        (blocked by Content-Security-Policy, failed resource loads)."""
        with self._changed:
            events = self.events[self._page_mark :]
        errors = []
        for event in events:
            method, params = event["method"], event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                errors.append(
                    " ".join(
                        str(arg.get("value", arg.get("description", "")))
                        for arg in params.get("args", [])
                    )
                )
            elif method == "Runtime.exceptionThrown":
                details = params["exceptionDetails"]
                errors.append(
                    details.get("exception", {}).get("description") or details.get("text", "")
                )
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                errors.append(params["entry"].get("text", ""))
        return errors

    def cookies(self) -> list[dict[str, Any]]:
        """The cookies the current URL would be sent, with httpOnly, sameSite, secure."""
        cookies: list[dict[str, Any]] = self.send(
            "Network.getCookies", urls=[self.evaluate("location.href")]
        )["cookies"]
        return cookies

    # -- input ---------------------------------------------------------------------------

    def _box(self, selector: str) -> dict[str, float]:
        """Scroll the element into the middle of the viewport (at once, even where CSS
        asks for smooth scrolling); its box in viewport pixels, and the scroll offsets."""
        box: dict[str, float] = self._element(
            selector,
            "(e.scrollIntoView({block: 'center', inline: 'center', behavior: 'instant'}),"
            " ((r) => ({x: r.x, y: r.y, width: r.width, height: r.height,"
            " scrollX: window.scrollX, scrollY: window.scrollY}))(e.getBoundingClientRect()))",
        )
        if box["width"] == 0 or box["height"] == 0:
            raise BrowserError(f"{selector!r} has no size (hidden?)")
        return box

    def click(self, selector: str) -> None:
        """Click the element's centre with real mouse events, as a user would: an element
        covered by another (a modal, an overlay) gets an error, not a click."""
        box = self._box(selector)
        x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        covered = self._element(
            selector,
            f"((hit) => hit === null || e.contains(hit) ? null : hit.outerHTML.slice(0, 120))"
            f"(document.elementFromPoint({x}, {y}))",
        )
        if covered:
            raise BrowserError(f"click {selector!r}: covered by {covered}")
        self._mark()
        self.send("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def type_text(self, selector: str, text: str) -> None:
        """Focus the element and insert ``text`` at the caret, as an IME would (input
        events fire; no per-key events)."""
        self._element(selector, "e.focus()")
        self._mark()
        self.send("Input.insertText", text=text)

    def press(self, key: str) -> None:
        """Press and release one key, with modifiers: ``"Tab"``, ``"Shift+Tab"``,
        ``"Enter"``, ``"Escape"``, ``"ArrowDown"``, ``"a"``."""
        *names, key = key.split("+") if len(key) > 1 else [key]
        modifiers = 0
        for name in names:
            if name not in MODIFIERS:
                raise BrowserError(f"unknown modifier {name!r}; known: {', '.join(MODIFIERS)}")
            modifiers |= MODIFIERS[name]
        if key in KEYS:
            code, key_code, text = KEYS[key]
        elif len(key) == 1:
            code = f"Key{key.upper()}" if key.isalpha() else f"Digit{key}" if key.isdigit() else ""
            key_code, text = (ord(key.upper()) if key.isalnum() else 0), key
        else:
            raise BrowserError(f"unknown key {key!r}; known: {', '.join(KEYS)} or one character")
        event = {
            "key": key,
            "code": code,
            "windowsVirtualKeyCode": key_code,
            "modifiers": modifiers,
        }
        self._mark()
        # keyDown with text types it (and Enter submits); rawKeyDown is a key that doesn't
        self.send(
            "Input.dispatchKeyEvent",
            type="keyDown" if text else "rawKeyDown",
            text=text,
            unmodifiedText=text,
            **event,
        )
        self.send("Input.dispatchKeyEvent", type="keyUp", **event)

    # -- screenshots ---------------------------------------------------------------------

    def screenshot(self, path: str | Path, selector: str | None = None) -> Path:
        """Save a PNG of the viewport, or of just the selector's element."""
        params: dict[str, Any] = {"format": "png"}
        if selector is not None:
            box = self._box(selector)
            params["clip"] = {
                "x": box["x"] + box["scrollX"],
                "y": box["y"] + box["scrollY"],
                "width": box["width"],
                "height": box["height"],
                "scale": 1,
            }
            params["captureBeyondViewport"] = True
        path = Path(path)
        path.write_bytes(base64.b64decode(self.send("Page.captureScreenshot", **params)["data"]))
        return path


def png_is_blank(path: str | Path, tolerance: int = 8) -> bool:
    """Whether every pixel is within ``tolerance`` of one colour: a screenshot of a page
    that rendered nothing (or only a background)."""
    from PIL import Image

    with Image.open(path) as image:
        extrema = cast("tuple[tuple[int, int], ...]", image.convert("RGB").getextrema())
    return all(high - low <= tolerance for low, high in extrema)


def _get_json(url: str, method: str = "GET") -> Any:
    with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=5) as r:
        return json.load(r)
