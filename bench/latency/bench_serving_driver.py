"""Run by ``bench/latency/vs_bench_serving.py`` under a real SGLang release's Python (not
spectune's): SGLang's own bench_serving request function (``async_request_sglang_generate``, the
default ``--backend sglang``) and its ``calculate_metrics``, in a closed loop of C clients over the
prompts given — exactly as ``bench_serving --max-concurrency C --request-rate inf`` sends them.
Prints bench_serving's latency figures as JSON (ms, on the client's clock; the caller rescales a
time-scaled simulator's), and the send lag of the measured phase's first wave: for each of its
first C requests, from the moment its clock started (bench_serving's ``st``, taken just before
``session.post``) to the moment its request's headers went out on the connection opened for it —
time inside that request's TTFT and E2E during which the server has not seen it (aiohttp's
request tracing, added to the sessions bench_serving creates; nothing else of them changes).

    python bench_serving_driver.py URL PROMPTS.json CONCURRENCY WARMUP MAX_TOKENS STUBS_DIR
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import types


def main() -> None:
    url, prompts_path, concurrency, warmup, max_tokens, stubs_dir = sys.argv[1:7]
    sys.path.insert(0, stubs_dir)
    import stubs  # noqa: F401  # stands in for sgl_kernel and torchvision (CPU-only)

    # only the HF dataset loaders need it; none is used here
    datasets = types.ModuleType("datasets")
    datasets.load_dataset = None  # type: ignore[attr-defined]
    sys.modules.setdefault("datasets", datasets)
    import sglang.benchmark.serving as serving

    lags = _trace_send_lags()

    # The module-level ``args`` bench_serving's request functions read: its command-line defaults,
    # greedy, generating to max_tokens (``--disable-ignore-eos`` not given), streaming.
    serving.args = argparse.Namespace(temperature=0.0, top_p=1.0, disable_ignore_eos=False,
                                      disable_stream=False,
                                      return_logprob=False, return_routed_experts=False,
                                      logprob_start_len=-1,
                                      top_logprobs_num=0, token_ids_logprob=None,
                                      cache_report=False, header=None)
    with open(prompts_path, encoding="utf-8") as f:
        prompts: list[str] = json.load(f)
    c, w, n_tokens = int(concurrency), int(warmup), int(max_tokens)

    def request(prompt: str) -> object:
        return serving.RequestFuncInput(prompt=prompt, api_url=url.rstrip("/") + "/generate",
                                        prompt_len=0, output_len=n_tokens, model="", lora_name="",
                                        image_data=None, extra_request_body={})

    async def closed_loop(items: list[str], clients: int) -> list[object]:
        queue = list(items)
        out: list[object] = []

        async def client() -> None:
            while queue:
                out.append(await serving.async_request_sglang_generate(request(queue.pop(0))))

        await asyncio.gather(*(client() for _ in range(clients)))
        return out

    async def run() -> tuple[list[object], float]:
        await closed_loop(prompts[:w], min(c, w) or 1)  # bench_serving's warmup
        lags.clear()
        start = time.perf_counter()
        outputs = await closed_loop(prompts[w:], c)
        return outputs, time.perf_counter() - start

    outputs, duration = asyncio.run(run())

    class Tokenizer:  # only for bench_serving's retokenized lengths, which these figures do not use
        def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
            return [0] * max(1, len(text.split()))

    metrics, _ = serving.calculate_metrics(None, outputs, duration, Tokenizer(), "sglang")
    names = [f"{stat}_{m}_ms" for m in ("ttft", "itl", "e2e_latency")
             for stat in ("mean", "median", "p90", "p99")]
    wave = sorted(lags[:c])
    print(json.dumps({name: getattr(metrics, name) for name in names} | {
        "completed": metrics.completed, "output_throughput": metrics.output_throughput,
        "wave_send_lag_ms": [1000 * wave[len(wave) // 2], 1000 * wave[-1]] if wave else None}))


def _trace_send_lags() -> list[float]:
    """Seconds from each request's start to its headers being sent, in the order they were sent,
    for every session bench_serving creates from now on."""
    import aiohttp

    lags: list[float] = []
    trace = aiohttp.TraceConfig()

    async def started(_session: object, ctx: types.SimpleNamespace, _params: object) -> None:
        ctx.started = time.perf_counter()

    async def sent(_session: object, ctx: types.SimpleNamespace, _params: object) -> None:
        if not hasattr(ctx, "sent"):
            ctx.sent = time.perf_counter()
            lags.append(ctx.sent - ctx.started)

    trace.on_request_start.append(started)
    trace.on_request_headers_sent.append(sent)
    original = aiohttp.ClientSession.__init__

    def with_trace(self: aiohttp.ClientSession, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("trace_configs", [trace])
        original(self, *args, **kwargs)  # type: ignore[arg-type]

    aiohttp.ClientSession.__init__ = with_trace  # type: ignore[method-assign]
    return lags


if __name__ == "__main__":
    main()
