"""The HTTP side of the simulator: SGLang 0.5.23's routes on aiohttp, over one ``Engine``.

The app listens from the start of the process (before the simulated weight loading), so
``/v1/models`` answers early, while ``/health``, ``/health_generate`` and ``/ready`` say 503 until
the startup script and the warmup request are done — the difference reference notes §0.5 warns
tuners about.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tuner.simulator import faults, protocol
from tuner.simulator.bursts import PrimedConnections
from tuner.simulator.coalescing import EVENT_BUDGET_PER_S
from tuner.simulator.config import ServerConfig
from tuner.simulator.engine import (
    Engine,
    GenerationFailed,
    GenerationRequest,
    RequestHandle,
)
from tuner.simulator.profile import Profile

VERSION = "0.5.23"
FLUSH_MESSAGE = ("Cache flushed.\nPlease check backend logs for more details. (When there are "
                 "running or waiting requests, the operation will not be performed.)\n")
#: SGLANG_HEALTH_CHECK_TIMEOUT
HEALTH_TIMEOUT_S = 20.0
_SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
_DONE = b"data: [DONE]\n\n"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _sse(obj: object) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def _json(obj: object, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(obj, default=str), status=status,
                        content_type="application/json")


@dataclass
class ServerState:
    profile: Profile
    config: ServerConfig
    engine: Engine
    ready: bool = False  # startup and warmup done
    started: float = field(default_factory=time.time)
    startup_time: dict[str, object] = field(default_factory=dict)


class SimulatorApp:
    def __init__(self, state: ServerState) -> None:
        self.state = state
        self.primed = PrimedConnections()
        state.engine.burst_pending = self.primed.pending

    @property
    def engine(self) -> Engine:
        return self.state.engine

    @property
    def model_name(self) -> str:
        return self.state.config.served_model_name

    def build(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024, middlewares=[self._connections])
        r = app.router
        r.add_get("/health", self.health)
        r.add_get("/health_generate", self.health)
        r.add_get("/ready", self.ready)
        r.add_get("/v1/models", self.models)
        for path in ("/model_info", "/get_model_info"):
            r.add_get(path, self.model_info)
        for path in ("/server_info", "/get_server_info"):
            r.add_get(path, self.server_info)
        r.add_route("GET", "/flush_cache", self.flush_cache)
        r.add_route("POST", "/flush_cache", self.flush_cache)
        r.add_post("/v1/completions", self.openai("completions"))
        r.add_post("/v1/chat/completions", self.openai("chat"))
        r.add_post("/generate", self.generate)
        if self.state.config.args.get("enable_metrics"):
            r.add_get("/metrics", self.metrics)
        return app

    @web.middleware
    async def _connections(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """A GET leaves its connection primed for a burst once answered, and any request uses it (a
        health check's own generation does not wait for its connection; bursts.py)."""
        self.primed.used(request.transport)
        response = await handler(request)
        if request.method == "GET":
            self.primed.prime(request.transport)
        return response

    # ----- readiness ------------------------------------------------------------------------------
    async def health(self, request: web.Request) -> web.Response:
        if not self.state.ready:
            return web.Response(status=503)
        # A one-token greedy generation through the scheduler, as SGLang's health check does.
        handle = self.engine.submit(GenerationRequest(prompt="health", max_new_tokens=1,
                                                      internal=True))
        try:
            async with asyncio.timeout(HEALTH_TIMEOUT_S):
                async for _ in handle.chunks():
                    pass
        except (TimeoutError, GenerationFailed):
            self.engine.cancel(handle)
            return web.Response(status=503)
        return web.Response(status=200)

    async def ready(self, request: web.Request) -> web.Response:
        return web.Response(status=200 if self.state.ready else 503)

    # ----- information ----------------------------------------------------------------------------
    async def models(self, request: web.Request) -> web.Response:
        name = self.model_name
        return _json({"object": "list", "data": [{
            "id": name, "object": "model", "created": int(self.state.started), "owned_by": "sglang",
            "root": name, "parent": None, "max_model_len": self.state.config.context_length}]})

    async def model_info(self, request: web.Request) -> web.Response:
        config, model = self.state.config, self.state.profile.model
        return _json({
            "model_path": config.model_path, "tokenizer_path": config.args.get("tokenizer_path")
            or config.model_path,
            "served_model_name": config.served_model_name, "is_generation": True,
            "preferred_sampling_params": None, "weight_version": "default",
            "has_image_understanding": False, "has_audio_understanding": False,
            "model_type": model.architecture.removesuffix("ForCausalLM").lower(),
            "architectures": [model.architecture],
        })

    async def server_info(self, request: web.Request) -> web.Response:
        config, engine, counters = self.state.config, self.engine, self.engine.counters
        memory = config.memory
        internal: dict[str, Any] = {
            **config.args,
            "effective_max_running_requests_per_dp": config.max_running_requests,
            "last_gen_throughput": counters.last_gen_throughput,
            "memory_usage": {"weight": round(memory.weights_gb, 2),
                             "kvcache": round(memory.kv_gb, 2),
                             "token_capacity": config.max_total_num_tokens,
                             "graph": round(memory.graph_gb, 2)},
        }
        if config.speculative and counters.avg_spec_accept_length is not None:
            internal["avg_spec_accept_length"] = counters.avg_spec_accept_length
        return _json({
            **config.args,
            "launch_command": " ".join(["python", "-m", "sglang.launch_server", *config.argv]),
            "max_total_num_tokens": config.max_total_num_tokens,
            "max_req_input_len": config.context_length - 1,
            "version": VERSION,
            "startup_time": self.state.startup_time,
            "internal_states": [internal],
            "num_running_reqs": engine.num_running,
            "num_queue_reqs": engine.num_waiting,
            "simulator": schedule_state(engine),
        })

    async def flush_cache(self, request: web.Request) -> web.Response:
        try:
            timeout = float(request.query.get("timeout", "0"))
        except ValueError:
            timeout = 0.0
        deadline = time.monotonic() + max(timeout, 0.0)
        while not self.engine.flush():
            if time.monotonic() >= deadline:
                return web.Response(text=FLUSH_MESSAGE, status=400)
            await asyncio.sleep(0.01)
        return web.Response(text=FLUSH_MESSAGE, status=200)

    async def metrics(self, request: web.Request) -> web.Response:
        engine, c, config = self.engine, self.engine.counters, self.state.config
        label = '{model_name="' + self.model_name.replace("\\", "\\\\").replace('"', '\\"') + '"}'
        series = [
            ("generation_tokens_total", "counter", "Number of generation tokens processed.",
             c.generation_tokens_total),
            ("prompt_tokens_total", "counter", "Number of prefill tokens processed.",
             c.prompt_tokens_total),
            ("spec_verify_calls_total", "counter", "Number of speculative verify forwards.",
             c.verify_calls_total),
            ("num_requests_total", "counter", "Number of requests processed.", c.requests_total),
            ("num_running_reqs", "gauge", "The number of running requests.", engine.num_running),
            ("num_queue_reqs", "gauge", "The number of requests in the waiting queue.",
             engine.num_waiting),
            ("token_usage", "gauge", "The token usage.",
             engine.kv_used / config.max_total_num_tokens if config.max_total_num_tokens else 0.0),
            ("gen_throughput", "gauge", "The generation throughput (token/s).",
             c.last_gen_throughput),
            ("spec_accept_length", "gauge",
             "The average acceptance length of speculative decoding.",
             c.avg_spec_accept_length or 0.0),
            ("spec_num_steps", "gauge", "Speculative decoding steps.", config.num_steps),
            ("spec_num_draft_tokens", "gauge", "Speculative draft tokens.",
             config.draft_tokens if config.speculative else 0),
        ]
        lines = []
        for name, kind, help_text, value in series:
            lines += [f"# HELP sglang:{name} {help_text}", f"# TYPE sglang:{name} {kind}",
                      f"sglang:{name}{label} {float(value)}"]
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain",
                            charset="utf-8")

    # ----- generation -----------------------------------------------------------------------------
    def _not_ready(self) -> web.Response | None:
        if self.engine.started:
            # The profile's server-errors fault (tuner/simulator/faults.py).
            if self.engine.faults.refuses(self.engine.num_running + self.engine.num_waiting):
                return _json(protocol.error_body(faults.SERVER_ERROR, status=500,
                                                 kind="InternalServerError"),
                             status=500)
            return None
        return _json(protocol.error_body("The server is not ready yet.", status=503,
                                         kind="ServiceUnavailableError"), status=503)

    def openai(self, api: str) -> Handler:
        async def handle(request: web.Request) -> web.StreamResponse:
            early = self._not_ready()
            if early is not None:
                return early
            try:
                parsed = protocol.parse_openai(api, protocol.load_json(await request.read()),
                                               self.state.config.context_length)
            except protocol.BadRequest as exc:
                return _json(protocol.error_body(str(exc)), status=400)
            renderer = protocol.OpenAIRenderer.for_request(parsed, self.model_name)
            handle = self.engine.submit(parsed.generation, rid=parsed.rid)
            if parsed.stream:
                return await self._openai_stream(request, parsed, renderer, handle)
            return await self._openai_whole(parsed, renderer, handle)

        return handle

    async def _openai_stream(self, request: web.Request, parsed: protocol.ParsedRequest,
                             renderer: protocol.OpenAIRenderer,
                             handle: RequestHandle) -> web.StreamResponse:
        response = web.StreamResponse(headers=_SSE_HEADERS)
        continuous = parsed.stream_options.continuous_usage_stats
        try:
            await response.prepare(request)
            completion = 0
            first = True
            try:
                async for chunk in handle.chunks():
                    out = b""
                    if first and parsed.api == "chat":
                        out += _sse(renderer.role_chunk(continuous, chunk, handle.arrival_s))
                    first = False
                    completion = chunk.completion_tokens
                    await response.write(
                        out + _sse(renderer.chunk(chunk, continuous, handle.arrival_s)))
            except GenerationFailed as exc:
                body = protocol.error_body(str(exc), status=500, kind="InternalServerError")
                await response.write(_sse({"error": body}) + _DONE)
                return response
            tail = b""
            if parsed.spec_details and handle.stats is not None:
                tail += _sse(renderer.spec_chunk(handle.stats))
            if parsed.stream_options.include_usage or continuous:
                tail += _sse(renderer.usage_chunk(completion))
            await response.write(tail + _DONE)
            await response.write_eof()
        except ConnectionResetError:
            # The client went away (a phase ending cancels its in-flight requests): SGLang aborts
            # the request. Not re-raised: aiohttp would log a traceback for each, costing CPU while
            # the next phase starts.
            self.engine.cancel(handle)
        except asyncio.CancelledError:
            self.engine.cancel(handle)
            raise
        return response

    async def _openai_whole(self, parsed: protocol.ParsedRequest, renderer: protocol.OpenAIRenderer,
                            handle: RequestHandle) -> web.Response:
        parts: list[str] = []
        finish = None
        try:
            async for chunk in handle.chunks():
                parts.append(chunk.text)
                finish = chunk.finish_reason
        except GenerationFailed as exc:
            return _json(protocol.error_body(str(exc), status=500, kind="InternalServerError"),
                         status=500)
        except asyncio.CancelledError:
            self.engine.cancel(handle)
            raise
        return _json(renderer.response("".join(parts), finish, handle.stats, parsed.spec_details))

    async def generate(self, request: web.Request) -> web.StreamResponse:
        early = self._not_ready()
        if early is not None:
            return early
        try:
            parsed = protocol.parse_generate(protocol.load_json(await request.read()),
                                             self.state.config.context_length)
        except protocol.BadRequest as exc:
            return _json({"error": {"message": str(exc)}}, status=400)
        handle = self.engine.submit(parsed.generation, rid=parsed.rid)
        started = time.monotonic()
        draft = self.state.config.draft_tokens
        response: web.StreamResponse | None = None
        if parsed.stream:
            response = web.StreamResponse(headers=_SSE_HEADERS)
        text, ids = "", []
        event: dict[str, Any] = {}
        try:
            if response is not None:
                await response.prepare(request)
            try:
                async for chunk in handle.chunks():
                    text += chunk.text
                    ids += protocol.output_ids(chunk.text)
                    event = protocol.native_event(parsed.rid, handle.prompt_tokens, text, ids,
                                                  chunk, draft, started,
                                                  handle.stats, handle.arrival_s)
                    if response is not None:
                        await response.write(_sse(event))
            except GenerationFailed as exc:
                if response is None:
                    return _json({"error": {"message": str(exc)}}, status=500)
                await response.write(_sse({"error": {"message": str(exc)}}) + _DONE)
                return response
            if response is None:
                return _json(event)
            await response.write(_DONE)
            await response.write_eof()
        except (ConnectionResetError, asyncio.CancelledError):
            self.engine.cancel(handle)
            raise
        return response


def schedule_state(engine: Engine) -> dict[str, Any]:
    """Not SGLang's: how well the simulator keeps its schedule, so that a measuring side can refuse
    a phase measured while the host was too busy (``dropped_s`` grew by more than a small share of
    ``busy_s``)."""
    stats = engine.clock.stats
    return {"time_scale": engine.time_scale, "simulated_s": stats.simulated_s,
            "busy_s": stats.busy_s, "dropped_s": stats.dropped_s, "late_events": stats.late_events,
            "max_lag_s": stats.max_lag_s,
            "lag_sum_s": stats.lag_sum_s, "phases": stats.phases, "held_s": stats.held_s,
            "holds_timed_out": stats.holds_timed_out,
            "lag_s": engine.clock.lag_s() if not engine.idle else 0.0,
            "tolerance_s": engine.clock.tolerance_s,
            "stream_interval": engine.stream_interval, "coalescing": engine.coalescing,
            "event_budget_per_s": EVENT_BUDGET_PER_S if engine.coalescing else None}


async def start_http(app: web.Application, host: str, port: int) -> web.AppRunner:
    """Listen on ``host:port`` (raises OSError when the address is taken)."""
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_address=True)
    try:
        await site.start()
    except OSError:
        with contextlib.suppress(Exception):
            await runner.cleanup()
        raise
    return runner
