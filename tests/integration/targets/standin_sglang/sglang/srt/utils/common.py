"""``get_nvgpu_memory_capacity`` (SGLang runs nvidia-smi; the resolver replaces it with what it
read)."""

from __future__ import annotations


def get_nvgpu_memory_capacity() -> float:
    raise RuntimeError("the stand-in has no GPU of its own")
