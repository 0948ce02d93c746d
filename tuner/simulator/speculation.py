"""What kind of speculation a server runs, and what each kind costs and accepts (docs/simulator.md,
"Kinds of speculation"): the EAGLE family's draft head (EAGLE, EAGLE3), the model's own MTP layers
(NEXTN), a small standalone model (STANDALONE), n-gram lookup in the text so far (NGRAM), or none.

SGLang resolves NEXTN to EAGLE (its effective algorithm says EAGLE), so the kind is read from the
command line's ``--speculative-algorithm`` as given.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from tuner.simulator.profile import AcceptanceSpec, Profile, StandaloneSpec


class SpecKind(StrEnum):
    OFF = "off"
    EAGLE = "eagle"  # EAGLE / EAGLE3 draft heads
    MTP = "mtp"  # NEXTN: the model's own multi-token-prediction layers
    STANDALONE = "standalone"
    NGRAM = "ngram"
    OTHER = "other"  # DFLASH, DSPARK, UNO ...: one draft step of one token, EAGLE's costs


def kind_of(given_algorithm: Any, effective_algorithm: str | None) -> SpecKind:
    if effective_algorithm is None:
        return SpecKind.OFF
    given = str(given_algorithm or effective_algorithm).upper()
    if given == "NEXTN":
        return SpecKind.MTP
    if given in ("EAGLE", "EAGLE3"):
        return SpecKind.EAGLE
    if given == "STANDALONE":
        return SpecKind.STANDALONE
    if given == "NGRAM":
        return SpecKind.NGRAM
    return SpecKind.OTHER


@dataclass(frozen=True)
class DraftCost:
    step_ms: float  # fixed GPU cost of one draft forward
    token_ms: float  # per drafted token in it
    cpu_request_ms: float = 0.0  # CPU work per request per iteration (n-gram trie lookup)


def standalone_spec(profile: Profile) -> StandaloneSpec:
    """The profile's ``[standalone]``, or one derived from its EAGLE draft: a small LM of ~0.6B
    parameters has a few transformer layers where an EAGLE head has one (4× its step cost, 1.2 GB)
    and accepts ~0.85× as much (EAGLE-3 reads the target's hidden states; a standalone draft does
    not)."""
    if profile.standalone is not None:
        return profile.standalone
    t = profile.timing
    return StandaloneSpec(draft_path="Qwen/Qwen3-0.6B", weights_gb=1.2,
                          draft_step_ms=4.0 * t.draft_step_ms,
                          draft_token_ms=4.0 * t.draft_token_ms, acceptance_scale=0.85)


def draft_cost(profile: Profile, kind: SpecKind) -> DraftCost:
    t = profile.timing
    if kind is SpecKind.MTP and profile.mtp is not None:
        return DraftCost(profile.mtp.draft_step_ms, profile.mtp.draft_token_ms)
    if kind is SpecKind.STANDALONE:
        s = standalone_spec(profile)
        return DraftCost(s.draft_step_ms, s.draft_token_ms)
    if kind is SpecKind.NGRAM:
        return DraftCost(0.0, 0.0, profile.ngram.match_ms)
    if kind is SpecKind.OFF:
        return DraftCost(0.0, 0.0)
    return DraftCost(t.draft_step_ms, t.draft_token_ms)


def draft_weights_gb(profile: Profile, kind: SpecKind) -> float:
    """Per GPU, beside the target's weights: nothing for NGRAM and without speculation."""
    if kind is SpecKind.MTP:
        return profile.mtp.weights_gb if profile.mtp is not None else 0.0
    if kind is SpecKind.STANDALONE:
        return standalone_spec(profile).weights_gb
    if kind in (SpecKind.NGRAM, SpecKind.OFF):
        return 0.0
    return profile.model.draft_weights_gb


def acceptance(profile: Profile, kind: SpecKind) -> AcceptanceSpec:
    """The per-position acceptance curve of this kind's draft (NGRAM's first rate is set per prompt
    by ``ngram_first``)."""
    acc = profile.acceptance
    if kind is SpecKind.MTP and profile.mtp is not None:
        m = profile.mtp
        return AcceptanceSpec(first=m.first, limit=m.limit, decay=m.decay,
                              topk_exponent=acc.topk_exponent,
                              temperature_penalty=acc.temperature_penalty,
                              predictability_sensitivity=acc.predictability_sensitivity,
                              reference_compression_ratio=acc.reference_compression_ratio,
                              max_rate=acc.max_rate)
    if kind is SpecKind.STANDALONE:
        scale = standalone_spec(profile).acceptance_scale
        return AcceptanceSpec(first=acc.first * scale, limit=acc.limit * scale, decay=acc.decay,
                              topk_exponent=acc.topk_exponent,
                              temperature_penalty=acc.temperature_penalty,
                              predictability_sensitivity=acc.predictability_sensitivity,
                              reference_compression_ratio=acc.reference_compression_ratio,
                              max_rate=acc.max_rate)
    if kind is SpecKind.NGRAM:
        n = profile.ngram
        return AcceptanceSpec(first=n.base, limit=n.limit, decay=n.decay,
                              topk_exponent=n.topk_exponent,
                              temperature_penalty=acc.temperature_penalty,
                              predictability_sensitivity=0.0,
                              reference_compression_ratio=n.reference_compression_ratio,
                              max_rate=n.max_rate)
    return acc


def ngram_first(profile: Profile, compression_ratio: float | None) -> float:
    """The n-gram draft's first-position rate for a prompt of this zlib ratio (None: too short to
    tell)."""
    n = profile.ngram
    if compression_ratio is None:
        return n.base
    rate = n.base + n.sensitivity * (n.reference_compression_ratio - compression_ratio)
    return min(max(rate, n.min_rate), n.max_rate)


def ngram_shape(args: Any, draft_tokens: int) -> tuple[int, float]:
    """(depth, width) of an n-gram draft tree: ``draft − 1`` nodes, about (min + max)/2 BFS breadth
    per level (the breadth narrows from max at short matches to min at long ones), at most
    ``max_trie_depth`` deep."""
    low = int(args.get("speculative_ngram_min_bfs_breadth") or 1)
    high = int(args.get("speculative_ngram_max_bfs_breadth") or 10)
    trie_depth = int(args.get("speculative_ngram_max_trie_depth") or 18)
    nodes = max(draft_tokens - 1, 0)
    if nodes == 0:
        return 0, 1.0
    width = min(max((low + high) / 2.0, 1.0), float(nodes))
    depth = max(1, min(round(nodes / width), trie_depth))
    return depth, max(1.0, nodes / depth)
