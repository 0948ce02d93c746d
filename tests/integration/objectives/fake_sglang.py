"""A deliberately scriptable stand-in for an SGLang server, for the load generator's tests.

Each request is answered in the ``Mode`` picked by ``modes[request_number % len(modes)]``: a correct
stream (OpenAI chat/completions with continuous usage, or native /generate), or one specific way of
being broken. It runs in a background thread with its own event loop, listening on 127.0.0.1 only,
so both in-process clients and ``spectune bench`` subprocesses can use it.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum

from aiohttp import web


class Mode(StrEnum):
    OK = "ok"
    # usage only in the last chunk (no continuous_usage_stats)
    FINAL_USAGE_ONLY = "final_usage_only"
    NO_USAGE = "no_usage"
    BAD_USAGE = "bad_usage"  # completion_tokens goes down
    HTTP_500 = "http_500"
    HTTP_400 = "http_400"
    BAD_JSON = "bad_json"
    ERROR_EVENT = "error_event"  # {"error": ...} inside a 200 stream
    RESET = "reset"  # a few chunks, then the TCP connection is aborted
    TRUNCATED = "truncated"  # a few chunks, then a clean end without [DONE]
    STALL = "stall"  # a few chunks, then silence


@dataclass
class Script:
    modes: Sequence[Mode] = (Mode.OK,)
    chunks: int = 10  # content chunks per response
    tokens_per_chunk: int = 3
    chunk_delay_s: float = 0.002
    first_token_delay_s: float = 0.005
    metrics: bool = True  # serve /metrics with speculative counters
    accept_length: float = 3.0  # reported through /metrics and /server_info
    time_scale: float | None = None  # reported by /server_info when set, as a simulator could
    #: Stamp every event as the simulator does ([arrival, chunk] on its schedule): request k (in
    #: arrival order) arrives at schedule_gap_s·k and its i-th content chunk is at arrival +
    #: schedule_chunk_s·(i + 1).
    schedule: bool = False
    schedule_gap_s: float = 1.0
    schedule_chunk_s: float = 0.1
    #: Serve the simulator's schedule account in /server_info: each read adds 1 s busy, this share
    #: dropped.
    dropped_share: float | None = None
    account_reads: int = 0
    requests: int = 0  # answered so far (all routes that generate)
    bodies: list[dict] = field(default_factory=list)
    flushes: int = 0


def _sse(obj: object) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


class FakeServer:
    def __init__(self, script: Script) -> None:
        self.script = script
        self.generated_tokens = 0
        self.verify_calls = 0
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # ----- routes ---------------------------------------------------------------------------------
    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list",
                                  "data": [{"id": "fake-model", "object": "model"}]})

    async def metrics(self, request: web.Request) -> web.Response:
        if not self.script.metrics:
            return web.Response(status=404)
        text = (
            "# HELP sglang:generation_tokens_total Generated tokens\n"
            "# TYPE sglang:generation_tokens_total counter\n"
            f'sglang:generation_tokens_total{{model_name="fake-model"}} '
            f'{float(self.generated_tokens)}\n'
            'sglang:spec_verify_calls_total{model_name="fake-model"} '
            f'{float(self.verify_calls)}\n'
        )
        return web.Response(text=text)

    async def server_info(self, request: web.Request) -> web.Response:
        info: dict = {"internal_states": [{"avg_spec_accept_length": self.script.accept_length}]}
        if self.script.time_scale is not None:
            info["time_scale"] = self.script.time_scale
        if self.script.dropped_share is not None:
            self.script.account_reads += 1
            busy = float(self.script.account_reads)
            info["simulator"] = {"busy_s": busy, "dropped_s": busy * self.script.dropped_share}
        return web.json_response(info)

    async def flush_cache(self, request: web.Request) -> web.Response:
        self.script.flushes += 1
        return web.Response(text="Cache flushed.")

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, "chat")

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, "completions")

    async def native(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, "generate")

    async def _generate(self, request: web.Request, api: str) -> web.StreamResponse:
        try:
            return await self._answer(request, api)
        # the client went away (a phase cancelling its in-flight requests)
        except ConnectionResetError:
            return web.Response(status=499)

    async def _answer(self, request: web.Request, api: str) -> web.StreamResponse:
        s = self.script
        body = await request.json()
        s.bodies.append(body)
        mode = s.modes[s.requests % len(s.modes)]
        arrival = s.schedule_gap_s * s.requests
        s.requests += 1
        if mode is Mode.HTTP_500:
            return web.json_response({"object": "error", "message": "out of memory", "code": 500},
                                     status=500)
        if mode is Mode.HTTP_400:
            return web.json_response({"object": "error", "message": "bad request", "code": 400},
                                     status=400)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await asyncio.sleep(s.first_token_delay_s)
        if api == "chat":
            role = self._openai_chunk(api, "", 0, None, mode, role=True)
            if s.schedule:
                role["simulator_schedule"] = [arrival, arrival + s.schedule_chunk_s]
            await response.write(_sse(role))
        total = 0
        for i in range(s.chunks):
            if i:
                await asyncio.sleep(s.chunk_delay_s)
            if mode in (Mode.RESET, Mode.TRUNCATED, Mode.STALL) and i == 2:
                break
            if mode is Mode.BAD_JSON and i == 2:
                await response.write(b"data: {this is not json\n\n")
                continue
            if mode is Mode.ERROR_EVENT and i == 2:
                await response.write(_sse({"error": {"message": "scheduler crashed", "code": 500}}))
                continue
            n = 1 if i == 0 else s.tokens_per_chunk  # the prefill's token comes alone, as in SGLang
            total += n
            reported = total - 5 if (mode is Mode.BAD_USAGE and i == 4) else total
            text = " tok" * n
            last = i == s.chunks - 1
            stamp = ({"simulator_schedule": [arrival, arrival + s.schedule_chunk_s * (i + 1)]}
                     if s.schedule else {})
            if api == "generate":
                meta = {"id": "x", "finish_reason": {"type": "length"} if last else None,
                        "prompt_tokens": 7, "completion_tokens": reported}
                if mode is Mode.NO_USAGE:
                    meta.pop("completion_tokens")
                await response.write(_sse({"text": text * (i + 1), "meta_info": meta, **stamp}))
            else:
                chunk = self._openai_chunk(api, text, reported, "length" if last else None, mode)
                await response.write(_sse({**chunk, **stamp}))
        else:
            self.generated_tokens += total
            self.verify_calls += round((total - 1) / s.accept_length)
        if mode is Mode.RESET:
            assert request.transport is not None
            request.transport.abort()
            return response
        if mode is Mode.STALL:
            await asyncio.sleep(3600)
        if mode is Mode.TRUNCATED:
            await response.write_eof()
            return response
        if api != "generate" and mode not in (Mode.NO_USAGE,):
            await response.write(
                _sse({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": total}}))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    @staticmethod
    def _openai_chunk(api: str, text: str, tokens: int, finish: str | None, mode: Mode,
                      role: bool = False) -> dict:
        if api == "chat":
            delta = {"role": "assistant", "content": ""} if role else {"content": text}
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
        else:
            choice = {"index": 0, "text": text, "finish_reason": finish}
        chunk: dict = {"id": "x", "object": "chunk", "choices": [choice]}
        if mode not in (Mode.NO_USAGE, Mode.FINAL_USAGE_ONLY):
            chunk["usage"] = {"prompt_tokens": 7, "completion_tokens": tokens}
        return chunk

    # ----- lifecycle ------------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/metrics", self.metrics)
        app.router.add_get("/server_info", self.server_info)
        app.router.add_route("*", "/flush_cache", self.flush_cache)
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_post("/generate", self.native)
        return app

    async def _serve(self, ready: threading.Event) -> None:
        self._stop = asyncio.Event()
        runner = web.AppRunner(self.app(), shutdown_timeout=0.1)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        ready.set()
        await self._stop.wait()
        await runner.cleanup()
        # Handlers still sleeping in a stall would otherwise die with the loop, noisily.
        rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in rest:
            task.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

    @contextmanager
    def running(self) -> Iterator[FakeServer]:
        ready = threading.Event()
        loop = asyncio.new_event_loop()
        self._loop = loop
        thread = threading.Thread(target=loop.run_until_complete, args=(self._serve(ready),),
                                  daemon=True)
        thread.start()
        if not ready.wait(10):
            raise RuntimeError("the fake server did not start")
        try:
            yield self
        finally:
            assert self._stop is not None
            loop.call_soon_threadsafe(self._stop.set)
            thread.join(10)


@contextmanager
def fake_server(**script: object) -> Iterator[FakeServer]:
    with FakeServer(Script(**script)).running() as server:  # type: ignore[arg-type]
        yield server
