"""The noiseless expected metrics of a configuration: what the live simulator converges to.

Benchmarks call ``expected_metrics`` for many configurations to know the true optimum, so it is
analytic (a steady-state closed-loop formula, no simulation) and cached where it can be. It resolves
the command line through ``tuner.simulator.config.resolve`` — the same code path as the live server
— and uses the same performance model (``tuner.simulator.model``).

Closed loop with concurrency C, B = min(C, max running requests, KV capacity) requests decoding:

* tokens per verify A = 1 + expected accepted drafts; output length L (EOS rule in ``text``);
* decode iterations per request n = (L − 1)/A + ½ (the last iteration is on average half used);
* each request's own prefill gives its first token; every other running request's prefill stalls it
  once per lifetime (prefills are counted one request at a time — the engine batches simultaneous
  arrivals, which makes it at most a few per cent faster when prompts are long and concurrency is
  high);
* E2E = wait + prefill + n·t_iter(B) + (B − 1)·prefill, aggregate = B·L / slot lifetime; with a
  queue (C > B) Little's law gives the latency.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from objectives.spec import WorkloadSpec
from tuner.simulator import model
from tuner.simulator.adaptive import steady_mix
from tuner.simulator.config import ServerConfig, require_valid, resolve
from tuner.simulator.profile import DEFAULT_PROFILE, Profile, load_profile
from tuner.simulator.text import count_prompt_tokens, expected_output_length, output_length

#: The seed campaign's workload as the calibration assumes it (docs/simulator.md).
SEED_WORKLOAD = WorkloadSpec(api="chat", dataset="builtin", input_tokens=256, max_tokens=512,
                             temperature=0.0, ignore_eos=True)


@dataclass(frozen=True)
class ExpectedMetrics:
    concurrency: int
    running: int  # requests decoding at once (the rest queue)
    prompt_tokens: int
    output_tokens: float  # expected completion tokens per request
    accept_length: float  # tokens per verify, bonus included (1.0 without speculation)
    iteration_ms: float  # one decode iteration at the running batch
    ttft_s: float
    e2e_s: float
    per_request_tok_s: float  # decode speed of one request: (L − 1) / (E2E − TTFT)
    per_request_e2e_tok_s: float  # L / E2E
    aggregate_tok_s: float  # all output tokens / wall time


@lru_cache(maxsize=8192)
def _config(profile: Profile, argv: tuple[str, ...]) -> ServerConfig:
    config = resolve(profile, argv, exit_on_error=False)
    require_valid(config)
    return config


def resolve_config(profile: Profile | str, server_args: Sequence[str]) -> ServerConfig:
    """The resolved, valid configuration for ``server_args`` (raises ``InvalidServerArgs``
    otherwise)."""
    prof = load_profile(profile) if isinstance(profile, str) else profile
    return _config(prof, tuple(server_args))


def running_batch(config: ServerConfig, concurrency: int, prompt_tokens: int,
                  max_tokens: int) -> int:
    """How many of ``concurrency`` closed-loop requests decode at once: the running-request cap and
    the KV pool (each request reserves its prompt plus max_tokens, as the scheduler does) both limit
    it."""
    per_request = prompt_tokens + max_tokens + config.draft_tokens
    kv_fit = max(1, config.max_total_num_tokens // per_request)
    return max(1, min(concurrency, config.max_running_requests, kv_fit))


def expected_metrics(profile: Profile | str, server_args: Sequence[str], workload: WorkloadSpec,
                     concurrency: int, *, prompt_text: str | None = None) -> ExpectedMetrics:
    """Noiseless steady-state metrics of ``concurrency`` closed-loop clients sending ``workload``.

    ``prompt_text`` (optional) is a representative prompt: its length replaces
    ``workload.input_tokens`` and its repetitiveness moves acceptance exactly as the live server
    does for that prompt. Raises ``InvalidServerArgs`` for a command line the server would refuse or
    fail on.
    """
    prof = load_profile(profile) if isinstance(profile, str) else profile
    config = _config(prof, tuple(server_args))
    prompt_tokens = count_prompt_tokens(prompt_text) if prompt_text else workload.input_tokens
    length = expected_output_length(prof, workload.max_tokens, workload.ignore_eos)
    kind = _Kind(prompt_tokens, _accept_length(prof, config, workload, prompt_text), length,
                 model.acceptance_multiplier(prof, config, prompt_text))
    return _steady_state(prof, config, workload, concurrency, [kind])


def expected_metrics_for_prompts(profile: Profile | str, server_args: Sequence[str],
                                 workload: WorkloadSpec,
                                 concurrency: int, prompts: Sequence[str], *,
                                 seed: int = 0) -> ExpectedMetrics:
    """As ``expected_metrics``, for a phase sending exactly ``prompts`` (the texts the server sees):
    each request with its own prompt length, acceptance and (EOS rule, server ``seed``) output
    length. Rates are averaged as a client averages them: per-request speed over requests, aggregate
    over all tokens. For prompt sets of varied length (the builtin set) this is the figure to
    compare a phase with."""
    if not prompts:
        raise ValueError("no prompts")
    prof = load_profile(profile) if isinstance(profile, str) else profile
    config = _config(prof, tuple(server_args))
    kinds = [_Kind(count_prompt_tokens(p), _accept_length(prof, config, workload, p),
                   float(output_length(prof, seed, p, max(workload.max_tokens, 1),
                                       workload.ignore_eos)),
                   model.acceptance_multiplier(prof, config, p))
             for p in prompts]
    return _steady_state(prof, config, workload, concurrency, kinds)


@dataclass(frozen=True)
class _Kind:
    prompt_tokens: int
    accept_length: float
    length: float
    multiplier: float = 1.0


def _accept_length(prof: Profile, config: ServerConfig, workload: WorkloadSpec,
                   prompt_text: str | None) -> float:
    multiplier = model.acceptance_multiplier(prof, config, prompt_text)
    rates = model.position_rates(prof, config, temperature=workload.temperature,
                                 multiplier=multiplier)
    return 1.0 + model.expected_accepted_drafts(rates)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _steady_state(prof: Profile, config: ServerConfig, workload: WorkloadSpec, concurrency: int,
                  kinds: Sequence[_Kind]) -> ExpectedMetrics:
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    prompt_tokens = round(_mean([k.prompt_tokens for k in kinds]))
    length = _mean([k.length for k in kinds])
    batch = running_batch(config, concurrency, prompt_tokens, workload.max_tokens)
    context = batch * (prompt_tokens + length / 2.0)
    t_iter = model.decode_iteration_ms(prof, config, batch, round(context)) / 1000.0
    if config.adaptive is not None:
        kinds, t_iter = _adaptive(prof, config, workload, batch, round(context), kinds)
    prefills = [model.prefill_ms(prof, k.prompt_tokens) / 1000.0 for k in kinds]
    t_prefill = _mean(prefills)
    # Per request: its own iterations, plus one stall for each other running request's prefill.
    decode = [((k.length - 1.0) / k.accept_length + 0.5 if k.length > 1 else 0.0) * t_iter
              + (batch - 1) * t_prefill for k in kinds]
    decode_s = _mean(decode)
    slot_s = t_prefill + decode_s

    if concurrency > batch:
        # Queued requests are admitted right after the iteration that frees a slot: no extra wait.
        aggregate = batch * length / slot_s
        e2e = concurrency * slot_s / batch  # Little's law
        ttft = e2e - decode_s
    else:
        wait = 0.5 * t_iter if batch > 1 else 0.0  # an arrival waits for the iteration in flight
        ttft = wait + t_prefill
        e2e = ttft + decode_s
        aggregate = batch * length / e2e
    speeds = [(k.length - 1.0) / d for k, d in zip(kinds, decode, strict=True) if d > 0]
    return ExpectedMetrics(
        concurrency=concurrency, running=batch, prompt_tokens=prompt_tokens, output_tokens=length,
        accept_length=_mean([k.accept_length for k in kinds]), iteration_ms=t_iter * 1000.0,
        ttft_s=ttft,
        e2e_s=e2e, per_request_tok_s=_mean(speeds) if speeds else 0.0,
        per_request_e2e_tok_s=length / e2e, aggregate_tok_s=aggregate,
    )


def _adaptive(prof: Profile, config: ServerConfig, workload: WorkloadSpec, batch: int, context: int,
              kinds: Sequence[_Kind]) -> tuple[list[_Kind], float]:
    """Adaptive steps: the batch's tier settles into a mix of step counts (``adaptive.steady_mix``);
    each kind's accept length and the iteration time are that mix's, plus the switches' cost."""
    assert config.adaptive is not None
    tier = config.adaptive.tiers[config.adaptive.tier_index(batch, config.cuda_graph_bs)]
    cache: dict[tuple[int, float], float] = {}

    def accepted(steps: int, multiplier: float) -> float:
        if (steps, multiplier) not in cache:
            rates = model.position_rates(prof, config, temperature=workload.temperature,
                                         multiplier=multiplier, chain=steps)
            cache[steps, multiplier] = model.expected_accepted_drafts(rates)
        return cache[steps, multiplier]

    mix, switch_rate = steady_mix(tier, config.adaptive.initial_steps,
                                  lambda steps: _mean([accepted(steps, k.multiplier)
                                                       for k in kinds]))
    t_ms = sum(f * model.decode_iteration_ms(prof, config, batch, context, steps=s) for s,
               f in mix.items())
    t_ms += switch_rate * prof.adaptive.switch_ms
    mixed = [_Kind(k.prompt_tokens,
                   1.0 + sum(f * accepted(s, k.multiplier) for s, f in mix.items()), k.length,
                   k.multiplier) for k in kinds]
    return mixed, t_ms / 1000.0


def default_profile() -> Profile:
    return load_profile(DEFAULT_PROFILE)
