"""Load a page in Debian's headless Chromium: the DOM after scripts ran, and every console message."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CI"), reason="chromium not installed (make system-deps installs it)"
)
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
    "--virtual-time-budget=10000",
]
_CONSOLE = re.compile(r":CONSOLE[:(]\d*\)?\] (.*)")


def load(page: Path, *flags: str) -> tuple[str, list[str]]:
    """(DOM after load, console messages); ``flags``: Chromium's more (``--window-size=1280,900``). The page
    gets no network: it must be self-contained."""
    assert CHROMIUM, "chromium must be installed in CI: run make system-deps"
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [CHROMIUM, *FLAGS, *flags, f"--user-data-dir={profile}", "--dump-dom", page.resolve().as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
        )
    console = [m.group(1) for m in map(_CONSOLE.search, done.stderr.splitlines()) if m]
    return done.stdout, console


def figures_of(page: str) -> dict[str, dict[str, object]]:
    """The charts' figures a report carries (gzipped JSON in base64, as its loader reads them)."""
    import base64
    import gzip
    import json

    found = re.search(r'<script type="application/octet-stream" id="nsync-figures">([^<]*)</script>', page)
    assert found, "no figures in the page"
    return json.loads(gzip.decompress(base64.b64decode(found.group(1))))
