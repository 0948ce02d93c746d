"""How much load the spectune load generator sustains on one CPU core, and how much it distorts what
it measures.

A tiny SSE server (raw asyncio, HTTP/1.1 chunked, SGLang-shaped chat chunks with continuous usage)
runs in a separate process on its own core and streams either as fast as it can or at a fixed pace,
logging the send time of every event. The load generator (the real ``PhaseRunner``) runs in this
process pinned to one core.

Figures printed:
* capacity: events/s and tokens/s the generator consumes from a zero-delay stream, at C=1 and C=64;
* gap overhead: per event, client arrival stamp − server send stamp (``perf_counter`` is
  CLOCK_MONOTONIC, shared by both processes), and |client gap − server gap| for consecutive events;
* throughput error: the generator's aggregate tok/s against the tokens the server actually sent
  inside the same measured window, at the seed's C=64 event rate (≈1900 tok/s, 2.5 tokens/event) and
  at a high rate;
* a control for the paced runs: the same streams read by a raw socket that only stamps each read, so
  that what the machine adds (scheduling, VM wake-ups) can be told from what the generator adds.

Run: ``.venv/bin/python bench/client_capacity.py`` (about 30 s). Results go in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

# ----- the server (runs in its own process) -------------------------------------------------------


def _event(tokens: int, total: int) -> bytes:
    content = " tok" * tokens
    obj = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1700000000,
           "model": "bench", "choices": [{"index": 0,
                        "delta": {"role": None, "content": content, "reasoning_content": None,
                                  "tool_calls": None}, "logprobs": None,
                        "finish_reason": None, "matched_stop": None}],
           "usage": {"prompt_tokens": 256, "total_tokens": 256 + total, "completion_tokens": total,
                     "prompt_tokens_details": None, "reasoning_tokens": 0}}
    data = b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(data), data)


_HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
         b"transfer-encoding: chunked\r\n\r\n")
_DONE = b"data: [DONE]\n\n"
_TAIL = b"%x\r\n%s\r\n0\r\n\r\n" % (len(_DONE), _DONE)


class SSEServer:
    """POST with {"bench": {"events": E, "pattern": [2, 3], "interval": s}, "rid": id}: E events,
    each with the next token count of ``pattern``, ``interval`` seconds apart (0: as fast as the
    socket takes them)."""

    def __init__(self) -> None:
        self.log: dict[str, list[tuple[float, int]]] = {}
        self._cache: dict[tuple[int, tuple[int, ...]], list[tuple[bytes, int]]] = {}

    def _events(self, count: int, pattern: tuple[int, ...]) -> list[tuple[bytes, int]]:
        key = (count, pattern)
        if key not in self._cache:
            total, events = 0, []
            for i in range(count):
                n = pattern[i % len(pattern)]
                total += n
                events.append((_event(n, total), n))
            self._cache[key] = events
        return self._cache[key]

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                body = json.loads(await reader.readexactly(length)) if length else {}
                if head.startswith(b"GET /log"):
                    payload = json.dumps(self.log).encode()
                    self.log = {}
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s"
                                 % (len(payload), payload))
                    continue
                if not head.startswith(b"POST"):
                    writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                    continue
                await self.stream(writer, body)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def stream(self, writer: asyncio.StreamWriter, body: dict[str, Any]) -> None:
        spec = body.get("bench", {})
        events = self._events(int(spec.get("events", 200)), tuple(spec.get("pattern", [2, 3])))
        interval = float(spec.get("interval", 0.0))
        sent: list[tuple[float, int]] = []
        self.log[str(body.get("rid"))] = sent
        writer.write(_HEAD)
        if interval <= 0:
            # Blocks of events per write keep this server far faster than any client: it is not what
            # is measured.
            for i in range(0, len(events), 16):
                if writer.is_closing():  # the client cancelled this request
                    return
                block = events[i:i + 16]
                writer.write(b"".join(chunk for chunk, _ in block))
                now = time.perf_counter()
                sent.extend((now, n) for _, n in block)
                await writer.drain()
        else:
            start = time.perf_counter()
            for i, (chunk, n) in enumerate(events):
                delay = start + i * interval - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                if writer.is_closing():
                    return
                writer.write(chunk)
                sent.append((time.perf_counter(), n))
        writer.write(_TAIL)
        await writer.drain()


async def _serve(cpu: int | None) -> None:
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    server = SSEServer()
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    print(listener.sockets[0].getsockname()[1], flush=True)
    async with listener:
        await listener.serve_forever()


# ----- the client side ----------------------------------------------------------------------------


@dataclass
class Run:
    label: str
    concurrency: int
    events_per_request: int
    interval: float
    requests: int | None = None
    duration_s: float | None = None


async def _measure(port: int, run: Run) -> dict[str, Any]:
    import aiohttp
    import numpy as np

    from objectives.api import APIS
    from objectives.client import Timeouts
    from objectives.phase import PhaseRunner
    from objectives.prompts import Prompt
    from objectives.spec import PhaseSpec, WorkloadSpec

    api = APIS["chat"]
    workload = WorkloadSpec()
    prompt = Prompt((("user", "hello"),))

    def body(index: int) -> bytes:
        obj = api.build(prompt, workload, "bench")
        obj["rid"] = index
        obj["bench"] = {"events": run.events_per_request, "pattern": [2, 3],
                        "interval": run.interval}
        return json.dumps(obj).encode()

    url = f"http://127.0.0.1:{port}"
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        spec = PhaseSpec(run.concurrency, requests=run.requests, duration_s=run.duration_s,
                         warmup=0)
        runner = PhaseRunner(session, url, api, body, spec, Timeouts(10, 60, 600))
        cpu0, wall0 = time.process_time(), time.perf_counter()
        result = await runner.run()
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        async with session.get(f"{url}/log") as response:
            log = json.loads(await response.read())
    # The server's truth over the same window: tokens it sent between t0 and t1.
    t0, t1 = runner.t0, runner.t1
    sent_tokens = sum(n for events in log.values() for t, n in events if t0 <= t <= t1)
    server_tok_s = sent_tokens / (t1 - t0)
    events = sum(len(r.chunk_times_s) for r in result.records)
    latency, gap_error = [], []
    starts = {r.index: r for r in result.records}
    for trace_index, record in starts.items():
        sent = log.get(str(trace_index))
        if not sent or record.error_kind is not None or len(sent) < len(record.chunk_times_s) < 2:
            continue
        client = np.asarray(record.chunk_times_s) + record.start_s + t0
        server = np.asarray([t for t, _ in sent[: len(client)]])
        latency.append(client - server)
        gap_error.append(np.abs(np.diff(client) - np.diff(server)))
    lat = np.concatenate(latency) * 1e6 if latency else np.empty(0)
    gaps = np.concatenate(gap_error) * 1e6 if gap_error else np.empty(0)
    return {
        "label": run.label,
        "C": run.concurrency,
        "events_s": events / (t1 - t0),
        "client_tok_s": result.aggregate_tok_s,
        "server_tok_s": server_tok_s,
        # Only meaningful when the server paces its streams: a zero-delay server sends as fast as
        # the socket buffers take it, so what it "sent" in the window runs ahead of what any client
        # has read.
        "throughput_error": (result.aggregate_tok_s or 0) / server_tok_s - 1 if run.interval > 0
        else None, "cpu_share": cpu / wall,
        # Events per second of the client's own CPU time: the capacity of one core even on a busy
        # machine.
        "events_per_cpu_s": events / cpu if cpu > 0 else None,
        # Latency too: against a zero-delay server it measures the socket buffers, not the client.
        "latency_us_mean": float(lat.mean()) if lat.size and run.interval > 0 else None,
        "latency_us_p99": float(np.percentile(lat, 99)) if lat.size and run.interval > 0 else None,
        "gap_error_us_mean": float(gaps.mean()) if gaps.size else None,
        "gap_error_us_p99": float(np.percentile(gaps, 99)) if gaps.size else None,
        "failed": result.failed,
    }


async def _control(port: int, run: Run) -> dict[str, Any]:
    """The same paced streams read by the least a client can do: a raw socket that stamps each read
    and counts the events in it — no HTTP parsing, no SSE, no JSON. What the machine itself adds to
    latency and gaps; the generator's overhead is its figures minus these."""
    import numpy as np

    async def stream(rid: int) -> None:
        body = json.dumps({"rid": f"control-{rid}", "bench": {"events": run.events_per_request,
                                                               "pattern": [2, 3],
                                                              "interval": run.interval}})
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(
            b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: %d\r\n\r\n%s"
            % (len(body), body.encode()))
        stamps: list[float] = []
        while True:
            data = await reader.read(65536)
            now = time.perf_counter()
            if not data:
                break
            stamps.extend([now] * data.count(b"\n\n"))
            if data.endswith(b"0\r\n\r\n"):
                break
        writer.close()
        received.append((f"control-{rid}", stamps[:-1]))  # the last "\n\n" is [DONE]

    received: list[tuple[str, list[float]]] = []
    await asyncio.gather(*(stream(i) for i in range(run.concurrency)))
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /log HTTP/1.1\r\nhost: x\r\n\r\n")
    head = await reader.readuntil(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
    log = json.loads(await reader.readexactly(length))
    writer.close()
    lat_all, gap_all = [], []
    for rid, stamps in received:
        sent = np.asarray([t for t, _ in log.get(rid, [])][: len(stamps)])
        client = np.asarray(stamps[: len(sent)])
        lat_all.append(client - sent)
        gap_all.append(np.abs(np.diff(client) - np.diff(sent)))
    lat_us, gap_us = np.concatenate(lat_all) * 1e6, np.concatenate(gap_all) * 1e6
    return {"latency_us_mean": float(lat_us.mean()),
            "latency_us_p99": float(np.percentile(lat_us, 99)),
            "gap_error_us_mean": float(gap_us.mean()),
            "gap_error_us_p99": float(np.percentile(gap_us, 99))}


RUNS = (
    Run("zero-delay stream, C=1", 1, 4000, 0.0, requests=12),
    Run("zero-delay stream, C=64", 64, 500, 0.0, duration_s=6.0),
    # The seed's C=64 point: 64 streams × 11.9 events/s × 2.5 tokens/event ≈ 1900 tok/s aggregate.
    Run("paced: seed C=64 rate (≈760 ev/s)", 64, 60, 1 / 11.9, duration_s=8.0),
    Run("paced: 64 × 250 ev/s (16,000 ev/s)", 64, 1000, 1 / 250, duration_s=6.0),
)


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cpu", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve(args.cpu))
        return
    cpus = sorted(os.sched_getaffinity(0))
    client_cpu, server_cpu = cpus[0], cpus[-1] if len(cpus) > 1 else None
    server = subprocess.Popen([sys.executable, __file__, "--serve", "--cpu", str(server_cpu)]
                              if server_cpu is not None else [sys.executable, __file__, "--serve"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        os.sched_setaffinity(0, {client_cpu})
        results = [asyncio.run(_measure(port, run)) for run in RUNS]
        for run, result in zip(RUNS, results, strict=True):
            if run.interval > 0:
                result["control"] = asyncio.run(_control(port, run))
    finally:
        server.terminate()
        server.wait(10)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{_cpu_name()}, Python {platform.python_version()}, client pinned to CPU {client_cpu}, "
          f"server to CPU {server_cpu}")
    header = (f"{'run':38} {'events/s':>9} {'tok/s':>9} {'client CPU':>10} {'ev/CPU-s':>9} "
              f"{'tput err':>9} {'lat mean':>9} {'lat p99':>9} {'gap err':>8} {'gap p99':>8}")
    print(header)
    for r in results:
        def us(v: float | None) -> str:
            return "—" if v is None else f"{v:,.0f}µs"
        err = "—" if r["throughput_error"] is None else f"{r['throughput_error']:+.2%}"
        print(f"{r['label']:38} {r['events_s']:>9,.0f} {r['client_tok_s']:>9,.0f} "
              f"{r['cpu_share']:>10.0%} {r['events_per_cpu_s']:>9,.0f} "
              f"{err:>9} {us(r['latency_us_mean']):>9} {us(r['latency_us_p99']):>9} "
              f"{us(r['gap_error_us_mean']):>8} {us(r['gap_error_us_p99']):>8}")
        if "control" in r:
            c = r["control"]
            print(f"{'  control: raw socket reader':38} {'':>9} {'':>9} {'':>10} {'':>9} {'':>9} "
                  f"{us(c['latency_us_mean']):>9} {us(c['latency_us_p99']):>9} "
                  f"{us(c['gap_error_us_mean']):>8} {us(c['gap_error_us_p99']):>8}")


if __name__ == "__main__":
    main()
