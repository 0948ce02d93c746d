"""What SGLang reads from outside the command line: the model's architecture and the GPU's compute
capability.

SGLang picks the attention backend, the page size and the auto-chosen draft tree from these, so a
verdict on a command line is only as good as what we know about them. Both may be unknown (a study
file that names neither): then ``tuner.sglang.rules.judge`` resolves the command line for every GPU
generation SGLang distinguishes and keeps only what does not depend on the choice, so nothing is
guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

Capability = tuple[int, int]

#: GPU names → compute capability, most specific first (matched as case-insensitive substrings of
#: the name ``nvidia-smi`` prints, e.g. "NVIDIA H100 80GB HBM3", or of a short name like "H100").
GPU_CAPABILITIES: tuple[tuple[str, Capability], ...] = (
    ("GH200", (9, 0)), ("H200", (9, 0)), ("H100", (9, 0)), ("H800", (9, 0)), ("H20", (9, 0)),
    ("GB300", (10, 3)), ("B300", (10, 3)), ("GB200", (10, 0)), ("B200", (10, 0)), ("B100", (10, 0)),
    ("RTX PRO 6000", (12, 0)), ("RTX 5090", (12, 0)), ("RTX 5080", (12, 0)), ("DGX Spark", (12, 1)),
    ("L40S", (8, 9)), ("L40", (8, 9)), ("L4", (8, 9)), ("RTX 4090", (8, 9)),
    ("RTX 6000 Ada", (8, 9)),
    ("A100", (8, 0)), ("A800", (8, 0)), ("A30", (8, 0)), ("A10", (8, 6)), ("RTX 3090", (8, 6)),
)
#: GPU names → the memory ``nvidia-smi --query-gpu=memory.total`` reports (MiB), for showing SGLang
#: a GPU named in ``[target] gpu`` where nvidia-smi cannot be asked (SGLang's memory-dependent
#: defaults read it). A GPU not listed is not shown from its name (never guessed).
GPU_MEMORY_MB: tuple[tuple[str, int], ...] = (
    ("GH200", 97871), ("H200", 143771), ("H100", 81559), ("H800", 81559), ("H20", 97871),
    ("B200", 183359), ("RTX PRO 6000", 97887), ("A100", 81920), ("L40S", 46068), ("L4", 23034),
)
#: One capability per GPU family SGLang's hooks tell apart (Ampere/Ada, Hopper, Blackwell SM100,
#: SM12x): an unknown GPU is resolved for each of these.
CAPABILITY_FAMILIES: tuple[Capability, ...] = ((8, 0), (9, 0), (10, 0), (12, 0))


def capability_of_gpu(name: str) -> Capability | None:
    """The compute capability of a GPU named ``name`` (None when spectune does not know the GPU)."""
    folded = name.casefold()
    return next((cap for key, cap in GPU_CAPABILITIES if key.casefold() in folded), None)


def memory_of_gpu(name: str) -> int | None:
    """The memory (MiB) nvidia-smi reports for a GPU named ``name``; None when spectune does not
    know it."""
    folded = name.casefold()
    return next((mb for key, mb in GPU_MEMORY_MB if key.casefold() in folded), None)


def parse_capability(text: str) -> Capability:
    """``"9.0"`` → (9, 0); raises ``ValueError`` for anything else."""
    match = re.fullmatch(r"\s*(\d{1,2})\.(\d)\s*", text)
    if not match:
        raise ValueError(f"not a compute capability like \"9.0\": {text!r}")
    return int(match.group(1)), int(match.group(2))


@dataclass(frozen=True)
class Hardware:
    """The outside inputs of SGLang's resolution; ``None`` = unknown (never guessed)."""

    model_architecture: str | None = None
    compute_capability: Capability | None = None

    def describe(self) -> str:
        cap = "unknown GPU" if self.compute_capability is None else "sm{}{}".format(
            *self.compute_capability)
        return f"{self.model_architecture or 'unknown architecture'} on {cap}"


UNKNOWN = Hardware()
