"""The performance model: how long one scheduler iteration takes and how many tokens it yields.

Pure functions of (profile, resolved config, batch state), shared by the live engine and the ground
truth. Equations (docs/simulator.md has them with their reasons):

* decode iteration (batch B, steps s, topk k, draft tokens d, backend factor f)::

      gpu = base + s·draft_step
            + f·(s·draft_token·B·k + verify_token·B·d + ctx_per_ktok·Σcontext/1000)
      cpu = scheduler + scheduler_request·B
      t = (cpu^q + gpu^q)^(1/q)

  The overlap scheduler (spec v2, always on for EAGLE) runs the CPU side of the next iteration while
  the GPU works, so an iteration costs about the longer of the two; ``q`` (overlap_sharpness) says
  how cleanly they overlap. This is why one more draft step is nearly free at batch 1 until the GPU
  side outgrows the CPU side. Beyond the largest captured CUDA graph (or with graphs off) the GPU
  side becomes ``gpu·eager_factor + eager_launch·(s+1)``.
* prefill of N prompt tokens in one batch: ``prefill_base + prefill_token·N``.
* acceptance: position i (1-based) is accepted, given i−1 was, with
  ``p_i = min(max_rate, first·decay^(i−1)·m)``, where ``m`` falls with temperature and rises with
  prompt repetitiveness; a tree of width w per level turns it into ``1−(1−p_i)^(w^topk_exponent)``.
  The expected accepted drafts per iteration are ``Σ_j Π_{i≤j} p_i`` over the tree's depth.
"""

from __future__ import annotations

import math
import zlib
from functools import lru_cache

from tuner.simulator import speculation
from tuner.simulator.config import ServerConfig
from tuner.simulator.profile import AcceptanceSpec, Profile
from tuner.simulator.speculation import SpecKind

#: Prompts shorter than this compress badly whatever they say, so they count as typical.
_MIN_BYTES_FOR_RATIO = 256
_PREDICTABILITY_RANGE = (0.85, 1.1)


def tree_shape(config: ServerConfig) -> tuple[int, float]:
    """(depth, width) of the draft tree the verifier actually sees.

    With topk=1 it is a chain of ``steps`` positions. With a tree, ``draft_tokens − 1`` nodes are
    spread over at most ``steps`` levels, so each level offers ``(draft_tokens − 1)/depth``
    alternatives (at most topk).
    """
    if not config.speculative:
        return 0, 1.0
    if config.kind is SpecKind.NGRAM:
        return speculation.ngram_shape(config.args, config.draft_tokens)
    if config.num_steps == 0:
        return 0, 1.0
    proposals = max(config.draft_tokens - 1, 0)
    depth = min(config.num_steps, proposals)
    if depth == 0:
        return 0, 1.0
    width = min(float(config.topk), max(1.0, proposals / depth))
    return depth, width


@lru_cache(maxsize=4096)
def compression_ratio(text: str) -> float | None:
    """zlib-compressed size / raw size: low for repetitive text. None when the text is too short to
    tell."""
    raw = text.encode("utf-8")
    if len(raw) < _MIN_BYTES_FOR_RATIO:
        return None
    return len(zlib.compress(raw, 6)) / len(raw)


def acceptance_multiplier(profile: Profile, config: ServerConfig, prompt_text: str | None) -> float:
    """What a prompt does to acceptance: a little for a draft model (``predictability``); for n-gram
    lookup it decides the first position's rate, returned as a multiplier of the profile's typical
    one."""
    if config.kind is SpecKind.NGRAM:
        ratio = compression_ratio(prompt_text) if prompt_text else None
        return speculation.ngram_first(profile, ratio) / profile.ngram.base
    return predictability(profile.acceptance, prompt_text)


def predictability(acc: AcceptanceSpec, prompt_text: str | None) -> float:
    """Acceptance multiplier from how repetitive the prompt is (repetitive context → easier
    drafting)."""
    ratio = compression_ratio(prompt_text) if prompt_text else None
    if ratio is None:
        return 1.0
    m = 1.0 + acc.predictability_sensitivity * (acc.reference_compression_ratio - ratio)
    return min(max(m, _PREDICTABILITY_RANGE[0]), _PREDICTABILITY_RANGE[1])


def position_rates(profile: Profile, config: ServerConfig, *, temperature: float,
                   multiplier: float = 1.0, chain: int | None = None) -> tuple[float, ...]:
    """Conditional acceptance probability of each draft position the tree covers (``chain``: of a
    topk-1 chain of that many steps instead, as adaptive steps run)."""
    depth, width = tree_shape(config) if chain is None else (chain, 1.0)
    acc = speculation.acceptance(profile, config.kind)
    m = multiplier * math.exp(-acc.temperature_penalty * max(temperature, 0.0))
    tries = width**acc.topk_exponent
    rates = []
    for i in range(depth):
        p = min(acc.max_rate, (acc.limit - (acc.limit - acc.first) * acc.decay**i) * m)
        rates.append(1.0 - (1.0 - p) ** tries)
    return tuple(rates)


def expected_accepted_drafts(rates: tuple[float, ...]) -> float:
    """Expected accepted draft tokens per verify (the bonus token not included)."""
    total, chain = 0.0, 1.0
    for p in rates:
        chain *= p
        total += chain
    return total


def decode_iteration_ms(profile: Profile, config: ServerConfig, batch: int, context_tokens: int,
                        *, steps: int | None = None) -> float:
    """Noiseless duration of one decode iteration (draft + verify) for ``batch`` running requests
    whose contexts (prompt + generated) sum to ``context_tokens`` (``steps``: a topk-1 chain of that
    many steps, as adaptive steps run; 0 is a plain decode)."""
    t = profile.timing
    if steps is None:
        steps, topk, draft = config.num_steps, config.topk, config.draft_tokens
    else:
        topk, draft = 1, steps + 1
    cost = speculation.draft_cost(profile, config.kind)
    if config.kind is SpecKind.NGRAM:
        steps = 0  # no draft forward: the trie lookup is CPU work (cost.cpu_request_ms)
    factor = t.attention_backend_factor.get(config.attention_backend, 1.0)
    fixed = t.iteration_base_ms + steps * cost.step_ms
    per_token = (steps * cost.token_ms * batch * topk + t.verify_token_ms * batch * draft
                 + t.context_ms_per_ktok * context_tokens / 1000.0)
    gpu = fixed + factor * per_token
    if batch > config.cuda_graph_max_bs:
        # No captured graph this large (or graphs off): eager kernels, each forward pays its
        # launches.
        gpu = gpu * t.eager_factor + t.eager_launch_ms * (steps + 1)
    cpu = t.scheduler_ms + (t.scheduler_request_ms + cost.cpu_request_ms) * batch
    if not config.overlap:
        # --disable-overlap-schedule: the CPU side waits for the GPU and vice versa
        return float(cpu + gpu)
    q = t.overlap_sharpness
    return float((cpu**q + gpu**q) ** (1.0 / q))


def prefill_ms(profile: Profile, prompt_tokens: int) -> float:
    """One prefill (extend) batch of ``prompt_tokens`` new tokens, draft extend included."""
    return profile.timing.prefill_base_ms + profile.timing.prefill_token_ms * prompt_tokens
