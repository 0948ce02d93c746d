"""The search space: Optuna parameters in, one valid SGLang server configuration (or a reason) out.

Encoding follows what Optuna's samplers model well on a small, expensive, mostly discrete space
(reference/optuna-5.0-notes.md §3): every dimension has a fixed range, so GP and multivariate TPE see all of
them on every trial; numeric ladders become an index; float ranges become an integer count of steps (never
``suggest_float``, which proposes 0.7999999999999999); draft tokens become a position inside the range the
draft tree allows, so no proposal is ever an over-large tree.

SGLang's rules (tuner.sglang.rules) are applied after decoding, to the arguments of the command line that
would be deployed: an invalid point is repaired when SGLang itself would
adjust it (topk=1 ⇒ draft = steps+1, the 48-request cap), and rejected with SGLang's message otherwise. A
rejected point is never deployed. An accepted one carries the *effective* values SGLang will run (auto-chosen
tree, forced page size, backend, graphs off, running-request cap), and its key — what spots a configuration
already measured — is of those values, so two spellings of one server are one configuration.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

import numpy as np
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution

from tuner.sglang import rules
from tuner.sglang.launch import FlagValue, ServerConfig
from tuner.sglang.options import OptionTable
from tuner.sglang.parse import parse_server_args
from tuner.study.spec import SPECULATION_OFF, ParamSpec, StudySpec

Encoding = Literal["int", "scaled", "ladder", "categorical", "draft-fraction"]

STEPS = "--speculative-num-steps"
TOPK = "--speculative-eagle-topk"
DRAFT = "--speculative-num-draft-tokens"
ALGORITHM = "--speculative-algorithm"
MAX_RUNNING = "--max-running-requests"
MODEL_PATH = "--model-path"
#: Each effective value and the flag it replaces in a configuration's key (None: kept when unknown).
EFFECTIVE_FLAGS = {
    "speculative_algorithm": ALGORITHM, "speculative_num_steps": STEPS, "speculative_eagle_topk": TOPK,
    "speculative_num_draft_tokens": DRAFT, "page_size": "--page-size", "attention_backend": "--attention-backend",
    "cuda_graph_disabled": "--disable-cuda-graph", "max_running_requests": MAX_RUNNING,
    # Known only from the target's own SGLang (tuner/targets/resolver.py): aiter scales it by 0.85.
    "mem_fraction_static": "--mem-fraction-static",
}


@dataclass(frozen=True)
class Dimension:
    """One Optuna parameter and the rule that turns its value into a flag value."""

    param: ParamSpec
    name: str
    encoding: Encoding
    low: int = 0
    high: int = 0
    step: int = 1
    choices: tuple[Any, ...] = ()

    @property
    def flag(self) -> str:
        return self.param.flag

    def distribution(self) -> BaseDistribution:
        if self.encoding == "categorical":
            return CategoricalDistribution(self.choices)
        return IntDistribution(self.low, self.high, step=self.step)

    def encoded_values(self) -> list[Any]:
        if self.encoding == "categorical":
            return list(self.choices)
        return list(range(self.low, self.high + 1, self.step))

    def size(self) -> int:
        return len(self.encoded_values())

    def decode(self, value: Any) -> FlagValue:
        """The flag value for an encoded value (draft-fraction is decoded by the space, which knows the tree)."""
        if self.encoding == "scaled":
            step = float(self.param.step or 1)
            return round(value * step, _decimals(step))
        if self.encoding == "ladder":
            return self.choices[value]
        return value

    def encode(self, flag_value: Any) -> Any:
        if self.encoding == "scaled":
            return round(flag_value / float(self.param.step or 1))
        if self.encoding == "ladder":
            return self.choices.index(flag_value)
        if self.encoding == "draft-fraction":
            return min(max(int(flag_value) - int(self.param.low or 0), self.low), self.high)
        return flag_value

    def describe(self) -> str:
        p = self.param
        if self.encoding == "int":
            return f"int {p.low}..{p.high}" + (f" step {p.step}" if p.step not in (None, 1) else "")
        if self.encoding == "scaled":
            return f"{p.low}..{p.high} step {p.step} (int {self.low}..{self.high} × {p.step})"
        if self.encoding == "ladder":
            return f"ladder {list(self.choices)} (index 0..{self.high})"
        if self.encoding == "draft-fraction":
            return (f"{p.low}..{p.high}, clipped to the tree's limit (position 0..{self.high} "
                    "in [min, min(max, topk+(steps−1)·topk²+1)])")
        return f"one of {list(self.choices)}"


@dataclass(frozen=True)
class Proposal:
    """The outcome of decoding one point: a deployable config, or the reason it is not deployable."""

    params: dict[str, Any]
    values: dict[str, FlagValue]
    config: ServerConfig | None
    repairs: tuple[str, ...] = ()
    reason: str | None = None
    #: What SGLang will run (``tuner.sglang.rules.Verdict.effective``; None values: SGLang's choice, unknown).
    effective: dict[str, Any] | None = None
    #: Identifies the deployment by its effective values (``effective_key``); None when rejected.
    key: str | None = None

    @property
    def rejected(self) -> bool:
        return self.config is None


@dataclass
class SpaceSummary:
    total_points: int
    examined: int = 0
    valid: int = 0
    distinct: set[str] = field(default_factory=set)
    rejections: Counter[str] = field(default_factory=Counter)

    @property
    def complete(self) -> bool:
        return self.examined == self.total_points

    @property
    def distinct_valid(self) -> int:
        return len(self.distinct)

    def top_rejections(self, n: int) -> list[tuple[str, int]]:
        return self.rejections.most_common(n)


class SearchSpace:
    """Built from a validated study; stateless apart from that."""

    def __init__(self, spec: StudySpec, table: OptionTable, *, loading: bool = True) -> None:
        self.spec = spec
        self.table = table
        #: Whether spectune's rules also judge what SGLang refuses while loading (tuner/sglang/loading.py); off
        #: where the target's own SGLang is asked, so its own table judges and its refusal is labelled as its own.
        self.loading = loading
        self.dimensions: tuple[Dimension, ...] = tuple(_dimension(p) for p in spec.search)
        self._by_name = {d.name: d for d in self.dimensions}

    # ----- Optuna side --------------------------------------------------------------------------------
    def distributions(self) -> dict[str, BaseDistribution]:
        return {d.name: d.distribution() for d in self.dimensions}

    def suggest(self, trial: Any) -> Proposal:
        """Ask ``trial`` (an ``optuna.Trial``) for every dimension, always all of them (GP needs that)."""
        params: dict[str, Any] = {}
        for d in self.dimensions:
            if d.encoding == "categorical":
                params[d.name] = trial.suggest_categorical(d.name, list(d.choices))
            else:
                params[d.name] = trial.suggest_int(d.name, d.low, d.high, step=d.step)
        return self.decode(params)

    def encode(self, values: Mapping[str, FlagValue]) -> dict[str, Any]:
        """Parameters for known flag values (e.g. the baseline); flags not given are left out."""
        return {d.name: d.encode(values[d.flag]) for d in self.dimensions if d.flag in values}

    # ----- decoding -----------------------------------------------------------------------------------
    def decode(self, params: Mapping[str, Any]) -> Proposal:
        values: dict[str, FlagValue] = {}
        fraction: Dimension | None = None
        for d in self.dimensions:
            if d.name not in params:
                raise KeyError(f"missing parameter {d.name}")
            if d.encoding == "draft-fraction":
                fraction = d
                continue
            values[d.flag] = d.decode(params[d.name])

        flags: dict[str, FlagValue] = {**self.spec.server_flags, **values}
        repairs: list[str] = []
        speculation = flags.get(ALGORITHM)
        if speculation == SPECULATION_OFF or speculation is None:
            # "off" drops every speculative flag, fixed ones included (the draft model path, ...).
            flags = {k: v for k, v in flags.items() if not k.startswith("--speculative-")}
        else:
            self._resolve_tree(flags, values, fraction, params, repairs)
            self._ensure_running_requests(flags, repairs)

        config = ServerConfig.build(flags, self.spec.server_env)
        verdict = self.judge(config)
        if isinstance(verdict, str):
            return Proposal(dict(params), values, None, tuple(repairs), reason=verdict)
        return Proposal(dict(params), values, config, tuple(repairs), effective=verdict,
                        key=effective_key(config, verdict))

    def judge(self, config: ServerConfig) -> dict[str, Any] | str:
        """SGLang's verdict on the command line ``config`` deploys: the effective values, or why it is refused
        (SGLang's own error line).

        The arguments are SGLang's parser defaults overlaid with the config's flags (study-file values are
        already typed and checked against the option table), as parsing the rendered command line would give
        them — without running argparse for each of 10⁵ points."""
        args = dict(_parser_defaults())
        for name, value in config.flags:
            args[self.table.lookup(name).dest] = value
        verdict = rules.judge(args, self.spec.hardware, loading=self.loading)
        if verdict.refused is not None:
            return verdict.refused.message
        assert verdict.effective is not None
        return verdict.effective

    def _resolve_tree(self, flags: dict[str, FlagValue], values: dict[str, FlagValue],
                      fraction: Dimension | None, params: Mapping[str, Any], repairs: list[str]) -> None:
        """Make steps/topk/draft tokens a complete, consistent triple (all three or none)."""
        steps = flags.get(STEPS)
        if steps is None:
            return  # the study file check guarantees topk/draft are absent too
        topk = flags.get(TOPK)
        if topk is None:
            flags[TOPK] = topk = 1
            repairs.append("--speculative-eagle-topk 1 (set explicitly: SGLang wants all three or none)")
        assert isinstance(steps, int) and isinstance(topk, int)
        if topk == 1:
            if flags.get(DRAFT) not in (None, steps + 1) and fraction is None:
                repairs.append(f"--speculative-num-draft-tokens {steps + 1} (SGLang forces steps+1 when topk=1)")
            flags[DRAFT] = steps + 1
        elif fraction is not None:
            flags[DRAFT] = _draft_from_fraction(fraction, params[fraction.name], steps, topk)
        if fraction is not None:
            values[fraction.flag] = flags[DRAFT]

    def _ensure_running_requests(self, flags: dict[str, FlagValue], repairs: list[str]) -> None:
        needed = self.spec.max_concurrency
        if MAX_RUNNING not in flags and needed > rules.SPECULATIVE_MAX_RUNNING_REQUESTS:
            flags[MAX_RUNNING] = needed
            repairs.append(f"--max-running-requests {needed} (SGLang caps running requests at "
                           f"{rules.SPECULATIVE_MAX_RUNNING_REQUESTS} under speculation; C={needed} would queue)")

    def emittable_flags(self) -> list[str]:
        """Every option string a launch command of this space can contain (for the target's preflight),
        including the ``--no-x`` spelling of switches that can be false."""
        names = set(self.spec.server_flags) | {d.flag for d in self.dimensions}
        if ALGORITHM in names:
            names |= {STEPS, TOPK, DRAFT, MAX_RUNNING}
        options: set[str] = set()
        for name in names:
            spec = self.table.lookup(name)
            options.add(spec.name)
            if spec.negation is not None:
                options.add(spec.negation)
        return sorted(options)

    # ----- size and enumeration -----------------------------------------------------------------------
    def raw_size(self) -> int:
        return math.prod(d.size() for d in self.dimensions) if self.dimensions else 1

    def points(self) -> Iterator[dict[str, Any]]:
        names = [d.name for d in self.dimensions]
        for combo in itertools.product(*(d.encoded_values() for d in self.dimensions)):
            yield dict(zip(names, combo, strict=True))

    def sample_points(self, n: int, seed: int = 0) -> Iterator[dict[str, Any]]:
        rng = np.random.default_rng(seed)
        values = [(d.name, d.encoded_values()) for d in self.dimensions]
        # One draw of all indices at once: per-point draws dominated the time of a large space's sample.
        indices = rng.integers(0, [len(v) for _, v in values] or [1], size=(n, max(len(values), 1)))
        for row in range(n):
            yield {name: vals[int(indices[row, i])] for i, (name, vals) in enumerate(values)}

    def enumerate(self, limit: int = 100_000, *, until_valid: bool = False) -> SpaceSummary:
        """Decode every point (or ``limit`` random ones if the space is larger) and count the outcomes.

        ``until_valid`` stops at the first valid point: all a feasibility check needs, and on a large space
        (tens of thousands of points, every command loading the study runs the check) the difference between
        milliseconds and half a minute."""
        total = self.raw_size()
        summary = SpaceSummary(total_points=total)
        points = self.points() if total <= limit else self.sample_points(limit)
        for params in points:
            summary.examined += 1
            proposal = self.decode(params)
            if proposal.config is None:
                summary.rejections[proposal.reason or "rejected"] += 1
            else:
                summary.valid += 1
                summary.distinct.add(proposal.key or proposal.config.key())
                if until_valid:
                    break
        return summary


@cache
def _parser_defaults() -> dict[str, Any]:
    return parse_server_args([MODEL_PATH, "model"], exit_on_error=False)


def effective_key(config: ServerConfig, effective: dict[str, Any]) -> str:
    """A configuration's identity by what SGLang runs: its flags, those SGLang resolves replaced by the
    effective values (a flag is kept where its effective value is unknown), and its environment."""
    known = {k: v for k, v in effective.items() if v is not None}
    replaced = {EFFECTIVE_FLAGS[k] for k in known if k in EFFECTIVE_FLAGS}
    flags = [[name, value] for name, value in config.flags if name not in replaced]
    return json.dumps({"flags": flags, "effective": known, "env": config.env}, sort_keys=True, default=str)


def _dimension(p: ParamSpec) -> Dimension:
    name = p.flag.removeprefix("--")
    if p.choices is not None:
        numbers = [c for c in p.choices if isinstance(c, int | float) and not isinstance(c, bool)]
        if len(numbers) == len(p.choices) > 1:
            ladder = tuple(sorted(numbers))
            return Dimension(p, f"{name}.idx", "ladder", 0, len(ladder) - 1, 1, ladder)
        return Dimension(p, name, "categorical", choices=tuple(p.choices))
    assert p.low is not None and p.high is not None
    if p.flag == DRAFT:
        return Dimension(p, f"{name}.pos", "draft-fraction", 0, int(p.high - p.low), 1)
    if p.value_kind == "float" or (p.step is not None and not float(p.step).is_integer()):
        step = float(p.step or 1)
        return Dimension(p, f"{name}.k", "scaled", round(p.low / step), round(p.high / step), 1)
    return Dimension(p, name, "int", int(p.low), int(p.high), int(p.step or 1))


def _draft_from_fraction(d: Dimension, position: int, steps: int, topk: int) -> int:
    """Map a position in 0..(max−min) onto [min, cap] where cap is the largest draft the tree can verify."""
    low, high = int(d.param.low or 2), int(d.param.high or 2)
    cap = min(high, rules.max_draft_tokens(steps, topk))
    low = min(low, cap)
    if d.high == 0:
        return low
    return low + round(position * (cap - low) / d.high)


def _decimals(step: float) -> int:
    text = repr(step)
    return len(text.split(".")[1]) if "." in text and "e" not in text else 6
