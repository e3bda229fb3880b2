"""A headless Chromium driven over the DevTools protocol on a pipe: no network, no extra Python package.

Used by the report's browser tests and to take its screenshot:

    with HeadlessChromium() as browser:
        browser.open(path.as_uri())
        browser.click('.case-item')
        browser.screenshot(Path("docs/report.png"))

`find_chromium()` looks for `chromium`, `chromium-browser`, `google-chrome` (or `$MEMTRACE_CHROMIUM`).
Messages are JSON objects separated by NUL bytes on file descriptors 3 (to the browser) and 4 (from it),
as `--remote-debugging-pipe` defines.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from queue import Empty, Queue
from typing import Any

from memtrace_opt.errors import MemtraceError

__all__ = ["HeadlessChromium", "find_chromium", "BrowserError"]

_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--no-default-browser-check",
    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
    "--disable-dev-shm-usage", "--mute-audio", "--hide-scrollbars", "--remote-debugging-pipe",
]


_CENTRE_OF = (
    "(() => { const el = document.querySelector(SELECTOR); if (!el) return null;"
    " el.scrollIntoView({block: 'center', inline: 'center', behavior: 'instant'});"
    " const r = el.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; })()"
)


class BrowserError(MemtraceError):
    """The browser could not start, or a page script failed."""


def find_chromium() -> str | None:
    """The path of a Chromium-family browser, or None."""
    explicit = os.environ.get("MEMTRACE_CHROMIUM")
    if explicit:
        return explicit if Path(explicit).exists() else None
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


class HeadlessChromium:
    """One headless browser with one page. Use as a context manager."""

    def __init__(self, executable: str | None = None, *, width: int = 1440, height: int = 1000,
                 timeout: float = 30.0) -> None:
        found = executable or find_chromium()
        if not found:
            raise BrowserError("no chromium found: install it (Debian: apt-get install -y chromium)")
        self.executable: str = found
        self.width, self.height, self.timeout = width, height, timeout
        self._next_id = 0
        self._replies: dict[int, Queue[dict[str, Any]]] = {}
        self._events: Queue[dict[str, Any]] = Queue()
        self._lock = threading.Lock()
        self._session: str | None = None
        #: uncaught page exceptions (Runtime.exceptionThrown) and every URL the page requested
        self.page_errors: list[str] = []
        self.requests: list[str] = []

    # process -------------------------------------------------------------------------------------------
    def __enter__(self) -> HeadlessChromium:
        self._profile = tempfile.mkdtemp(prefix="memtrace-chromium-")
        to_browser_r, to_browser_w = os.pipe()
        from_browser_r, from_browser_w = os.pipe()

        def place_fds() -> None:  # in the child: its ends of the pipes become fds 3 and 4
            a, b = os.dup(to_browser_r), os.dup(from_browser_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        args = [self.executable, *_FLAGS, f"--user-data-dir={self._profile}",
                f"--window-size={self.width},{self.height}", "about:blank"]
        self._proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, preexec_fn=place_fds, close_fds=False)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._out = os.fdopen(to_browser_w, "wb", buffering=0)
        self._in = os.fdopen(from_browser_r, "rb", buffering=0)
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()
        targets = self.call("Target.getTargets")["targetInfos"]
        page = next((t for t in targets if t.get("type") == "page"), None)
        target_id = page["targetId"] if page else self.call("Target.createTarget", url="about:blank")["targetId"]
        self._session = self.call("Target.attachToTarget", targetId=target_id, flatten=True)["sessionId"]
        self.send("Page.enable")
        self.send("Runtime.enable")
        self.send("Network.enable")
        self.send("Emulation.setDeviceMetricsOverride", width=self.width, height=self.height, deviceScaleFactor=1,
                  mobile=False)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.call("Browser.close", timeout=5)
        except Exception:  # noqa: BLE001 - closing is best effort
            pass
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(timeout=10)
        for handle in (self._out, self._in):
            try:
                handle.close()
            except OSError:
                pass
        shutil.rmtree(self._profile, ignore_errors=True)

    def _read_loop(self) -> None:
        buffer = b""
        while True:
            try:
                chunk = self._in.read(65536)
            except (OSError, ValueError):
                return
            if not chunk:
                return
            buffer += chunk
            while b"\0" in buffer:
                raw, buffer = buffer.split(b"\0", 1)
                message = json.loads(raw)
                if "id" in message:
                    with self._lock:
                        queue = self._replies.get(message["id"])
                    if queue is not None:
                        queue.put(message)
                else:
                    self._note(message)
                    self._events.put(message)

    def _note(self, event: dict[str, Any]) -> None:
        params = event.get("params") or {}
        if event.get("method") == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails") or {}
            self.page_errors.append(str((details.get("exception") or {}).get("description") or details.get("text")))
        elif event.get("method") == "Network.requestWillBeSent":
            self.requests.append(str((params.get("request") or {}).get("url")))

    # protocol ------------------------------------------------------------------------------------------
    def call(self, method: str, *, timeout: float | None = None, browser_level: bool = True, **params: Any) -> dict:
        """Sends one command (to the browser, or to the page when `browser_level` is False) and waits."""
        with self._lock:
            self._next_id += 1
            ident = self._next_id
            queue: Queue[dict[str, Any]] = Queue()
            self._replies[ident] = queue
        message: dict[str, Any] = {"id": ident, "method": method, "params": params}
        if not browser_level and self._session:
            message["sessionId"] = self._session
        self._out.write(json.dumps(message).encode() + b"\0")
        try:
            reply = queue.get(timeout=timeout or self.timeout)
        except Empty as error:
            raise BrowserError(f"chromium did not answer {method} in {timeout or self.timeout}s") from error
        finally:
            with self._lock:
                self._replies.pop(ident, None)
        if "error" in reply:
            raise BrowserError(f"{method}: {reply['error'].get('message')}")
        return reply.get("result", {})

    def send(self, method: str, **params: Any) -> dict:
        """A command to the page."""
        return self.call(method, browser_level=False, **params)

    def _wait_event(self, name: str, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError(f"timed out waiting for {name}")
            try:
                event = self._events.get(timeout=left)
            except Empty:
                continue
            if event.get("method") == name:
                return event

    # page ----------------------------------------------------------------------------------------------
    def open(self, url: str, *, ready: str = "document.body && document.body.dataset.ready === 'true'") -> None:
        """Loads `url` and waits until the JS expression `ready` is true."""
        self.send("Page.navigate", url=url)
        self._wait_event("Page.loadEventFired", self.timeout)
        self.wait_for(ready)

    def evaluate(self, expression: str) -> Any:
        """The JSON value of a JS expression in the page; a thrown exception raises BrowserError."""
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = (details.get("exception") or {}).get("description") or details.get("text")
            raise BrowserError(f"page script failed: {text}")
        return result.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: float | None = None) -> Any:
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"timed out waiting for: {expression}")
            time.sleep(0.05)

    def click(self, selector: str) -> None:
        """A real mouse click (press and release) at the centre of the first element matching `selector`,
        scrolled into view first."""
        box = self.evaluate(_CENTRE_OF.replace("SELECTOR", json.dumps(selector)))
        if not box:
            raise BrowserError(f"nothing on the page matches {selector!r}")
        x, y = box
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left",
                      clickCount=0 if kind == "mouseMoved" else 1)

    def screenshot(self, path: Path, *, full_page: bool = False) -> Path:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            width, height = self.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
            params.update(captureBeyondViewport=True, clip={"x": 0, "y": 0, "width": width, "height": height, "scale": 1})
        data = self.send("Page.captureScreenshot", **params)["data"]
        path.write_bytes(base64.b64decode(data))
        return path
