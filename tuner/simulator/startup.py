"""SGLang 0.5.23's startup as a timed script of log lines, and where it fails.

``plan_startup`` is pure: the milestones in order (reference notes §7), each after a delay in
simulated seconds from the profile's ``StartupSpec``, and the failure that ends the script, if any:

* a validation error (``config.startup_error``) right after the process started, before any weight
  loads;
* out of memory while loading weights, while allocating the KV cache, or — the usual case — while
  capturing CUDA graphs (``config.memory.failure_stage``), after the stages before it took their
  time.

Graph capture time per captured family (target verify or decode; with speculation also draft decode
and draft extend, which are ``draft_graph_factor`` slower, #10088)::

    graph_base_s + graph_per_bs_s · (number of batch sizes)
                 · (1 + graph_per_token_factor · (tokens − 1))

with tokens = tokens per request the family's graph holds (draft tokens for verify and extend,
steps·topk for the draft decode, 1 without speculation). ``run_startup`` plays a plan, every delay
divided by the time scale.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tuner.simulator.config import InvalidServerArgs, ServerConfig, resolve
from tuner.simulator.profile import Profile
from tuner.simulator.speculation import SpecKind, draft_weights_gb

WEIGHTS_DTYPE = "torch.bfloat16"
READY_LINE = "The server is fired up and ready to roll!"


@dataclass(frozen=True)
class Step:
    delay_s: float  # simulated seconds after the previous step
    line: str
    # logged by the TP0 scheduler process (SGLang prefixes those lines with "TP0")
    scheduler: bool = True


@dataclass(frozen=True)
class StartupPlan:
    steps: tuple[Step, ...]
    failure: tuple[str, ...] | None  # lines printed when startup fails (then the process exits 1)
    failure_delay_s: float = 0.0  # simulated seconds after the last step
    timings: dict[str, object] = field(default_factory=dict)  # /server_info "startup_time"

    @property
    def total_s(self) -> float:
        return sum(s.delay_s for s in self.steps) + (self.failure_delay_s if self.failure else 0.0)


def _exception_line(rule: str, message: str) -> str:
    """The last line of the traceback SGLang's validation prints: the rules' messages already are
    that line (``ValueError: ...``, a bare ``AssertionError``), as
    tests/fixtures/sglang-0.5.23-fidelity.json records."""
    return message


def _traceback(where: str, final: str) -> tuple[str, ...]:
    return ("Traceback (most recent call last):",
            '  File "/usr/local/lib/python3.12/dist-packages/sglang/launch_server.py", line 29, in '
            '<module>',
            "    server_args = prepare_server_args(sys.argv[1:])",
            '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/'
            f'{where}", in __post_init__',
            *final.splitlines())


def _scheduler_crash(final: str) -> tuple[str, ...]:
    return ("Scheduler hit an exception: Traceback (most recent call last):",
            '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py", in '
            "run_scheduler_process",
            *final.splitlines(),
            "Received sigquit from a child process. It usually means the child failed.")


def graph_capture_s(profile: Profile, config: ServerConfig) -> dict[str, float]:
    """Seconds (time scale 1) per captured graph family; empty when decode graphs are off."""
    s = profile.startup
    n = len(config.cuda_graph_bs)
    if n == 0:
        return {}

    def family(tokens: int, factor: float = 1.0) -> float:
        return (s.graph_base_s
                + s.graph_per_bs_s * n * (1.0 + s.graph_per_token_factor * (tokens - 1))) * factor

    if not config.speculative:
        return {"target decode": family(1)}
    if config.kind is SpecKind.NGRAM:  # no draft model: only the target's verify graphs
        return {"target verify": family(config.draft_tokens)}
    if config.adaptive is not None:
        # One runtime state per candidate step count, each with its own graphs
        # (adaptive_runtime_state.py).
        out = {"target decode": family(1)} if 0 in config.adaptive.candidate_steps else {}
        for steps in (s for s in config.adaptive.candidate_steps if s > 0):
            out[f"target verify (steps={steps})"] = family(steps + 1)
            out[f"draft decode (steps={steps})"] = family(steps, s.draft_graph_factor)
        return out
    return {
        "target verify": family(config.draft_tokens),
        "draft decode": family(config.num_steps * config.topk, s.draft_graph_factor),
        "draft extend": family(config.draft_tokens, s.draft_graph_factor),
    }


def plan_startup(profile: Profile, config: ServerConfig) -> StartupPlan:
    s, mem, model = profile.startup, config.memory, profile.model
    steps: list[Step] = [Step(0.0, w, scheduler=False) for w in config.warnings]
    if config.startup_error is not None:
        final = _exception_line(config.startup_error.rule, config.startup_error.message)
        return StartupPlan(tuple(steps), _traceback("server_args.py", final),
                           failure_delay_s=s.process_start_s)

    avail = mem.gpu_gb - profile.memory.non_torch_gb
    steps.append(Step(s.process_start_s, f"Init torch distributed begin. tp_size={config.tp_size}"))
    steps.append(Step(0.0, f"Load weight begin. avail mem={avail:.2f} GB"))
    if mem.failure_stage == "weights":
        return StartupPlan(tuple(steps), _scheduler_crash(f"torch.OutOfMemoryError: {mem.failure}"),
                           failure_delay_s=s.load_weights_s * 0.5)
    target_gb = model.weights_gb / config.tp_size
    avail -= target_gb
    steps.append(Step(s.load_weights_s, f"Load weight end. elapsed={s.load_weights_s:.2f} s, "
                      f"type={model.architecture}, dtype={WEIGHTS_DTYPE}, avail mem={avail:.2f} "
                      f"GB, mem usage={target_gb:.2f} GB."))
    load_weight = s.load_weights_s
    if config.speculative and config.kind is not SpecKind.NGRAM:
        draft_gb = draft_weights_gb(profile, config.kind)
        draft_type = {SpecKind.MTP: f"{model.architecture}MTP",
                      SpecKind.STANDALONE: "Qwen3ForCausalLM"}.get(config.kind,
                                                                   "LlamaForCausalLMEagle3")
        load_s = s.load_draft_s * (draft_gb / model.draft_weights_gb if model.draft_weights_gb
                                   else 1.0)
        if config.kind is SpecKind.STANDALONE:
            load_s = max(load_s, s.load_draft_s)
        steps.append(Step(0.0, f"Load weight begin. avail mem={avail:.2f} GB"))
        avail -= draft_gb
        steps.append(Step(load_s, f"Load weight end. elapsed={load_s:.2f} s, "
                          f"type={draft_type}, dtype={WEIGHTS_DTYPE}, avail mem={avail:.2f} GB, "
                          f"mem usage={draft_gb:.2f} GB."))
        load_weight += load_s
    if mem.failure_stage == "kv":
        return StartupPlan(tuple(steps), _scheduler_crash(f"RuntimeError: {mem.failure}"),
                           failure_delay_s=s.kv_alloc_s)
    avail -= mem.kv_gb
    steps.append(Step(s.kv_alloc_s, f"KV Cache is allocated. dtype: {WEIGHTS_DTYPE}, "
                      f"#tokens: {config.max_total_num_tokens}, KV size: {mem.kv_gb:.2f} GB"))

    graphs = graph_capture_s(profile, config)
    if graphs:
        steps.append(Step(0.0, f"Capture cuda graph begin. This can take up to several minutes. "
                          f"avail mem={avail:.2f} GB"))
        bs = list(config.cuda_graph_bs)
        for i, (name, seconds) in enumerate(graphs.items()):
            steps.append(Step(0.0, f"Capture {name} CUDA graph begin. bs={bs}"))
            if mem.failure_stage == "graph" and i == 0:
                # Graph memory runs out part-way through the first (largest-first) capture.
                return StartupPlan(tuple(steps), _scheduler_crash(f"Exception: {mem.failure}"),
                                   failure_delay_s=seconds * 0.5)
            steps.append(Step(seconds,
                              f"Capture {name} CUDA graph end. bs={bs}, elapsed={seconds:.2f} s, "
                              f"mem usage={mem.graph_gb / len(graphs):.2f} GB"))
        avail -= mem.graph_gb
        steps.append(Step(0.0,
                          f"Capture cuda graph end. Time elapsed: {sum(graphs.values()):.2f} s. "
                          f"mem usage={mem.graph_gb:.2f} GB. avail mem={avail:.2f} GB."))
    # cannot happen without graphs, but never start a failing plan
    elif mem.failure_stage == "graph":
        return StartupPlan(tuple(steps), _scheduler_crash(f"Exception: {mem.failure}"))

    steps.append(Step(0.0, f"max_total_num_tokens={config.max_total_num_tokens}, "
                      f"chunked_prefill_size={config.chunked_prefill_size}, "
                      f"max_prefill_tokens={config.max_prefill_tokens}, "
                      f"max_running_requests={config.max_running_requests}, "
                      f"context_len={config.context_length}, available_gpu_mem={avail:.2f} GB"))
    steps.append(Step(s.server_start_s,
                      f"INFO:     Uvicorn running on http://{config.host}:{config.port} "
                      "(Press CTRL+C to quit)", scheduler=False))
    scheduler_e2e = sum(st.delay_s for st in steps) - s.server_start_s
    timings: dict[str, object] = {
        "load_weight": round(load_weight, 3),
        "kv_cache_allocation": round(s.kv_alloc_s, 3),
        "cuda_graph": {name: round(v, 3) for name, v in graphs.items()},
        "scheduler_e2e": round(scheduler_e2e, 3),
        "tokenizer_e2e": round(s.process_start_s, 3),
    }
    return StartupPlan(tuple(steps), None, timings=timings)


def startup_s(profile: Profile, argv: Sequence[str]) -> float:
    """Simulated seconds (time scale 1) from the process start until the server is ready — or until
    its start fails, for a command line that cannot start (0 for one argparse refuses: the process
    exits at once)."""
    try:
        config = resolve(profile, argv, exit_on_error=False)
    except InvalidServerArgs:
        return 0.0
    return plan_startup(profile, config).total_s


class Log:
    """SGLang's log format: ``[YYYY-mm-dd HH:MM:SS TP0] message`` (no TP tag for the main
    process)."""

    def __init__(self, write: Callable[[str], object]) -> None:
        self._write = write

    def __call__(self, line: str, *, scheduler: bool = False) -> None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        tag = f"{stamp} TP0" if scheduler else stamp
        first, *rest = line.splitlines() or [""]
        self._write("\n".join([f"[{tag}] {first}", *rest]))


async def run_startup(plan: StartupPlan, time_scale: float, log: Log) -> bool:
    """Play ``plan``'s steps in real time / ``time_scale``; False (after printing why) when startup
    fails."""
    for step in plan.steps:
        if step.delay_s > 0:
            await asyncio.sleep(step.delay_s / time_scale)
        log(step.line, scheduler=step.scheduler)
    if plan.failure is None:
        return True
    if plan.failure_delay_s > 0:
        await asyncio.sleep(plan.failure_delay_s / time_scale)
    log("\n".join(plan.failure), scheduler=plan.failure[0].startswith("Scheduler"))
    return False
