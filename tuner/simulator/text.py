"""Tokens without a tokenizer: prompt token counts, generated text, and the EOS rule.

The simulator has no vocabulary, so it approximates: a prompt has one token per 4 characters (what
BPE tokenizers give for English), and each generated token is one short word. What matters for the
tuner is that counts are consistent: ``usage.completion_tokens`` equals the number of words
streamed.

EOS rule (when ignore_eos is false): each (seed, prompt) has a natural length drawn uniformly from
``[eos_min_tokens, eos_max_tokens]`` of the profile by hashing; the response ends at
``min(max_tokens, natural length)`` with finish_reason "stop" (or "length" when max_tokens is
reached first). The ground truth uses the expectation of that same rule
(``expected_output_length``).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence

from tuner.simulator.profile import Profile

_WORDS = (
    "the", "of", "and", "to", "a", "in", "is", "that", "for", "it", "as", "with", "be", "on",
    "this", "by",
    "model", "token", "server", "draft", "value", "we", "can", "each", "step", "when", "more",
    "than", "which", "batch", "speed", "so", "then", "cache", "first", "next", "time", "one", "two",
    "result",
)


def count_prompt_tokens(text: str) -> int:
    return max(1, (len(text) + 3) // 4)


def prompt_of_messages(messages: Sequence[dict[str, object]]) -> str:
    """The text a chat template would feed the model: the messages' contents joined (roles as
    tags)."""
    parts = []
    for message in messages:
        content = message.get("content", "")
        if isinstance(content, list):  # [{"type": "text", "text": …}, …]
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        parts.append(f"<|{message.get('role', 'user')}|>{content}")
    return "\n".join(parts)


def stable_hash(*parts: object) -> int:
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def natural_length(profile: Profile, seed: int, prompt: str) -> int:
    """Where this prompt's answer would hit EOS (deterministic for a seed)."""
    lo, hi = profile.model.eos_min_tokens, profile.model.eos_max_tokens
    return lo + stable_hash("eos", seed, prompt) % (hi - lo + 1)


def output_length(profile: Profile, seed: int, prompt: str, max_tokens: int,
                  ignore_eos: bool) -> int:
    if ignore_eos:
        return max_tokens
    return min(max_tokens, natural_length(profile, seed, prompt))


def expected_output_length(profile: Profile, max_tokens: int, ignore_eos: bool) -> float:
    """E[min(max_tokens, X)], X uniform on the profile's integer EOS range — the ground truth's
    length."""
    if ignore_eos:
        return float(max_tokens)
    lo, hi = profile.model.eos_min_tokens, profile.model.eos_max_tokens
    m = max_tokens
    n = hi - lo + 1
    if m <= lo:
        return float(m)
    if m >= hi:
        return (lo + hi) / 2.0
    below = (lo + m - 1) * (m - lo) / 2.0  # sum of x for x in [lo, m−1]
    return (below + m * (hi - m + 1)) / n


class TokenWriter:
    """Deterministic words for one request: the same (seed, prompt) always says the same thing — up
    to ``diverge_after`` tokens, where a configuration with the ``wrong-output`` fault
    (tuner/simulator/faults.py) starts saying something else."""

    def __init__(self, seed: int, prompt: str, diverge_after: int | None = None) -> None:
        self._rng = random.Random(stable_hash("text", seed, prompt))
        self._wrong = random.Random(stable_hash("wrong", seed,
                                                prompt)) if diverge_after is not None else None
        self._diverge_after = diverge_after
        self._written = 0

    def take(self, n: int) -> list[str]:
        words = []
        for _ in range(n):
            right = self._rng.choice(_WORDS)
            if (self._wrong is not None and self._diverge_after is not None
                and self._written >= self._diverge_after):
                # Never the right word by chance: the divergence is where the texts differ.
                right = _WORDS[(_WORDS.index(right) + 1
                                + self._wrong.randrange(len(_WORDS) - 1)) % len(_WORDS)]
            self._written += 1
            words.append(" " + right)
        return words
