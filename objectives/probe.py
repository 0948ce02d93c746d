"""The greedy probe: a few short prompts of the workload, generated at temperature 0, whole texts
kept.

What the output check compares between configurations (tuner/run/outputs.py). The prompts are the
workload's own (its dataset, from index ``PROBE_INDEX`` on: never a phase's prompt, so never a
prefix-cache hit from a phase), sent through the workload's API and streamed as the phases ask (a
whole JSON answer is read too). At temperature 0 a lossless speculative configuration must say what
the reference configuration says, up to the server's own batch-shape noise.

``concurrent=True`` sends them all at once (one batch, as a loaded server runs them); ``False`` one
after another (batch size 1): the two differ only in batch shape, which is how the noise floor is
measured.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from dataclasses import dataclass
from typing import Any

import aiohttp

from objectives.api import APIS
from objectives.prompts import load_source
from objectives.runner import discover_model, timeouts_for
from objectives.spec import WorkloadSpec

#: Probe prompts start at this index of the workload's prompt source (phases use k · 1,000,000 on).
PROBE_INDEX = 900_000_000


@dataclass(frozen=True)
class ProbeOutput:
    prompt: str  # the prompt's text (for a chat prompt: its messages, as the source renders them)
    text: str | None  # None: the request failed
    finish_reason: str | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, stored: Any) -> ProbeOutput:
        return cls(str(stored.get("prompt", "")), stored.get("text"), stored.get("finish_reason"),
                   stored.get("error"))


def probe_outputs(base_url: str, workload: WorkloadSpec, count: int, max_tokens: int, *,
                  concurrent: bool = True) -> tuple[ProbeOutput, ...]:
    """Synchronous; must not be called from a running event loop."""
    return asyncio.run(probe_outputs_async(base_url, workload, count, max_tokens,
                                           concurrent=concurrent))


async def probe_outputs_async(base_url: str, workload: WorkloadSpec, count: int, max_tokens: int, *,
                              concurrent: bool = True) -> tuple[ProbeOutput, ...]:
    greedy = dataclasses.replace(workload, temperature=0.0, max_tokens=max_tokens, ignore_eos=False)
    source = load_source(greedy)
    api = APIS[greedy.api]
    timeouts = timeouts_for(greedy)
    base_url = base_url.rstrip("/")
    timeout = aiohttp.ClientTimeout(total=timeouts.request_s, sock_connect=timeouts.connect_s)
    async with aiohttp.ClientSession() as session:
        model = greedy.model
        if model is None and greedy.api != "generate":
            model = await discover_model(session, base_url, timeouts)

        async def one(index: int) -> ProbeOutput:
            prompt = source.prompt(PROBE_INDEX + index)
            # Streamed, exactly as the phases ask (a server that streams correctly is all a
            # benchmark needs).
            body = api.build(prompt, greedy, model)
            try:
                async with session.post(f"{base_url}{api.path}", data=json.dumps(body).encode(),
                                        headers={"Content-Type": "application/json"},
                                        timeout=timeout) as response:
                    if response.status != 200:
                        return ProbeOutput(prompt.text, None, error=f"HTTP {response.status}")
                    raw = await response.read()
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                return ProbeOutput(prompt.text, None, error=type(exc).__name__)
            text, finish = _read(greedy.api, raw)
            return ProbeOutput(prompt.text, text, finish, None if text is not None
                               else "no text in the answer")

        if concurrent:
            return tuple(await asyncio.gather(*(one(i) for i in range(count))))
        return tuple([await one(i) for i in range(count)])


def _read(api: str, raw: bytes) -> tuple[str | None, str | None]:
    """(text, finish reason) of a streamed answer (SSE ``data:`` events), or of a whole JSON one."""
    body = raw.decode("utf-8", errors="replace")
    if not body.lstrip().startswith("data:"):
        try:
            return _answer(api, json.loads(body))
        except ValueError:
            return None, None
    parts: list[str] = []
    finish: str | None = None
    for line in body.splitlines():
        if not line.startswith("data:") or line[5:].strip() == "[DONE]":
            continue
        try:
            event = json.loads(line[5:])
        except ValueError:
            return None, None
        if not isinstance(event, dict) or "error" in event:
            return None, None
        if api == "generate":  # cumulative text on every event
            text, finish = _answer(api, event)
            parts = [text or ""]
            continue
        choices = event.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            continue  # the usage-only chunk
        choice = choices[0]
        delta = (choice.get("delta") or {}) if api == "chat" else {"content": choice.get("text")}
        parts.append((delta.get("reasoning_content") or "") + (delta.get("content") or ""))
        finish = choice.get("finish_reason") or finish
    return "".join(parts), finish


def _answer(api: str, payload: Any) -> tuple[str | None, str | None]:
    """(text, finish reason) of a non-streamed answer of ``api``."""
    if not isinstance(payload, dict):
        return None, None
    if api == "generate":
        meta = payload.get("meta_info") or {}
        finish = meta.get("finish_reason")
        finish = finish.get("type") if isinstance(finish, dict) else finish
        text = payload.get("text")
        return (text if isinstance(text, str) else None), finish
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None, None
    choice = choices[0]
    if api == "chat":
        message = choice.get("message") or {}
        text = (message.get("reasoning_content") or "") + (message.get("content") or "")
    else:
        text = choice.get("text")
    return (text if isinstance(text, str) else None), choice.get("finish_reason")
