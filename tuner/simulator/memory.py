"""Per-GPU memory: weights, the static KV pool, CUDA-graph memory — and where it runs out.

SGLang sizes the static pool as ``mem_fraction_static × GPU memory``; weights go in first, the KV
cache takes the rest. CUDA graphs (and the CUDA context) must fit in what is left *outside* the
static pool, so a greedy memory fraction together with large decode graphs runs out of memory during
graph capture (reference notes §6).
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.simulator.profile import Profile

GRAPH_OOM_MESSAGE = (
    "Capture cuda graph failed: CUDA out of memory. Tried to allocate {need:.2f} GiB. GPU 0 has a "
    "total capacity of {total:.2f} GiB of which {free:.2f} GiB is free.\n"
    "Possible solutions:\n"
    "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
    "2. set --cuda-graph-max-bs-decode to a smaller value (e.g., 16)\n"
    "3. disable decode CUDA graph by --cuda-graph-backend-decode disabled (or "
    "--disable-cuda-graph)\nOpen an issue on GitHub "
    "https://github.com/sgl-project/sglang/issues/new/choose"
)
NOT_ENOUGH_MEMORY = "Not enough memory. Please try to increase --mem-fraction-static."


@dataclass(frozen=True)
class MemoryPlan:
    gpu_gb: float
    weights_gb: float  # per GPU: target shard + replicated draft
    static_pool_gb: float
    kv_gb: float
    kv_tokens: int
    graph_gb: float
    free_for_graphs_gb: float
    failure: str | None  # SGLang's message when this plan cannot start
    failure_stage: str | None  # "weights" | "kv" | "graph"


def plan_memory(profile: Profile, *, tp_size: int, mem_fraction: float, draft_weights_gb: float,
                graph_tokens: int, max_total_tokens: int | None = None) -> MemoryPlan:
    """``graph_tokens`` = largest decode-graph batch × tokens per request in it (draft tokens under
    speculation), which is what graph memory grows with; ``draft_weights_gb`` the draft's weights
    per GPU (0 without speculation, for NGRAM, and nearly 0 for a model's own MTP layer)."""
    model, mem = profile.model, profile.memory
    gpu = profile.hardware.gpu_memory_gb
    weights = model.weights_gb / tp_size + draft_weights_gb
    pool = mem_fraction * gpu
    kv_gb = pool - weights
    # KV heads are split over tensor-parallel ranks; the profile states bytes at its own GPU count.
    bytes_per_token = model.kv_bytes_per_token * profile.hardware.num_gpus / tp_size
    kv_tokens = max(0, int(kv_gb * 1e9 / bytes_per_token))
    if max_total_tokens is not None:
        kv_tokens = min(kv_tokens, int(max_total_tokens))
    graph_gb = mem.graph_base_gb + mem.graph_gb_per_token * graph_tokens if graph_tokens else 0.0
    free = gpu - pool - mem.non_torch_gb
    failure = stage = None
    if weights > gpu - mem.non_torch_gb:
        stage = "weights"
        failure = (f"CUDA out of memory. Tried to allocate {weights:.2f} GiB. GPU 0 has a total "
                   f"capacity of {gpu:.2f} GiB of which {max(gpu - mem.non_torch_gb, 0):.2f} GiB "
                   "is free.")
    elif kv_tokens <= 0:
        stage, failure = "kv", NOT_ENOUGH_MEMORY
    elif graph_gb > free:
        stage = "graph"
        failure = GRAPH_OOM_MESSAGE.format(need=graph_gb, total=gpu, free=max(free, 0.0))
    return MemoryPlan(gpu_gb=gpu, weights_gb=weights, static_pool_gb=pool, kv_gb=max(kv_gb, 0.0),
                      kv_tokens=kv_tokens, graph_gb=graph_gb, free_for_graphs_gb=free,
                      failure=failure, failure_stage=stage)
