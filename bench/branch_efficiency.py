"""The default sampler on spaces with branches (the kind of speculation, tuner/study/branches.py):
how close it gets to the true optimum within 25 trials, and what share of its trials goes to a
dominated branch.

A branch is dominated when none of its configurations reaches 0.98 of the optimum (true scores over
every distinct valid configuration, as bench/sample_efficiency.py computes them). Every trial the
study measures counts — the baseline, the designed start and the branch starts included — since each
costs a server start.

    .venv/bin/python bench/branch_efficiency.py --seeds 5          # prints a markdown table

Cases: the simulator on the Llama-3.1-8B space (EAGLE3 static / EAGLE3-adaptive / NGRAM / off), on
the Qwen3.5-35B-A3B MTP space (NEXTN static / NEXTN-adaptive / EAGLE3 / NGRAM / off), and
bench/landscapes/ speculation_kinds.py (its own physics) on the Llama space, on a chat workload and
on a repetitive one (where NGRAM wins and the baseline's branch is the dominated one). ``--cases
study[@MODULE:FACTORY],...`` runs others.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from pathlib import Path

# as bench/sample_efficiency.py: tiny GP fits, one thread
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import optuna

from bench.sample_efficiency import (
    CACHE,
    TARGET_RATIO,
    make_landscape,
    median_interval,
    run_search,
    trials_to_reach,
    truth_of,
)
from tuner.evaluation.landscape_plugin import load_landscape
from tuner.study.load import load_study_file
from tuner.study.space import SearchSpace

DEFAULT_CASES = ("bench/studies/branches-llama.toml", "bench/studies/branches-mtp.toml",
                 "bench/studies/branches-llama.toml@bench/landscapes/speculation_kinds.py:landscape",
                 "bench/studies/branches-llama.toml@bench/landscapes/speculation_kinds.py:landscape_repetitive")
BUDGET = 25
DOMINATED_SHARE = 0.25


def main() -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--budget", type=int, default=BUDGET)
    parser.add_argument("--cases", default=",".join(DEFAULT_CASES))
    parser.add_argument("--sampler", default="auto")
    args = parser.parse_args()
    rows = []
    for case in args.cases.split(","):
        study_path, _, factory_text = case.partition("@")
        factory, module = load_landscape(factory_text) if factory_text else (None, None)
        landscape, spec = make_landscape(load_study_file(study_path), factory, 0.02)
        space = SearchSpace(spec, spec.option_table)
        truth = truth_of(space, landscape, module, CACHE)
        branch_of: dict[str, str] = {}
        for params in space.points():
            config = space.decode(params).config
            branch = space.branch(params)
            if config is not None and branch is not None:
                branch_of.setdefault(config.key(), branch.choice)
        optimum = max(truth.values())
        best = Counter[str]()
        for key, score in truth.items():
            choice = branch_of.get(key, "?")
            best[choice] = max(best[choice], score)
        dominated = {b for b, s in best.items() if s < TARGET_RATIO * optimum}
        winner = max(best, key=best.__getitem__)
        name = Path(study_path).stem + (
            f" @ {factory_text.rpartition('/')[2].replace('.py', '')}" if factory_text
            else " (sim)")
        print(f"# {name}: optimum {optimum:.3f} on {winner}; branch bests "
              + ", ".join(f"{b} {s / optimum:.3f}" for b, s in best.items())
              + f"; dominated: {sorted(dominated)}", file=sys.stderr)
        finals, reaches, shares = [], [], []
        spent: Counter[str] = Counter()
        for seed in range(args.seeds):
            ratios, records = run_search(spec, landscape, args.sampler, seed, args.budget, truth)
            finals.append(ratios[args.budget - 1])
            reaches.append(trials_to_reach(ratios, TARGET_RATIO))
            counts = Counter(branch_of.get(r.config.key(), "?") for r in records
                             if r.config is not None)
            spent.update(counts)
            shares.append(max((counts[b] / max(len(records), 1) for b in dominated), default=0.0))
            print(
                f"  seed {seed}: @{args.budget} {ratios[args.budget - 1]:.3f} reach {reaches[-1]} "
                f"trials per branch {dict(counts)}", file=sys.stderr)
        med = median_interval(finals)
        reached = sum(r is not None for r in reaches)
        total = sum(spent.values()) or 1
        rows.append((name, winner, med, min(finals), reached, len(finals), max(shares),
                     ", ".join(f"{b} {n / total:.0%}" for b, n in spent.most_common())))
    print(f"| landscape | optimum on | best-found @{args.budget} median [90 % CI] | worst seed | "
          f"seeds ≥ {TARGET_RATIO} by {args.budget} | max share on a dominated branch | trials per "
          "branch (all seeds) |")
    print("|---|---|---|---|---|---|---|")
    for name, winner, med, worst, reached, n, share, spread in rows:
        print(f"| {name} | {winner} | {med[0]:.3f} [{med[1]:.3f}, {med[2]:.3f}] | {worst:.3f} | "
              f"{reached}/{n} | {share:.0%} (limit {DOMINATED_SHARE:.0%}) | {spread} |")


if __name__ == "__main__":
    main()
