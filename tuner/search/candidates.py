"""What the grey-box sampler (tuner/search/greybox.py) chooses among: the space's distinct valid
configurations (all of them up to ``ENUMERATE_LIMIT`` raw points, a random sample beyond), decoded
once per space, with the models' inputs in [0, 1].

The speed models read the CUDA-graph batch size only up to the benchmark's largest concurrency
(``speed_x``): SGLang replays the smallest captured batch that holds the running batch, and no phase
runs more requests than its concurrency, so a graph size above it adds capture memory and no speed.
Left to itself a GP extrapolates "a larger graph is faster" from the eager decoding below the batch
(a graph of 32 at C=64) to sizes that only cost memory, and proposes them where they run out of it
(docs/benchmarks.md, issue 27).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tuner.search.branch_inputs import filled, own_flag
from tuner.search.tree_shape import tree_shape, tree_values
from tuner.search.trust_region import rung_table
from tuner.sglang.launch import ServerConfig
from tuner.study.space import ALGORITHM, DRAFT, STEPS, TOPK, SearchSpace

#: Enumerate every point of a space up to this many raw points (the seed space has ~200,000); sample
#: beyond.
ENUMERATE_LIMIT = 250_000
_TREE = (STEPS, TOPK, DRAFT)
#: The CUDA-graph batch sizes: the speed models read them only up to the largest batch
#: (``speed_x``).
GRAPH_FLAGS = frozenset({"--cuda-graph-max-bs", "--cuda-graph-max-bs-decode"})
#: Flags whose larger values need more GPU memory beside the static pool (CUDA-graph capture is
#: where most configurations run out, docs/simulator.md): a configuration at least as large as one
#: that ran out of memory in each of these, and equal in every other tuned flag, will run out too —
#: unless the failure was the KV pool being too small, which a larger static fraction cures.
MEMORY_GROWS = frozenset(
    {"--mem-fraction-static", *GRAPH_FLAGS, DRAFT, TOPK, STEPS, "--max-running-requests",
     "--chunked-prefill-size"})


@dataclass(frozen=True)
class Candidates:
    """A space's distinct valid configurations: encoded parameters, key, and model inputs in [0,
    1]."""

    params: tuple[dict[str, Any], ...]
    keys: tuple[str, ...]
    x: np.ndarray
    tree_columns: tuple[int, ...]
    memory_columns: tuple[int, ...]  # the columns of MEMORY_GROWS flags
    index: Mapping[str, int]
    rungs: np.ndarray  # each input's rung per candidate (tuner/search/trust_region.py)
    accept_x: np.ndarray  # the accept-length model's inputs: the tree columns and tokens per level
    # fewer draft tokens than steps + 1: never proposed (tuner/search/tree_shape.py)
    shallow: np.ndarray
    #: The speed models' inputs: ``x`` with every graph size that holds the benchmark's largest
    #: concurrency read as the smallest such size (why: the module's docstring). Memory and
    #: feasibility read ``x``.
    speed_x: np.ndarray
    #: The draft tree's shape (steps and topk columns): what decides the kernels a configuration
    #: runs.
    shape_columns: tuple[int, ...] = ()
    # each candidate's branch
    labels: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))
    #: Which input columns are each flag's (a categorical flag has one column per choice), for the
    #: flags outside the tree: the memory and scheduling flags a proposal moves
    #: (tuner/search/trust_region.py ``one_flag_at_a_time``).
    other_flags: tuple[tuple[int, ...], ...] = ()
    #: Each candidate's (steps, top-k, draft tokens), or None where a candidate has no tree: what
    #: the accept length's prior reads (tuner/search/accept_prior.py).
    tree_values: np.ndarray | None = None


_CACHE: dict[str, Candidates] = {}


def candidates(space: SearchSpace, seed: int = 0) -> Candidates:
    """``Candidates`` of ``space`` (cached per space: the bench runs many studies on one)."""
    fingerprint = repr(
        (space.spec.search, sorted(space.spec.server_flags.items()), space.spec.server_env,
         space.spec.hardware, space.table.version, space.table.fingerprint,
         space.spec.max_concurrency))
    if fingerprint not in _CACHE:
        if len(_CACHE) >= 8:
            _CACHE.clear()
        _CACHE[fingerprint] = _build(space, seed)
    return _CACHE[fingerprint]


def _build(space: SearchSpace, seed: int) -> Candidates:
    params: list[dict[str, Any]] = []
    keys: list[str] = []
    values: list[dict[str, Any]] = []
    configs: list[ServerConfig] = []
    index: dict[str, int] = {}
    for p, proposal in space.distinct_valid(ENUMERATE_LIMIT, seed):
        assert proposal.config is not None and proposal.identity is not None
        index[proposal.identity] = len(keys)
        params.append(p)
        keys.append(proposal.identity)
        values.append(dict(proposal.values))
        configs.append(proposal.config)
    columns: list[np.ndarray] = []
    tree: list[int] = []
    memory: list[int] = []
    shape: list[int] = []
    other: list[tuple[int, ...]] = []
    speed: list[np.ndarray] = []
    for d in space.dimensions:
        # a flag of another branch gets a neutral value (tuner/search/branch_inputs.py)
        raw = filled(d, values)
        numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in raw)
        if numeric:
            # Ladders by rung (their values are usually doublings), the draft-token count on a log
            # scale (acceptance saturates in it), other numbers linearly.
            if d.encoding == "ladder":
                col = np.array([d.choices.index(v) for v in raw], dtype=float)
            elif d.flag == DRAFT:
                col = np.log(np.maximum(np.array(raw, dtype=float), 1.0))
            else:
                col = np.array(raw, dtype=float)
            new = [_unit(col)]
            speed.append(_holding(new[0], np.array(raw, dtype=float), space.spec.max_concurrency)
                         if d.flag in GRAPH_FLAGS else new[0])
        else:  # categorical: one column per choice, at distance 1 from one another
            choices = sorted({repr(v) for v in raw})
            new = [np.array([repr(v) == c for v in raw], dtype=float) / math.sqrt(2)
                   for c in choices]
            speed += new
        if d.flag in _TREE or d.flag == ALGORITHM or own_flag(space, d.flag):  # the accept length's
            tree += range(len(columns), len(columns) + len(new))
        else:
            other.append(tuple(range(len(columns), len(columns) + len(new))))
        if d.flag in (STEPS, TOPK):
            shape += range(len(columns), len(columns) + len(new))
        if d.flag in MEMORY_GROWS and numeric:
            memory += range(len(columns), len(columns) + len(new))
        columns += new
    x = np.stack(columns, axis=1) if columns and keys else np.zeros((len(keys), 0))
    per_level, shallow = tree_shape(configs)
    accept_x = x[:, tree or list(range(x.shape[1]))]
    if per_level is not None:
        accept_x = np.concatenate([accept_x, _unit(per_level)[:, None]], axis=1)
    branch_names = [b.choice if (b := space.branch(p)) is not None else None for p in params]
    # the branches in one order, computed once (per candidate, it cost minutes on a 90k space)
    order = {b: i for i, b in enumerate(sorted(set(branch_names), key=repr))}
    labels = np.array([order[b] for b in branch_names], dtype=int)
    speed_x = np.stack(speed, axis=1) if speed and keys else x
    return Candidates(tuple(params), tuple(keys), x, tuple(tree), tuple(memory), index,
                      rung_table(x), accept_x, shallow, speed_x, tuple(shape), labels,
                      tuple(other), tree_values(configs))


def _holding(column: np.ndarray, sizes: np.ndarray, batch: int) -> np.ndarray:
    """``column`` (a graph size's inputs) with every size that holds ``batch`` read as the smallest
    one that does: a batch replays the same captured graph under any larger maximum."""
    holding = sizes >= batch
    if not holding.any():
        return column
    smallest = np.flatnonzero(sizes == sizes[holding].min())[0]
    return np.where(holding, column[smallest], column)


def _unit(col: np.ndarray) -> np.ndarray:
    """``col`` scaled to [0, 1] (all zeros where it does not vary): the models' input range."""
    span = col.max() - col.min() if len(col) else 0.0
    return (col - col.min()) / span if span > 0 else np.zeros_like(col)
