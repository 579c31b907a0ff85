"""Drive ``tokrace web`` in a real browser: Debian's chromium, headless through chromedriver (selenium).

textual-serve draws the terminal with xterm.js on a canvas, so the text is not in the page's DOM. The terminal
object is not a global either: we find it in the page's heap through the DevTools protocol (every object whose
prototype chain holds ``Object.prototype``, keeping the one shaped like an xterm ``Terminal``) and read its
buffer, row by row, as the user sees it. Used by the browser test and by ``scripts/web_screenshot.py``.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

CHROMIUM: Final = Path("/usr/bin/chromium")
"""Debian's chromium (``apt-get install chromium``): downloading a browser is not possible here."""
CHROMEDRIVER: Final = Path("/usr/bin/chromedriver")
"""Debian's ``chromium-driver``, the same version as the browser."""
FLAGS: Final = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-extensions", "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1")
"""Headless and quiet: without the background-networking flags chromium's own connections crowd the loopback
server's; every name but 127.0.0.1 fails at once, so the page's web font never waits on a network."""
SERVING: Final = re.compile(r"serving the race screen on (http://\S+?)/? ")
"""The line ``tokrace web`` prints once it listens."""

FIND_TERMINAL: Final = """function () {
    for (const o of this) {
        try {
            if (Object.prototype.hasOwnProperty.call(o, '_core') && typeof o.selectAll === 'function'
                    && o.buffer && o.buffer.active) {
                window.__tokraceTerminal = o;
                return true;
            }
        } catch (e) { /* an object whose getters refuse to run here is not the terminal */ }
    }
    return false;
}"""
READ_ROWS: Final = """const t = window.__tokraceTerminal;
if (!t) { return null; }
const buffer = t.buffer.active, rows = [];
for (let y = 0; y < t.rows; y++) {
    const line = buffer.getLine(buffer.viewportY + y);
    rows.push(line ? line.translateToString(true) : '');
}
return rows.join('\\n');"""


def missing_browser() -> str | None:
    """Why the browser cannot run here, or ``None`` when chromium and chromedriver are installed."""
    absent = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not os.access(p, os.X_OK)]
    if absent:
        return f"{' and '.join(absent)} not installed (apt-get install -y chromium chromium-driver)"
    return None


@dataclass(frozen=True)
class WebProcess:
    """A running ``tokrace web``: where it serves, and its process."""

    url: str
    process: subprocess.Popen[bytes]

    def tabs(self) -> list[int]:
        """The process ids of the tabs' tokrace processes (the server's children)."""
        pid = self.process.pid
        children = Path(f"/proc/{pid}/task/{pid}/children")
        return [int(word) for word in children.read_text().split()] if children.exists() else []


@contextmanager
def tokrace_web(args: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: Path | None = None,
                logs: Path | None = None, timeout: float = 30.0) -> Iterator[WebProcess]:
    """Run ``tokrace web --port 0 ARGS`` and yield it once it serves; Ctrl-C it at the end (killed when it has
    not stopped 15 s later, so a test can tell by its exit code).

    Its output goes to ``logs``/stdout and ``logs``/stderr, not pipes: with ``--verbose`` the server logs every
    request and a full pipe would stall it."""
    if logs is None:
        with tempfile.TemporaryDirectory(prefix="tokrace-web-") as scratch, \
                tokrace_web(args, env=env, cwd=cwd, logs=Path(scratch), timeout=timeout) as web:
            yield web
        return
    logs.mkdir(parents=True, exist_ok=True)
    out, err = logs / "stdout", logs / "stderr"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        server = subprocess.Popen([sys.executable, "-m", "tokrace.tui.main", "web", "--port", "0", *args],
                                  stdout=stdout, stderr=stderr, env=None if env is None else dict(env), cwd=cwd)
    try:
        deadline = time.monotonic() + timeout
        while (found := SERVING.search(out.read_text(errors="replace"))) is None:
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"tokrace web did not start (exit {server.poll()}):\n{err.read_text()}")
            time.sleep(0.05)
        yield WebProcess(found.group(1), server)
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


class Browser:
    """One headless chromium tab on a page of ``tokrace web``, reading and typing into its terminal."""

    def __init__(self, url: str, size: tuple[int, int] = (1280, 800)) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        options = webdriver.ChromeOptions()
        options.binary_location = str(CHROMIUM)
        for flag in FLAGS:
            options.add_argument(flag)
        self._profile = tempfile.TemporaryDirectory(prefix="tokrace-chromium-")
        options.add_argument(f"--user-data-dir={self._profile.name}")
        self._closed = False
        self.driver: Any = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
        width, height = size
        self.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                    {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        self.driver.get(url)

    def close(self) -> None:
        """Close the browser (again is a no-op)."""
        if self._closed:
            return
        self._closed = True
        self.driver.quit()
        self._profile.cleanup()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _find_terminal(self) -> bool:
        cdp = self.driver.execute_cdp_cmd
        prototype = cdp("Runtime.evaluate", {"expression": "Object.prototype"})["result"]["objectId"]
        every = cdp("Runtime.queryObjects", {"prototypeObjectId": prototype})["objects"]["objectId"]
        try:
            found = cdp("Runtime.callFunctionOn", {"objectId": every, "functionDeclaration": FIND_TERMINAL,
                                                   "returnByValue": True})
        finally:
            cdp("Runtime.releaseObject", {"objectId": every})
        return bool(found["result"].get("value"))

    def screen(self) -> str:
        """The terminal's rows as text ("" until the page has made its terminal)."""
        text = self.driver.execute_script(f"return (function () {{ {READ_ROWS} }})();")
        if text is None:
            if not self._find_terminal():
                return ""
            text = self.driver.execute_script(f"return (function () {{ {READ_ROWS} }})();")
        return str(text or "")

    def wait_for(self, *texts: str, timeout: float = 30.0) -> str:
        """The screen once every one of ``texts`` is on it; ``AssertionError`` with the screen after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if all(text in screen for text in texts):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"not on the page after {timeout:.0f} s: {texts!r}; the page shows:\n{screen}")
            time.sleep(0.1)

    def wait_for_race_end(self, timeout: float = 60.0, podium: bool = True) -> str:
        """The screen once the race has ended and its summary shows ("… ahead of …" or "… tied at …": while racing,
        the status line only says who finished first). With ``podium`` (the screen's default), the podium laid over
        the race when it ends must have shown and been dismissed first, with Escape, which the race screen itself
        ignores outside the prompt bar: the summary can reach the page a frame before the podium does, and a key
        pressed then would go to the podium, not to the race screen. Escape is pressed once: a second one could
        come after the podium has gone and, followed closely by the caller's next key, read as alt+key."""
        from selenium.webdriver.common.keys import Keys

        deadline = time.monotonic() + timeout
        dismissed = not podium
        while True:
            screen = self.screen()
            if not dismissed and "any key continues" in screen:
                self.press(Keys.ESCAPE)
                dismissed = True
            elif dismissed and "any key continues" not in screen and (" ahead of " in screen or " tied at " in screen):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"the race did not end within {timeout:.0f} s; the page shows:\n{screen}")
            time.sleep(0.1)

    def press(self, keys: str, *, focus: bool = True) -> None:
        """Type ``keys`` into the terminal, as a user with the page focused would: into xterm's hidden text
        area, focused by script (selenium refuses to type into an element it deems hidden). Without ``focus``,
        into whatever the page itself focused, as a user typing before clicking anything."""
        from selenium.webdriver.common.action_chains import ActionChains

        if focus:
            self.driver.execute_script("document.querySelector('textarea.xterm-helper-textarea').focus();")
        ActionChains(self.driver).send_keys(keys).perform()

    def screenshot(self, path: Path) -> Path:
        """Save the page as a PNG."""
        path.parent.mkdir(parents=True, exist_ok=True)
        if not self.driver.save_screenshot(str(path)):
            raise RuntimeError(f"chromium could not save a screenshot to {path}")
        return path
