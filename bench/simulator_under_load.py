"""Does the simulator measure the model or the host? The demo baseline, idle and beside CPU hogs,
against the ground truth.

For the study file's baseline (default: studies/simulated.toml) and its benchmark phases, at its
time scale:

* truth: ``ground_truth.expected_metrics_for_prompts`` over the prompts each phase measures
  (noiseless, analytic);
* schedule: the same benchmark replayed on the engine with a virtual clock
  (``tuner.simulator.replay``): what the load generator computes when every chunk arrives at its
  scheduled time;
* idle / loaded: the real load generator against a fresh simulator process, first as the machine is,
  then with ``--hogs`` busy processes beside it (``stress-ng --cpu N`` when installed, else Python
  busy loops). The simulator stamps its events with its schedule, so the load generator's figures
  are on that schedule (``PhaseResult.timebase == "server"``); what the arrival times alone said is
  shown beside them ("by arrival"), as is each phase's verdict (``simulator-overloaded`` when the
  schedule given up passed the limit);

then the ratios, and the simulator's own account of each live run (schedule time it gave up, largest
lag).

Run: ``.venv/bin/python bench/simulator_under_load.py [--study FILE] [--time-scale X] [--hogs 2]
[--repeat 1]`` (about a minute at the demo's 10×). Results go in docs/simulator.md.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from objectives.prompts import load_source
from objectives.runner import PHASE_INDEX_STRIDE, run_benchmark
from objectives.spec import BenchmarkSpec
from tuner.simulator import ground_truth, replay, text
from tuner.simulator.process import running_simulator
from tuner.simulator.profile import load_profile
from tuner.study.load import load_study_file
from tuner.study.space import SearchSpace

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Live:
    c1: float  # C=1 per-request tok/s (simulated time)
    c64: float  # last phase's aggregate tok/s
    # the same from the client's arrival times (what it read before the schedule stamps)
    c64_arrival: float
    timebase: str
    failures: tuple[str, ...]  # phases that failed (simulator-overloaded)
    dropped_share: float  # schedule time given up / busy time, over the run
    max_lag_s: float
    mean_lag_s: float  # how late chunks left the simulator on average (caught-up lag included)
    wall_s: float
    # replacement holds that timed out (a phase's tail gives one or two; more: the client was late)
    holds_timed_out: int
    # (phase label, figure) -> modelled ms: the latency figures each phase reports
    latency: dict[tuple[str, str], float] = field(default_factory=dict)


#: The latency figures compared idle against loaded (modelled ms, on the schedule's stamps).
LATENCY = ("ttft_mean_ms", "ttft_p50_ms", "ttft_p99_ms", "itl_mean_ms", "e2e_mean_ms")


def _burn() -> None:
    while True:
        pass


@contextmanager
def hogs(n: int, own_session: bool) -> Iterator[str]:
    """``own_session``: the hogs in a session of their own, as another user's or terminal's jobs are
    (with the kernel's autogroup scheduling each session gets a fair share); else in this session,
    competing with the simulator and the load generator inside this session's share (the worst
    case)."""
    if n <= 0:
        yield "none"
        return
    if shutil.which("stress-ng"):
        process = subprocess.Popen(["stress-ng", "--cpu", str(n), "--quiet"],
                                   stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, start_new_session=own_session)
        try:
            time.sleep(0.5)
            yield f"stress-ng --cpu {n} ({'own' if own_session else 'same'} session)"
        finally:
            process.terminate()
            process.wait(10)
        return
    workers = [multiprocessing.Process(target=_burn, daemon=True) for _ in range(n)]
    for w in workers:
        w.start()
    try:
        yield f"{n} Python busy loops"
    finally:
        for w in workers:
            w.terminate()
            w.join()


def _schedule(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{url}/get_server_info", timeout=30) as response:
        state: dict[str, Any] = json.load(response)["simulator"]
    return state


def live_run(argv: list[str], profile: str | None, scale: float, bench: BenchmarkSpec) -> Live:
    with running_simulator(argv, profile=profile, time_scale=scale, seed=0,
                           ready_timeout_s=300) as sim:
        before = _schedule(sim.url)
        started = time.monotonic()
        result = run_benchmark(sim.url, bench)
        wall = time.monotonic() - started
        after = _schedule(sim.url)
    first, last = (p.at_time_scale(scale) for p in (result.phases[0], result.phases[-1]))
    busy = after["busy_s"] - before["busy_s"]
    dropped = after["dropped_s"] - before["dropped_s"]
    phases = after["phases"] - before["phases"]
    failures = tuple(f"{p.label} {p.failure}" for p in result.phases if p.failure)
    scaled = [p.at_time_scale(scale) for p in result.phases]
    latency = {(p.label, name): value for p in scaled
               for name in LATENCY if (value := p.metric(name)) is not None}
    return Live(first.per_request_tok_s_mean or 0.0, last.aggregate_tok_s or 0.0,
                last.client_aggregate_tok_s or last.aggregate_tok_s or 0.0, last.timebase, failures,
                dropped / busy if busy else 0.0, after["max_lag_s"],
                (after["lag_sum_s"] - before["lag_sum_s"]) / phases if phases else 0.0, wall,
                after["holds_timed_out"] - before["holds_timed_out"], latency)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--study", default=str(ROOT / "studies" / "simulated.toml"))
    parser.add_argument("--time-scale", type=float, default=None, help="default: the study file's")
    parser.add_argument("--hogs", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=1, help="live runs per condition")
    parser.add_argument("--hog-session", choices=("same", "own"), default="same",
                        help="run the hogs in this session (worst case) or a session of their own")
    args = parser.parse_args()

    spec = load_study_file(args.study)
    table = spec.option_table
    # what `tune` deploys as the baseline, repairs included (a running-request cap of C, ...)
    deployed = SearchSpace(spec, table).baseline().config
    if deployed is None:
        raise SystemExit(f"{args.study}: the baseline is not deployable")
    argv = deployed.argv(table)
    profile_name = getattr(spec.target.settings, "profile", None)
    scale = args.time_scale or float(getattr(spec.target.settings, "time_scale", 1.0))
    bench, workload = spec.benchmark, spec.benchmark.workload
    source = load_source(workload)
    prof = load_profile(profile_name) if profile_name else ground_truth.default_profile()
    config = ground_truth.resolve_config(prof, argv)

    def prompt_text(index: int) -> str:
        return text.prompt_of_messages([{"role": r, "content": c} for r,
                                        c in source.prompt(index).messages])

    truths = []
    for k, phase in enumerate(bench.phases):
        first = k * PHASE_INDEX_STRIDE + phase.warmup
        prompts = [prompt_text(first + i) for i in range(phase.requests or 1)]
        truths.append(ground_truth.expected_metrics_for_prompts(prof, argv, workload,
                                                                phase.concurrency, prompts))
    truth = (truths[0].per_request_tok_s, truths[-1].aggregate_tok_s)
    scheduled = replay.replay(prof, config, workload, bench.phases, prompt_text, time_scale=scale,
                              stream_coalescing=True)
    sched = (scheduled[0].per_request_tok_s_mean or 0.0, scheduled[-1].aggregate_tok_s or 0.0)

    runs: dict[str, list[Live]] = {"idle": [], "loaded": []}
    load_before = os.getloadavg()[0]
    for _ in range(args.repeat):
        runs["idle"].append(live_run(argv, profile_name, scale, bench))
    with hogs(args.hogs, args.hog_session == "own") as hog:
        for _ in range(args.repeat):
            runs["loaded"].append(live_run(argv, profile_name, scale, bench))
    load_after = os.getloadavg()[0]

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"study {args.study}, baseline, time scale {scale:g}, {cores} cores, load average "
          f"{load_before:.1f} before / {load_after:.1f} after; loaded = {hog}")
    print(f"{'':14}{'truth':>9}{'schedule':>10}" + "".join(f"{c:>9}" for c in ("idle", "loaded"))
          + f"{'idle/truth':>12}{'loaded/truth':>14}{'loaded/idle':>13}")
    for i, (label, name) in enumerate((("C=1 tok/s", "c1"),
                                       (f"C={bench.phases[-1].concurrency} agg", "c64"))):
        idle = [getattr(r, name) for r in runs["idle"]]
        loaded = [getattr(r, name) for r in runs["loaded"]]
        mi, ml = sum(idle) / len(idle), sum(loaded) / len(loaded)
        print(f"{label:14}{truth[i]:9.1f}{sched[i]:10.1f}{mi:9.1f}{ml:9.1f}{mi / truth[i]:12.3f}"
              f"{ml / truth[i]:14.3f}{ml / mi:13.3f}"
              + (f"   runs: idle {[round(v, 1) for v in idle]} loaded "
                 f"{[round(v, 1) for v in loaded]}"
                 if args.repeat > 1 else ""))
    print(f"\n{'latency (modelled ms)':26}{'idle':>9}{'loaded':>9}{'loaded/idle':>13}"
          "   (means over the runs)")
    every_run = runs["idle"] + runs["loaded"]
    for key in (k for k in runs["idle"][0].latency if all(k in r.latency for r in every_run)):
        idle = [r.latency[key] for r in runs["idle"]]
        loaded = [r.latency[key] for r in runs["loaded"]]
        mi, ml = sum(idle) / len(idle), sum(loaded) / len(loaded)
        ratio = ml / mi if mi else float("nan")
        print(f"  {key[0] + ' ' + key[1]:24}{mi:9.1f}{ml:9.1f}{ratio:13.3f}"
              + (f"   runs: idle {[round(v, 1) for v in idle]} loaded "
                 f"{[round(v, 1) for v in loaded]}" if args.repeat > 1 else ""))
    for name, items in runs.items():
        for r in items:
            print(f"  {name}: C=64 {r.c64:.1f} on the {r.timebase}'s clock, {r.c64_arrival:.1f} by "
                  f"arrival; schedule given up {r.dropped_share:.1%} of busy time, largest lag "
                  f"{r.max_lag_s * 1000:.0f} ms, mean lag {r.mean_lag_s * 1000:.1f} ms, "
                  f"holds timed out {r.holds_timed_out}, benchmark wall {r.wall_s:.1f} s; "
                  f"failed: {', '.join(r.failures) or 'none'}")


if __name__ == "__main__":
    main()
