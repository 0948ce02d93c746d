"""Checks on a study file as a whole, across its sections: SGLang's all-three-or-none rule for the
draft tree (fixed or tuned), and whether the search space holds a valid configuration and the
baseline is deployed as written. They run on sections that were read without a problem, so one
mistake is not reported again as its consequences (tuner/study/load.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tuner.sglang import rules
from tuner.sglang.launch import FlagValue
from tuner.sglang.options import OptionTable
from tuner.study import branches
from tuner.study.problems import Problems
from tuner.study.spec import ParamSpec, StudySpec


def speculative_completeness(problems: Problems, flags: dict[str, FlagValue],
                              search: tuple[ParamSpec, ...]) -> None:
    """SGLang's all-three-or-none rule, checked on the study as a whole (fixed or tuned) — not
    with a speculative flag refused already: what follows from its absence would only repeat it."""
    if any(problems.about(section, mentioning="speculative")
           for section in ("search.", "server.flags.")):
        return
    present = set(flags) | {p.flag for p in search}
    tree = ("--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens")
    if "--speculative-algorithm" not in present:
        stray = [f for f in present if f.startswith("--speculative-")]
        if stray:
            problems.add("server.flags",
                         f"{', '.join(sorted(stray))} set without --speculative-algorithm")
        return
    kinds = [branches.branch_of(a)
             for a in _possible_values(flags, search, "--speculative-algorithm")]
    if not any(b.kind is branches.BranchKind.STATIC
               and str(b.algorithm).upper() in branches.TREE_ALGORITHMS
               for b in kinds):
        return  # no branch with a draft tree (NGRAM's draft tokens are its own)
    if "--speculative-num-steps" not in present and any(f in present for f in tree[1:]):
        problems.add("search",
                     "--speculative-num-steps must be set (fixed or tuned) whenever topk or draft "
                     "tokens are: SGLang fails with a bare AssertionError otherwise")
    topk_values = _possible_values(flags, search, "--speculative-eagle-topk")
    if any(v != 1 for v in topk_values) and "--speculative-num-draft-tokens" not in present:
        problems.add("search", "--speculative-num-draft-tokens must be set (fixed or tuned) when "
                     "--speculative-eagle-topk can exceed 1")


def _possible_values(flags: dict[str, FlagValue], search: tuple[ParamSpec, ...],
                     flag: str) -> list[Any]:
    if flag in flags:
        return [flags[flag]]
    for p in search:
        if p.flag == flag:
            if p.choices is not None:
                return list(p.choices)
            return [p.low, p.high]
    return []


def baseline_changes(baseline: Mapping[str, FlagValue], deployed: Mapping[str, FlagValue]
                     ) -> list[tuple[str, FlagValue, FlagValue]]:
    """The ``[baseline]`` values the search space would deploy otherwise (flag, given, deployed)."""
    out = []
    for flag, given in baseline.items():
        value = deployed.get(flag)
        # left out by its branch (speculation "off" drops the tree): as the server runs it
        if value is None:
            continue
        same = (value == given if not isinstance(given, float) or not isinstance(value, int | float)
                else abs(float(value) - given) <= 1e-9 * max(1.0, abs(given)))
        if not same:
            out.append((flag, given, value))
    return out


def _why_changed(flag: str, given: FlagValue, deployed: Mapping[str, FlagValue]) -> str:
    """The rule behind a change of the draft tree, in words (else: the search space's range)."""
    steps, topk = deployed.get("--speculative-num-steps"), deployed.get("--speculative-eagle-topk")
    if flag == "--speculative-num-draft-tokens" and isinstance(steps, int) and isinstance(topk,
                                                                                          int):
        if topk == 1:
            return f"with eagle-topk 1 SGLang runs num-steps + 1 = {steps + 1} draft tokens"
        cap = rules.max_draft_tokens(steps, topk)
        rule = (f"a tree of num-steps {steps} and eagle-topk {topk} verifies at most topk + "
                f"(steps−1)·topk² + 1 = {cap} draft tokens (SGLang fails at runtime above it)")
        if isinstance(given, int) and given > cap:
            return rule
        return f"{rule}; the search range cannot express it"
    return "the search space's range and steps cannot express it"


def check_space_is_feasible(problems: Problems, spec: StudySpec, table: OptionTable) -> None:
    from tuner.study.space import SearchSpace

    space = SearchSpace(spec, table)
    summary = space.enumerate(limit=50_000, until_valid=True)
    every_rejection: set[str] = set()
    if summary.complete and summary.valid == 0:
        top = summary.top_rejections(3)
        every_rejection = {reason for reason, _ in top}
        reasons = "; ".join(f"{reason} ({n}×)" for reason, n in top)
        problems.add("search", f"no valid configuration in the search space: {reasons}")
    if spec.baseline:
        proposal = space.baseline()
        if proposal.rejected:
            # refused for the reason every configuration is: said once, above
            if proposal.reason not in every_rejection:
                problems.add("baseline",
                             f"the baseline configuration is invalid: {proposal.reason}")
        elif proposal.config is not None:
            for flag, given, deployed in baseline_changes(spec.baseline, proposal.config.flag_dict):
                problems.add("baseline", f"{flag.removeprefix('--')} = {given} would be deployed "
                                         f"as {deployed}: "
                                         f"{_why_changed(flag, given, proposal.config.flag_dict)}; "
                                         "write the value the server runs, so that the baseline is "
                                         "what it says")
