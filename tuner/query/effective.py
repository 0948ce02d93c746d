"""What SGLang runs where it differs from what was proposed: one list of changes, shown by
``trials``, ``trial N``, ``best`` (every format) and the report.

A trial stores its deployed flags (``config``: what the launch command says) and the values SGLang
resolves them to (``effective``: from the target's own SGLang, tuner/targets/resolver.py, or
spectune's rules where it cannot be asked). A change is a resolved value that differs from the flag
the command line gives — ``page-size 64 (SGLang forces it for flashmla)`` — or a value SGLang chose
for a flag the command leaves out (the auto-chosen draft tree, the attention backend). The command a
user deploys stays the proposed one: it is what SGLang was given.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tuner.sglang.launch import ServerConfig
from tuner.sglang.resolution import PAGE64_BACKENDS
from tuner.study.proposal import EFFECTIVE_FLAGS

TREE = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")
GRAPHLESS_BACKENDS = ("torch_native", "flex_attention")
#: Values SGLang gives a flag left out that say nothing a reader needs (the plain defaults).
_UNREMARKABLE = {"page_size": (1,), "cuda_graph_disabled": (False,), "speculative_algorithm": ()}


@dataclass(frozen=True)
class Change:
    flag: str  # the option, e.g. "--page-size"
    proposed: Any  # the command line's value; None: the flag is not given
    effective: Any  # what SGLang runs
    why: str

    def text(self) -> str:
        """``page-size 64 (SGLang forces it for flashmla)``."""
        value = (("on" if self.effective else "off") if isinstance(self.effective, bool)
                 else self.effective)
        return f"{self.flag.removeprefix('--')} {value} ({self.why})"

    def to_json(self) -> dict[str, Any]:
        return {"flag": self.flag, "proposed": self.proposed, "effective": self.effective,
                "why": self.why}


def changes(config: ServerConfig | None, effective: Mapping[str, Any] | None) -> tuple[Change, ...]:
    """Where what SGLang runs (``effective``) differs from ``config``'s command line; empty when
    either is unknown. Unknown effective values (None: SGLang's to choose, not known here) are never
    shown as changes."""
    if config is None or not effective:
        return ()
    out = []
    for key, flag in EFFECTIVE_FLAGS.items():
        value = effective.get(key)
        if value is None:
            continue
        given = config.get(flag)
        if given is None:
            if key == "speculative_algorithm" or value in _UNREMARKABLE.get(key, ()):
                continue
        elif _same(given, value):
            continue
        out.append(Change(flag, given, value, _why(key, given, value, effective)))
    return tuple(out)


def _same(given: Any, value: Any) -> bool:
    if isinstance(value, bool) or isinstance(given, bool):
        return bool(given) == bool(value)
    return str(given) == str(value)


def _why(key: str, given: Any, value: Any, effective: Mapping[str, Any]) -> str:
    backend = effective.get("attention_backend")
    if key == "page_size" and backend in (*PAGE64_BACKENDS, "trtllm_mha", "intel_xpu"):
        return f"SGLang forces it for {backend}" + (" below 16" if backend == "trtllm_mha" else "")
    if key == "mem_fraction_static" and backend == "aiter" and given is not None:
        return "SGLang scales it by 0.85 for aiter with a context over 8192"
    if key == "cuda_graph_disabled" and value is True and backend in GRAPHLESS_BACKENDS:
        return f"SGLang turns CUDA graphs off for {backend}"
    if key in TREE:
        if given is None:
            return "SGLang's auto-chosen draft tree"
        steps = effective.get("speculative_num_steps")
        if key == "speculative_num_draft_tokens" and steps is not None and value == steps + 1:
            return "SGLang sets it to steps + 1"
        return "SGLang adjusts it"
    if key == "attention_backend" and given is None:
        return "SGLang's default for this GPU and model"
    return "SGLang's choice" if given is None else "SGLang changes it"


def summary(found: tuple[Change, ...]) -> str:
    """One line for a table cell: ``page-size 64, attention-backend fa3`` ("" when SGLang runs the
    command as given)."""
    return ", ".join(c.text().split(" (", 1)[0] for c in found)


def comment_lines(found: tuple[Change, ...], prefix: str = "# ") -> list[str]:
    """The changes as comment lines above a command or drop-in (pasting them changes nothing)."""
    if not found:
        return []
    return [f"{prefix}SGLang runs this with: {found[0].text()}",
            *(f"{prefix}{' ' * len('SGLang runs this with: ')}{c.text()}" for c in found[1:])]


def shared(found: Iterable[tuple[Change, ...] | None]) -> tuple[Change, ...]:
    """The changes every trial has (``None``: a trial that was never deployed, left out): a table
    says them once below itself instead of in every row."""
    deployed = [f for f in found if f is not None]
    if not deployed:
        return ()
    return tuple(c for c in deployed[0] if all(c in f for f in deployed[1:]))
