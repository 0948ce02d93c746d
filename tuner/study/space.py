"""The search space: Optuna parameters in, one valid SGLang server configuration (or a reason) out.

Encoding follows what Optuna's samplers model well on a small, expensive, mostly discrete space
(reference/optuna-5.0-notes.md §3): every dimension has a fixed range, so GP and multivariate TPE
see all of them on every trial; numeric ladders become an index; float ranges become an integer
count of steps (never ``suggest_float``, which proposes 0.7999999999999999); draft tokens become a
position inside the range the draft tree allows, so no proposal is ever an over-large tree.

SGLang's rules (tuner.sglang.rules) are applied after decoding, to the arguments of the command line
that would be deployed: an invalid point is repaired when SGLang itself would
adjust it (topk=1 ⇒ draft = steps+1, the 48-request cap), and rejected with SGLang's message
otherwise. A rejected point is never deployed. An accepted one carries the *effective* values SGLang
will run (auto-chosen tree, forced page size, backend, graphs off, running-request cap), and its key
— what spots a configuration already measured — is of those values, so two spellings of one server
are one configuration.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Mapping
from functools import cache
from typing import Any

import numpy as np
from optuna.distributions import BaseDistribution

from tuner.sglang import rules
from tuner.sglang.launch import FlagValue, ServerConfig
from tuner.sglang.options import OptionTable
from tuner.sglang.parse import parse_server_args
from tuner.study import branches
from tuner.study.branches import Branch, BranchKind
from tuner.study.dimensions import Dimension, dimension_of, draft_from_fraction, fraction_for_draft
from tuner.study.proposal import (
    ALGORITHM,
    DRAFT,
    MAX_RUNNING,
    STEPS,
    TOPK,
    Located,
    Proposal,
    SpaceSummary,
    effective_key,
)
from tuner.study.spec import SPECULATION_OFF, StudySpec

MODEL_PATH = "--model-path"


class SearchSpace:
    """Built from a validated study; stateless apart from that."""

    def __init__(self, spec: StudySpec, table: OptionTable, *, loading: bool = True) -> None:
        self.spec = spec
        self.table = table
        #: Whether spectune's rules also judge what SGLang refuses while loading
        #: (tuner/sglang/loading.py); off where the target's own SGLang is asked, so its own table
        #: judges and its refusal is labelled as its own.
        self.loading = loading
        self.dimensions: tuple[Dimension, ...] = tuple(dimension_of(p) for p in spec.search)
        self._by_name = {d.name: d for d in self.dimensions}
        #: ``speculative-algorithm`` tuned among choices: each choice a branch with its own
        #: parameters (tuner/study/branches.py); None for a space without branches.
        self.algorithm = next(
            (d for d in self.dimensions if d.flag == ALGORITHM and d.encoding == "categorical"),
            None)
        # What every point asks of its branch, worked out once here rather than per decode (a
        # feasibility check decodes up to 10⁵ points).
        self._branching = branches.branch_table(self.algorithm, self.dimensions,
                                                spec.server_flags.get(ALGORITHM), spec.server_flags)
        self.branches: tuple[Branch, ...] = self._branching.branches

    # ----- branches -------------------------------------------------------------------------------
    def branch(self, params: Mapping[str, Any]) -> Branch | None:
        """The branch a point is on (None: a space without branches, and not a reference trial)."""
        reference = self._branching.references.get(str(params.get(branches.REFERENCE)))
        if reference is not None:
            return reference
        if self.algorithm is None:
            return None
        return self._branch_named(params[self.algorithm.name])

    def _branch_named(self, choice: object) -> Branch:
        """The branch of one ``speculative-algorithm`` choice (``KeyError``: not a choice)."""
        branch = self._branching.by_choice.get(str(choice))
        if branch is None:
            raise KeyError(f"{choice!r} is not a choice of {ALGORITHM.removeprefix('--')}")
        return branch

    def reference_algorithm(self) -> str | None:
        """The EAGLE-family algorithm SGLang's adaptive steps would run for this study (fixed, or
        the first such choice), or None: the study has no EAGLE-family draft, and no reference
        trials."""
        return self._branching.reference_algorithm

    def active(self, branch: Branch | None) -> tuple[Dimension, ...]:
        """The dimensions proposed on ``branch`` (all of them without branches), the algorithm
        first."""
        return self.dimensions if branch is None else self._branching.dims_on[branch]

    def covers(self, params: Mapping[str, Any]) -> bool:
        """Whether ``params`` give every dimension of their branch (of the space, without
        branches)."""
        if self.algorithm is not None and self.algorithm.name not in params:
            return False
        return set(params) == {d.name for d in self.active(self.branch(params))}

    def locate(self, params: Mapping[str, Any]) -> Located:
        """Where the point ``params`` stands, and the dimensions of every branch it could be
        carried to (SGLang's own choices among them), with the point decoded where it covers its
        branch: all a designed start asks of the space."""
        covers = self.covers(params)
        named = self.algorithm is not None and self.algorithm.name in params
        branch = self.branch(params) if named else None
        return Located(
            dict(params), covers, branch, self.active(branch) if covers else self.dimensions,
            {b: self.active(b) for b in self.branches},
            {kind: self.active(b) for kind, b in self._branching.references.items()},
            self.reference_algorithm(), self.decode(params) if covers else None)

    def branch_sizes(self) -> dict[str, int]:
        return {b.choice: math.prod(d.size() for d in self.active(b)[1:]) for b in self.branches}

    # ----- Optuna side ----------------------------------------------------------------------------
    def distributions(self) -> dict[str, BaseDistribution]:
        return {d.name: d.distribution() for d in self.dimensions}

    def suggest(self, trial: Any) -> Proposal:
        """Ask ``trial`` (an ``optuna.Trial``) for every dimension, always all of them (GP needs
        that) — with branches, the algorithm first and then the dimensions of its branch only
        (define-by-run)."""
        params: dict[str, Any] = {}
        if (getattr(trial, "user_attrs", None) or {}).get(branches.OUTSIDE):
            # A reference trial (queued with its kind fixed): recorded as a parameter so a retry
            # runs it again.
            params[branches.REFERENCE] = trial.suggest_categorical(branches.REFERENCE,
                                                                   list(branches.REFERENCE_KINDS))
        if self.algorithm is not None:
            params[self.algorithm.name] = trial.suggest_categorical(self.algorithm.name,
                                                                    list(self.algorithm.choices))
        for d in (d for d in self.active(self.branch(params)) if d.name not in params):
            if d.encoding == "categorical":
                params[d.name] = trial.suggest_categorical(d.name, list(d.choices))
            else:
                params[d.name] = trial.suggest_int(d.name, d.low, d.high, step=d.step)
        return self.decode(params)

    def encode(self, values: Mapping[str, FlagValue]) -> dict[str, Any]:
        """Parameters for known flag values (e.g. the baseline); flags not given, and flags of other
        branches than the values' own, are left out."""
        dims = self.dimensions
        if self.algorithm is not None and ALGORITHM in values:
            dims = self.active(self._branch_named(values[ALGORITHM]))
        params = {d.name: d.encode(values[d.flag]) for d in dims if d.flag in values}
        # A draft-token count is a position in the range its tree allows: found under that tree, so
        # that a given value (the baseline's) decodes back to itself rather than to its proportional
        # neighbour.
        steps = values.get(STEPS, self.spec.server_flags.get(STEPS))
        topk = values.get(TOPK, self.spec.server_flags.get(TOPK))
        if self.algorithm is not None and ALGORITHM in values and \
                self._branch_named(values[ALGORITHM]).kind is not BranchKind.STATIC:
            return params  # NGRAM's draft tokens are its own, not a tree's
        for d in dims:
            if (d.encoding == "draft-fraction" and d.flag in values and isinstance(steps, int)
                    and isinstance(topk, int)):
                # a count the tree cannot verify: its cap, so that the change said of it is the
                # rule's, not a proportional neighbour's
                params[d.name] = fraction_for_draft(
                    d, int(values[d.flag]), steps, topk)  # type: ignore[arg-type]
        return params

    # ----- decoding -------------------------------------------------------------------------------
    def decode(self, params: Mapping[str, Any]) -> Proposal:
        values: dict[str, FlagValue] = {}
        fraction: Dimension | None = None
        if self.algorithm is not None and self.algorithm.name not in params:
            raise KeyError(f"missing parameter {self.algorithm.name}")
        branch = self.branch(params)
        for d in self.active(branch):
            if d.name not in params:
                raise KeyError(f"missing parameter {d.name}")
            if d.encoding == "draft-fraction":
                fraction = d
                continue
            values[d.flag] = d.decode(params[d.name])

        flags: dict[str, FlagValue] = {**self.spec.server_flags, **values}
        repairs: list[str] = []
        if branch is not None:
            applicable = self._branching.flags_on[branch]
            flags = {k: v for k, v in flags.items() if k in applicable}
            if branch.kind is BranchKind.ADAPTIVE:
                flags[ALGORITHM] = str(branch.algorithm)
                flags[branches.ADAPTIVE] = True
            elif branch.kind is BranchKind.NGRAM and fraction is not None:
                # NGRAM verifies this many tokens in its own tree: the range as written, no EAGLE
                # tree cap.
                flags[DRAFT] = int(fraction.param.low or 2) + int(params[fraction.name])
                values[DRAFT] = flags[DRAFT]
                fraction = None
        speculation = flags.get(ALGORITHM)
        if speculation == SPECULATION_OFF or speculation is None:
            # "off" drops every speculative flag, fixed ones included (the draft model path, ...).
            flags = {k: v for k, v in flags.items() if not k.startswith("--speculative-")}
        else:
            self._resolve_tree(flags, values, fraction, params, repairs)
            self._ensure_running_requests(flags, repairs)

        config = ServerConfig.build(flags, self.spec.server_env)
        # say which of SGLang's own choices it runs
        if branch is not None and branches.REFERENCE in params:
            values = {ALGORITHM: branch.choice,
                      **{k: v for k, v in values.items() if k != ALGORITHM}}
        verdict = self.judge(config)
        if isinstance(verdict, str):
            return Proposal(dict(params), values, None, tuple(repairs), reason=verdict)
        return Proposal(dict(params), values, config, tuple(repairs), effective=verdict,
                        key=effective_key(config, verdict))

    def decode_all(self, points: Iterable[Mapping[str, Any]]) -> list[Proposal]:
        """``decode`` of each point, in order: a caller that judges a set of points (a designed
        start, the references) asks once."""
        return [self.decode(params) for params in points]

    def baseline(self) -> Proposal:
        """The study's ``[baseline]`` as a trial deploys it: through the space and back, so that the
        same repairs apply (a running-request cap of C, a draft count the tree caps). Raises
        ``KeyError``/``ValueError`` where a value lies outside the space, as ``encode`` does."""
        return self.decode(self.encode(self.spec.baseline))

    def first_proposal(self, values: Mapping[str, FlagValue]) -> Proposal:
        """What a study deploys first: the configuration ``values`` (its baseline) when they cover
        the space and are valid, else the first valid point."""
        encoded = self.encode(values) if values else {}
        if encoded and self.covers(encoded):
            proposal = self.decode(encoded)
            if proposal.config is not None:
                return proposal
        return next(p for p in map(self.decode, self.points()) if p.config is not None)

    def judge(self, config: ServerConfig) -> dict[str, Any] | str:
        """SGLang's verdict on the command line ``config`` deploys: the effective values, or why it
        is refused (SGLang's own error line).

        The arguments are SGLang's parser defaults overlaid with the config's flags (study-file
        values are already typed and checked against the option table), as parsing the rendered
        command line would give them — without running argparse for each of 10⁵ points."""
        args = dict(_parser_defaults())
        for name, value in config.flags:
            args[self.table.lookup(name).dest] = value
        verdict = rules.judge(args, self.spec.hardware, loading=self.loading)
        if verdict.refused is not None:
            return verdict.refused.message
        assert verdict.effective is not None
        return verdict.effective

    def _resolve_tree(self, flags: dict[str, FlagValue], values: dict[str, FlagValue],
                      fraction: Dimension | None, params: Mapping[str, Any],
                      repairs: list[str]) -> None:
        """Make steps/topk/draft tokens a complete, consistent triple (all three or none)."""
        steps = flags.get(STEPS)
        if steps is None:
            return  # the study file check guarantees topk/draft are absent too
        topk = flags.get(TOPK)
        if topk is None:
            flags[TOPK] = topk = 1
            repairs.append(
                "--speculative-eagle-topk 1 (set explicitly: SGLang wants all three or none)")
        assert isinstance(steps, int) and isinstance(topk, int)
        if topk == 1:
            if flags.get(DRAFT) not in (None, steps + 1) and fraction is None:
                repairs.append(f"--speculative-num-draft-tokens {steps + 1} (SGLang forces steps+1 "
                               "when topk=1)")
            flags[DRAFT] = steps + 1
        elif fraction is not None:
            flags[DRAFT] = draft_from_fraction(fraction, params[fraction.name], steps, topk)
        if fraction is not None:
            values[fraction.flag] = flags[DRAFT]

    def _ensure_running_requests(self, flags: dict[str, FlagValue], repairs: list[str]) -> None:
        needed = self.spec.max_concurrency
        if MAX_RUNNING not in flags and needed > rules.SPECULATIVE_MAX_RUNNING_REQUESTS:
            flags[MAX_RUNNING] = needed
            repairs.append(f"--max-running-requests {needed} (SGLang caps running requests at "
                           f"{rules.SPECULATIVE_MAX_RUNNING_REQUESTS} under speculation; "
                           f"C={needed} would queue)")

    def emittable_flags(self) -> tuple[list[str], list[str]]:
        """Every option string a launch command of this space can contain (for the target's
        preflight), including the ``--no-x`` spelling of switches that can be false, in two
        lists: what the space itself proposes, and what only the references add — the flag SGLang's
        adaptive steps are measured with beside the tuning (``[study] compare``), which a release
        without it simply cannot be compared with."""
        names = set(self.spec.server_flags) | {d.flag for d in self.dimensions}
        if ALGORITHM in names:
            names |= {STEPS, TOPK, DRAFT, MAX_RUNNING}
        if any(b.kind is BranchKind.ADAPTIVE for b in self.branches):
            names.add(branches.ADAPTIVE)
        extra = {branches.ADAPTIVE} - names if self.reference_algorithm() is not None else set()
        own = self._options(names)
        return own, sorted(set(self._options(extra)) - set(own))

    def _options(self, names: set[str]) -> list[str]:
        options: set[str] = set()
        for name in names:
            spec = self.table.lookup(name)
            options.add(spec.name)
            if spec.negation is not None:
                options.add(spec.negation)
        return sorted(options)

    # ----- size and enumeration -------------------------------------------------------------------
    def raw_size(self) -> int:
        if self.branches:
            return sum(self.branch_sizes().values())
        return math.prod(d.size() for d in self.dimensions) if self.dimensions else 1

    def points(self) -> Iterator[dict[str, Any]]:
        if self.algorithm is not None:
            for branch in self.branches:
                dims = self.active(branch)[1:]
                for combo in itertools.product(*(d.encoded_values() for d in dims)):
                    yield {self.algorithm.name: branch.choice,
                           **dict(zip([d.name for d in dims], combo, strict=True))}
            return
        names = [d.name for d in self.dimensions]
        for combo in itertools.product(*(d.encoded_values() for d in self.dimensions)):
            yield dict(zip(names, combo, strict=True))

    def distinct_valid(self, limit: int, seed: int = 0
                       ) -> Iterator[tuple[dict[str, Any], Proposal]]:
        """Each distinct valid configuration (by ``Proposal.identity``) with the first point that
        decodes to it: of every point up to ``limit`` raw points, of ``limit`` random ones
        (``seed``) in a larger space."""
        seen: set[str] = set()
        points = self.points() if self.raw_size() <= limit else self.sample_points(limit, seed)
        for params in points:
            proposal = self.decode(params)
            key = proposal.identity
            if key is not None and key not in seen:
                seen.add(key)
                yield params, proposal

    def sample_points(self, n: int, seed: int = 0) -> Iterator[dict[str, Any]]:
        if self.algorithm is not None:
            yield from self._sample_branches(n, seed)
            return
        rng = np.random.default_rng(seed)
        values = [(d.name, d.encoded_values()) for d in self.dimensions]
        # One draw of all indices at once: per-point draws dominated the time of a large space's
        # sample.
        indices = rng.integers(0, [len(v) for _, v in values] or [1], size=(n, max(len(values), 1)))
        for row in range(n):
            yield {name: vals[int(indices[row, i])] for i, (name, vals) in enumerate(values)}

    def _sample_branches(self, n: int, seed: int) -> Iterator[dict[str, Any]]:
        """Random points of a space with branches: a branch with probability ∝ its size, then its
        values."""
        assert self.algorithm is not None
        rng = np.random.default_rng(seed)
        sizes = self.branch_sizes()
        weights = np.array([sizes[b.choice] for b in self.branches], dtype=float)
        picks = rng.choice(len(self.branches), size=n, p=weights / weights.sum())
        for pick in picks:
            branch = self.branches[int(pick)]
            point: dict[str, Any] = {self.algorithm.name: branch.choice}
            for d in self.active(branch)[1:]:
                vals = d.encoded_values()
                point[d.name] = vals[int(rng.integers(0, len(vals)))]
            yield point

    def enumerate(self, limit: int = 100_000, *, until_valid: bool = False) -> SpaceSummary:
        """Decode every point (or ``limit`` random ones if the space is larger) and count the
        outcomes.

        ``until_valid`` stops at the first valid point: all a feasibility check needs, and on a
        large space (tens of thousands of points, every command loading the study runs the check)
        the difference between milliseconds and half a minute."""
        total = self.raw_size()
        summary = SpaceSummary(total_points=total)
        points = self.points() if total <= limit else self.sample_points(limit)
        for params in points:
            summary.examined += 1
            proposal = self.decode(params)
            if proposal.identity is None:
                summary.rejections[proposal.reason or "rejected"] += 1
            else:
                summary.valid += 1
                summary.distinct.add(proposal.identity)
                if until_valid:
                    break
        return summary


@cache
def _parser_defaults() -> dict[str, Any]:
    return parse_server_args([MODEL_PATH, "model"], exit_on_error=False)

