"""The report page and the dashboard in a real browser: headless Chromium draws them; flag names and
values must be on the page, and the report must not make a single network request.

Driven over the Chrome DevTools Protocol (aiohttp's websocket client): navigate, wait for the load
event (and for a single-page app to render), record every request, then ask the page what it shows.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.helpers import require_binary, spectune_command
from tuner.report.build import write_report

pytestmark = pytest.mark.timeout(60)

PLOTS = """JSON.stringify({
  title: document.title,
  plots: Array.from(document.querySelectorAll('.js-plotly-plot')).map(p => ({
    id: p.id, width: p.getBoundingClientRect().width,
    svgs: p.querySelectorAll('svg.main-svg').length,
    hover: (p.data || []).map(t => (t.text || []).join('\\n')).join('\\n')})),
  headings: Array.from(document.querySelectorAll('h2')).map(h => h.textContent),
  stepsCells: document.querySelectorAll('table.steps td').length,
  text: document.body.innerText,
})"""
TEXT = "JSON.stringify({text: document.body ? document.body.innerText : ''})"


def _start_chromium(binary: str, profile: Path) -> tuple[subprocess.Popen[bytes], int]:
    proc = subprocess.Popen([binary, "--headless=new", "--no-sandbox", "--disable-gpu",
                             "--no-first-run", "--disable-extensions", "--disable-dev-shm-usage",
                             f"--user-data-dir={profile}",
                             "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
                             "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    port_file = profile / "DevToolsActivePort"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if port_file.exists() and port_file.read_text().strip():
            return proc, int(port_file.read_text().splitlines()[0])
        if proc.poll() is not None:
            raise RuntimeError(
                f"chromium exited {proc.returncode}: {proc.stderr.read().decode()[-2000:]}")
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError("chromium did not open its DevTools port within 30 s")


async def _inspect(port: int, url: str, expression: str = PLOTS,
                   wait_for: str | None = None) -> dict[str, Any]:
    """Load ``url``; evaluate ``expression`` (after ``wait_for`` appears in the page text, if
    given). The result carries ``requests``: every URL the page asked for."""
    counter = itertools.count(1)
    requests: list[str] = []
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{port}/json/list") as response:
            pages = [t for t in await response.json() if t["type"] == "page"]
        async with session.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=0) as ws:

            def note(data: dict[str, Any]) -> None:
                if data.get("method") == "Page.loadEventFired":
                    loaded.set()
                if data.get("method") == "Network.requestWillBeSent":
                    requests.append(data["params"]["request"]["url"])

            async def call(method: str, **params: Any) -> dict[str, Any]:
                message_id = next(counter)
                await ws.send_json({"id": message_id, "method": method, "params": params})
                async for msg in ws:
                    data = json.loads(msg.data)
                    if data.get("id") == message_id:
                        return data.get("result", {})
                    note(data)
                raise RuntimeError("DevTools connection closed")

            loaded = asyncio.Event()
            await call("Page.enable")
            await call("Network.enable")
            await call("Page.navigate", url=url)
            deadline = time.monotonic() + 40
            while not loaded.is_set() and time.monotonic() < deadline:
                msg = await ws.receive(timeout=40)
                note(json.loads(msg.data))
            while wait_for is not None and time.monotonic() < deadline:
                result = await call("Runtime.evaluate", expression=TEXT, returnByValue=True)
                if wait_for in json.loads(result["result"]["value"])["text"]:
                    break
                await asyncio.sleep(0.5)
            result = await call("Runtime.evaluate", expression=expression, returnByValue=True)
            return {**json.loads(result["result"]["value"]), "requests": requests}


def _in_chromium(tmp_path: Path, url: str, **kwargs: Any) -> dict[str, Any]:
    binary = require_binary("chromium", "chromium-browser", "google-chrome")
    proc, port = _start_chromium(binary, tmp_path / "chromium-profile")
    try:
        return asyncio.run(_inspect(port, url, **kwargs))
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_report_draws_every_plot_offline_with_flags_on_the_page(stored_study: Path,
                                                                tmp_path: Path) -> None:
    report = write_report(stored_study, tmp_path / "report")
    page = _in_chromium(tmp_path, report.page.resolve().as_uri())
    assert page["title"] == "spectune report: demo"
    plots = {p["id"]: p for p in page["plots"]}
    assert set(plots) == {f"plot-{k}"
                          for k in ("history", "speeds", "latencies", "importances", "failures")}
    for plot in plots.values():
        # drawn by plotly.js, laid out on the page
        assert plot["svgs"] >= 1 and plot["width"] > 300, plot
    assert "Steps × concurrency" in page["headings"] and page["stepsCells"] >= 2
    # Hover text: trial number, flag names with values, figures.
    hover = plots["plot-history"]["hover"]
    assert "trial 0" in hover and "(baseline)" in hover
    assert re.search(r"--speculative-num-steps=\d", hover) \
           and re.search(r"--mem-fraction-static=0\.\d+", hover)
    assert "tok/s" in hover and "score" in hover
    assert "--mem-fraction-static" in page["text"] and "--cuda-graph-max-bs-decode" in page["text"]
    assert "out-of-memory" in page["text"] and "rough guide" in page["text"]
    # Self-contained: the file itself is the only thing the page loaded.
    assert [u for u in page["requests"] if not u.startswith(("file:", "data:", "about:"))] == []


def test_dashboard_shows_flag_names_and_values(stored_study: Path, tmp_path: Path) -> None:
    proc = subprocess.Popen([*spectune_command(), "dashboard", str(stored_study), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().split()[1]
        page = _in_chromium(tmp_path, url, expression=TEXT, wait_for="--speculative-num-steps")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    text = page["text"]
    assert "--speculative-num-steps" in text and "--speculative-eagle-topk" in text, text[:2000]
    assert ".idx" not in text and ".pos" not in text and "mem-fraction-static.k" not in text
