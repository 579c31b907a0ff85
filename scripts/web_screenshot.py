"""Render the README's screenshot of ``tokrace web``: the offline demo raced to its end in headless chromium.

Never by hand, so it stays true as the screen changes. Needs Debian's chromium and chromium-driver
(``apt-get install -y chromium chromium-driver``) and the test extra (selenium). The demo runs on real time, so
the figures differ a little from one run to the next; the picture is the same.

    python scripts/web_screenshot.py [--out screenshots/web.png] [--size 1280x800]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the browser driver the browser test uses

from browser import Browser, missing_browser, tokrace_web  # noqa: E402


def size(text: str) -> tuple[int, int]:
    try:
        width, height = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT in pixels, got {text!r}") from None
    return width, height


def main() -> int:
    parser = argparse.ArgumentParser(description="Screenshot the race screen served by `tokrace web`.")
    parser.add_argument("--out", type=Path, default=ROOT / "screenshots" / "web.png")
    parser.add_argument("--size", type=size, default=(1280, 800), help="the page in pixels (default 1280x800)")
    args = parser.parse_args()
    if (problem := missing_browser()) is not None:
        print(f"web_screenshot: {problem}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="tokrace-shot-") as scratch:
        # A fresh user: the built-in themes, no remembered theme, no config found, nothing recorded.
        env = {**os.environ, "XDG_CONFIG_HOME": f"{scratch}/config", "XDG_DATA_HOME": f"{scratch}/data"}
        with tokrace_web(["demo", "--no-record"], env=env, cwd=Path(scratch)) as web, \
                Browser(web.url, args.size) as browser:
            browser.wait_for_race_end(timeout=120)
            print(browser.screenshot(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
