"""The report page in a real browser: headless Chromium loads it and every plot decodes as an image.

Driven over the Chrome DevTools Protocol (aiohttp's websocket client): navigate to the file, wait for the load
event, then ask the page for each plot's decoded size. A PNG that does not decode has naturalWidth 0.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.helpers import require_binary
from tuner.report.build import write_report

pytestmark = pytest.mark.timeout(60)

PLOTS = """JSON.stringify({
  title: document.title,
  images: Array.from(document.querySelectorAll('img.plot')).map(i => ({
    id: i.id, complete: i.complete, width: i.naturalWidth, height: i.naturalHeight,
    shown: i.getBoundingClientRect().width})),
  headings: Array.from(document.querySelectorAll('h2')).map(h => h.textContent),
  stepsCells: document.querySelectorAll('table.steps td').length,
})"""


def _start_chromium(binary: str, profile: Path) -> tuple[subprocess.Popen[bytes], int]:
    proc = subprocess.Popen([binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                             "--disable-extensions", "--disable-dev-shm-usage", f"--user-data-dir={profile}",
                             "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    port_file = profile / "DevToolsActivePort"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if port_file.exists() and port_file.read_text().strip():
            return proc, int(port_file.read_text().splitlines()[0])
        if proc.poll() is not None:
            raise RuntimeError(f"chromium exited {proc.returncode}: {proc.stderr.read().decode()[-2000:]}")
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError("chromium did not open its DevTools port within 30 s")


async def _inspect(port: int, url: str) -> dict[str, Any]:
    counter = itertools.count(1)
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{port}/json/list") as response:
            pages = [t for t in await response.json() if t["type"] == "page"]
        async with session.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=0) as ws:

            async def call(method: str, **params: Any) -> dict[str, Any]:
                message_id = next(counter)
                await ws.send_json({"id": message_id, "method": method, "params": params})
                async for msg in ws:
                    data = json.loads(msg.data)
                    if data.get("id") == message_id:
                        return data.get("result", {})
                    if data.get("method") == "Page.loadEventFired":
                        loaded.set()
                raise RuntimeError("DevTools connection closed")

            loaded = asyncio.Event()
            await call("Page.enable")
            await call("Page.navigate", url=url)
            deadline = time.monotonic() + 20
            while not loaded.is_set() and time.monotonic() < deadline:
                msg = await ws.receive(timeout=20)
                if json.loads(msg.data).get("method") == "Page.loadEventFired":
                    loaded.set()
            result = await call("Runtime.evaluate", expression=PLOTS, returnByValue=True)
            return json.loads(result["result"]["value"])  # type: ignore[no-any-return]


def test_report_renders_every_plot_in_headless_chromium(stored_study: Path, tmp_path: Path) -> None:
    binary = require_binary("chromium", "chromium-browser", "google-chrome")
    report = write_report(stored_study, tmp_path / "report")
    proc, port = _start_chromium(binary, tmp_path / "chromium-profile")
    try:
        page = asyncio.run(_inspect(port, report.page.resolve().as_uri()))
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert page["title"] == "spectune report: demo"
    images = {i["id"]: i for i in page["images"]}
    assert set(images) == {"plot-history", "plot-speeds", "plot-importances", "plot-failures"}
    for image in images.values():
        assert image["complete"] and image["width"] >= 400 and image["height"] >= 200, image
        assert image["shown"] > 100, image  # laid out on the page, not collapsed
    assert "Steps × concurrency" in page["headings"] and page["stepsCells"] >= 2
