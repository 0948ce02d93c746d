"""A server that lies and misbehaves at the byte level, for the load generator's robustness tests.

Unlike ``fake_sglang`` (a correct aiohttp server with scripted faults), this one writes raw bytes on
a socket, so it can also send what no HTTP library would: trickled headers, bad status lines,
endless bodies. The first path segment picks the behaviour, so one server serves every case: a
client given the base URL ``http://127.0.0.1:PORT/huge_usage`` posts to
``/huge_usage/v1/chat/completions`` and gets that answer. Routes of the accept-length probe
(``/metrics``, ``/server_info``, ``/flush_cache``) answer with NaN, inf and negative figures. It
runs in a background thread with its own event loop, on 127.0.0.1 only.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager

Writer = asyncio.StreamWriter
_SSE_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
             b"Connection: close\r\n\r\n")
_TICK_S = 0.01  # between the events of an endless stream: slow enough to keep the CPU free


def _chunk(content: str, usage: object | None = None, raw_usage: str | None = None) -> bytes:
    """One chat-completion SSE event; ``raw_usage`` is spliced in as is (for NaN, Infinity,
    10**30)."""
    obj: dict[str, object] = {"id": "x", "object": "chat.completion.chunk",
                              "choices": [{"index": 0, "delta": {"content": content},
                                           "finish_reason": None}]}
    if usage is not None:
        obj["usage"] = usage
    text = json.dumps(obj)
    if raw_usage is not None:
        text = text[:-1] + f', "usage": {raw_usage}}}'
    return f"data: {text}\n\n".encode()


def _usage(completion: str, prompt: str = "7") -> str:
    return f'{{"prompt_tokens": {prompt}, "completion_tokens": {completion}}}'


async def _stream(writer: Writer, events: list[bytes], done: bool = True) -> None:
    writer.write(_SSE_HEAD)
    for event in events:
        writer.write(event)
        await writer.drain()
    if done:
        writer.write(b"data: [DONE]\n\n")


def _lying_usage(completion: str, prompt: str = "7") -> Callable[[Writer], Awaitable[None]]:
    """Two believable chunks, then one whose usage says ``completion`` (as the server's raw
    JSON)."""
    async def answer(writer: Writer) -> None:
        await _stream(writer, [_chunk("Hello", raw_usage=_usage("1", prompt)),
                               _chunk(" world", raw_usage=_usage("2", prompt)),
                               _chunk("!", raw_usage=_usage(completion, prompt))])
    return answer


async def _over_max_tokens(writer: Writer) -> None:
    # honest-looking, incrementing counts, but far past any max_tokens the tests send (16)
    await _stream(writer, [_chunk(" t", {"prompt_tokens": 7, "completion_tokens": i})
                           for i in range(1, 201)])


async def _too_many_chunks(writer: Writer) -> None:
    # no usage at all, and more text chunks than max_tokens allows: the trace must not grow with
    # them
    writer.write(_SSE_HEAD)
    for _ in range(100_000):
        writer.write(_chunk(" t"))
        await writer.drain()


async def _truncated(writer: Writer) -> None:
    await _stream(writer, [_chunk("Hello", raw_usage=_usage("1"))], done=False)


async def _truncated_mid_event(writer: Writer) -> None:
    await _stream(writer, [_chunk("Hello", raw_usage=_usage("1")), b'data: {"id": "x", "choi'],
                  done=False)


async def _endless(writer: Writer) -> None:
    # events keep coming (no stall), the count never moves, and [DONE] never comes
    writer.write(_SSE_HEAD)
    writer.write(_chunk("Hello", raw_usage=_usage("1")))
    while True:
        writer.write(_chunk("", raw_usage=_usage("1")))
        await writer.drain()
        await asyncio.sleep(_TICK_S)


async def _garbage_json(writer: Writer) -> None:
    await _stream(writer, [_chunk("Hello", raw_usage=_usage("1")), b"data: {nope, not json\n\n"])


async def _json_array(writer: Writer) -> None:
    await _stream(writer, [b"data: [1, 2, 3]\n\n"])


async def _html_200(writer: Writer) -> None:
    body = b"<html><body><h1>Welcome to nginx!</h1></body></html>\n"
    writer.write(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n" % len(body)
        + body)


async def _slow_headers(writer: Writer) -> None:
    for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"y" * 1_000_000:
        writer.write(bytes([byte]))
        await writer.drain()
        await asyncio.sleep(_TICK_S)


async def _bad_status_line(writer: Writer) -> None:
    writer.write(b"HTTP/1.1 two hundred\r\n\r\n")


async def _huge_line(writer: Writer) -> None:
    writer.write(_SSE_HEAD)
    for _ in range(64):  # 4 MiB in one line, no newline: more than any SSE event may be
        writer.write(b"data: " + b"x" * 65536)
        await writer.drain()


async def _error_500_endless_body(writer: Writer) -> None:
    writer.write(b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\n\r\n")
    while True:
        writer.write(b"out of memory " * 1000)
        await writer.drain()
        await asyncio.sleep(_TICK_S)


async def _odd_error_event(writer: Writer) -> None:
    await _stream(writer, [_chunk("Hello", raw_usage=_usage("1")), b'data: {"error": 12345}\n\n'])


async def _ok(writer: Writer) -> None:
    await _stream(writer, [_chunk("Hello", {"prompt_tokens": 7, "completion_tokens": 1}),
                           _chunk(" world", {"prompt_tokens": 7, "completion_tokens": 3})])


#: path segment -> how the server answers a generation request there
BEHAVIOURS: dict[str, Callable[[Writer], Awaitable[None]]] = {
    "huge_usage": _lying_usage("200000000"),
    "huge_usage_1e30": _lying_usage("1" + "0" * 30),
    "negative_usage": _lying_usage("-5"),
    "string_usage": _lying_usage('"12"'),
    "float_usage": _lying_usage("3.5"),
    "nan_usage": _lying_usage("NaN"),
    "inf_usage": _lying_usage("Infinity"),
    "bool_usage": _lying_usage("true"),
    "negative_prompt_tokens": _lying_usage("3", prompt="-1"),
    "nan_prompt_tokens": _lying_usage("3", prompt="NaN"),
    "over_max_tokens": _over_max_tokens,
    "too_many_chunks": _too_many_chunks,
    "truncated": _truncated,
    "truncated_mid_event": _truncated_mid_event,
    "endless": _endless,
    "garbage_json": _garbage_json,
    "json_array": _json_array,
    "html_200": _html_200,
    "slow_headers": _slow_headers,
    "bad_status_line": _bad_status_line,
    "huge_line": _huge_line,
    "error_500_endless_body": _error_500_endless_body,
    "odd_error_event": _odd_error_event,
    "ok": _ok,
}

_METRICS = ('sglang:generation_tokens_total{model_name="m"} NaN\n'
            'sglang:spec_verify_calls_total{model_name="m"} -Inf\n')
_SERVER_INFO = '{"internal_states": [{"avg_spec_accept_length": NaN}]}'


async def _plain(writer: Writer, status: str, body: str) -> None:
    data = body.encode()
    writer.write(
        f"HTTP/1.1 {status}\r\nContent-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode()
        + data)


class HostileServer:
    def __init__(self) -> None:
        self.port = 0
        self.requests: dict[str, int] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None

    def url(self, behaviour: str) -> str:
        return f"http://127.0.0.1:{self.port}/{behaviour}"

    async def _handle(self, reader: asyncio.StreamReader, writer: Writer) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            request_line, *headers = head.decode("latin-1").split("\r\n")
            length = next((int(h.split(":", 1)[1]) for h in headers
                           if h.lower().startswith("content-length:")), 0)
            await reader.readexactly(length)
            path = request_line.split(" ")[1]
            behaviour, _, route = path.lstrip("/").partition("/")
            self.requests[behaviour] = self.requests.get(behaviour, 0) + 1
            if route == "metrics":
                await _plain(writer, "200 OK", _METRICS)
            elif route in ("server_info", "get_server_info"):
                await _plain(writer, "200 OK", _SERVER_INFO)
            elif route == "flush_cache":
                await _plain(writer, "200 OK", "Cache flushed.")
            elif behaviour in BEHAVIOURS:
                await BEHAVIOURS[behaviour](writer)
            else:
                await _plain(writer, "404 Not Found", "no such behaviour")
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError,
                IndexError):
            pass  # the client gave up on us, which is the point of most behaviours
        finally:
            writer.close()

    async def _serve(self, ready: threading.Event) -> None:
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        ready.set()
        await self._stop.wait()
        server.close()
        rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in rest:  # endless handlers would otherwise die with the loop, noisily
            task.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

    @contextmanager
    def running(self) -> Iterator[HostileServer]:
        ready = threading.Event()
        loop = asyncio.new_event_loop()
        self._loop = loop
        thread = threading.Thread(target=loop.run_until_complete, args=(self._serve(ready),),
                                  daemon=True)
        thread.start()
        if not ready.wait(10):
            raise RuntimeError("the hostile server did not start")
        try:
            yield self
        finally:
            assert self._stop is not None
            loop.call_soon_threadsafe(self._stop.set)
            thread.join(10)
            loop.close()


@contextmanager
def hostile_server() -> Iterator[HostileServer]:
    with HostileServer().running() as server:
        yield server
