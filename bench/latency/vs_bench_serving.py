"""Do the simulator's latency figures, as spectune measures them, agree with SGLang's own
bench_serving?

Starts the built-in simulator (the demo's model and flags with SGLang's default tree), measures a
C=1 and a C=64 phase with spectune's load generator (``run_benchmark``: on the simulator's stamped
schedule) and then the same prompts, in the same order, at the same concurrency with SGLang's
bench_serving request function and ``calculate_metrics`` (bench/latency/bench_serving_driver.py, run
under a real SGLang release's Python: see bench/sglang_versions/env.py), and prints TTFT, ITL and
E2E (mean, p50, p90, p99) side by side with the difference, and how long bench_serving's first
wave of each phase took from a request's clock starting to the request going out (its new
connection: time in its TTFT that the server never sees).

Run it on a quiet machine at time scale 1 (the default): bench_serving times on the client's clock,
so at a time scale X every real millisecond the client itself spends counts X simulated ones in its
figures; spectune's figures come from the simulator's schedule and do not have that term
(docs/scoring.md, "Latency").

    .venv/bin/python bench/latency/vs_bench_serving.py [--time-scale 1] [--release 0.5.23]
    [--c64-requests 128] [--input-tokens 1024]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from objectives.prompts import load_source
from objectives.runner import PHASE_INDEX_STRIDE, run_benchmark
from objectives.spec import BenchmarkSpec, PhaseSpec, WorkloadSpec
from tuner.simulator.process import running_simulator

HERE = Path(__file__).resolve().parent
#: The demo's model and fixed flags (studies/simulated.toml) with SGLang's default tree for it
#: (3/1/4), the running-request cap of C=64 as `tune` repairs it, graphs to 64, static 0.86.
SIMULATOR_ARGS = ["--model-path", "Qwen/Qwen3.5-122B-A10B", "--tp-size", "4",
                  "--speculative-algorithm", "EAGLE3",
                  "--speculative-draft-model-path", "Qwen/Qwen3.5-122B-A10B-EAGLE3",
                  "--enable-metrics",
                  "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
                  "--speculative-num-draft-tokens", "4", "--mem-fraction-static", "0.86",
                  "--cuda-graph-max-bs-decode", "64", "--max-running-requests", "64"]
FIGURES = [(f"{m}_{s}_ms", f"{stat}_{bm}_ms") for m,
           bm in (("ttft", "ttft"), ("itl", "itl"), ("e2e", "e2e_latency"))
           for s, stat in (("mean", "mean"), ("p50", "median"), ("p90", "p90"), ("p99", "p99"))]


def bench_serving(url: str, prompts: list[str], phase: PhaseSpec, max_tokens: int,
                  release: str) -> dict[str, Any]:
    root = Path(os.environ.get("SPECTUNE_SGLANG_CACHE", "/work/.cache/sglang"))
    pythonpath = (root / "releases" / release / ".pythonpath").read_text(encoding="utf-8").strip()
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(prompts, f)
    env = {**os.environ, "PYTHONPATH": pythonpath, "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([str(root / "base" / "bin" / "python"),
                           str(HERE / "bench_serving_driver.py"), url, f.name,
                           str(phase.concurrency), str(phase.warmup), str(max_tokens),
                           str(HERE.parent / "sglang_fidelity")],
                          capture_output=True, text=True, env=env, timeout=1800, check=False)
    Path(f.name).unlink()
    if done.returncode != 0:
        sys.exit(f"bench_serving driver failed:\n{done.stderr[-3000:]}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--time-scale", type=float, default=1.0)
    parser.add_argument("--release", default="0.5.23",
                        help="the SGLang release whose bench_serving to run")
    parser.add_argument("--c1-requests", type=int, default=8)
    parser.add_argument("--c64-requests", type=int, default=128,
                        help="0 measures C=1 alone")
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--input-tokens", type=int, default=None,
                        help="synthetic prompts of this many tokens (bench_serving's random "
                             "dataset: 1024) instead of the built-in set (tens of tokens)")
    args = parser.parse_args()
    if args.c1_requests < 1:
        parser.error("--c1-requests must be at least 1 (a phase of no requests never ends)")
    workload = WorkloadSpec(api="generate", max_tokens=args.max_tokens, temperature=0.0,
                            ignore_eos=True,
                            **({"dataset": "synthetic", "input_tokens": args.input_tokens}
                               if args.input_tokens else {"dataset": "builtin"}))
    phases = (PhaseSpec(concurrency=1, requests=args.c1_requests, warmup=1),
              *([PhaseSpec(concurrency=64, requests=args.c64_requests, warmup=8)]
                if args.c64_requests else []))
    source = load_source(workload)
    with tempfile.TemporaryDirectory() as tmp, running_simulator(
            SIMULATOR_ARGS, time_scale=args.time_scale, log_path=Path(tmp) / "sim.log",
            ready_timeout_s=120) as sim:
        ours = run_benchmark(sim.url, BenchmarkSpec(workload=workload, phases=phases))
        theirs = []
        for k, phase in enumerate(phases):
            first = k * PHASE_INDEX_STRIDE  # the prompts spectune sent in this phase, in its order
            texts = [source.prompt(first + i).text
                     for i in range(phase.warmup + (phase.requests or 0))]
            theirs.append(bench_serving(sim.url, texts, phase, args.max_tokens, args.release))
    print(f"simulator at time scale {args.time_scale:g}; SGLang {args.release} bench_serving "
          "(backend sglang); figures in the modelled server's ms")
    worst = 0.0
    for k, phase in enumerate(phases):
        result = ours.phases[k].at_time_scale(args.time_scale)
        print(f"\n{phase.label}: {result.completed} requests (spectune) / {theirs[k]['completed']} "
              "(bench_serving)")
        print(f"  {'figure':<14} {'spectune':>10} {'bench_serving':>14} {'difference':>11}")
        for ours_name, their_name in FIGURES:
            mine, other = result.metric(ours_name), theirs[k][their_name] * args.time_scale
            diff = (mine - other) / other if mine is not None and other else float("nan")
            worst = max(worst, abs(diff))
            print(f"  {ours_name:<14} {mine or float('nan'):>10.1f} {other:>14.1f} {diff:>+10.1%}")
        lag = theirs[k].get("wave_send_lag_ms")
        if lag:
            print(f"  bench_serving's first wave: its request's clock started, the server not yet "
                  f"reached — median {lag[0] * args.time_scale:.1f} ms, last "
                  f"{lag[1] * args.time_scale:.1f} ms (its new connection; spectune's are open)")
    print(f"\nlargest difference: {worst:.1%}")


if __name__ == "__main__":
    main()
