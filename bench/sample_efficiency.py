"""How close each sampler gets to the true optimum after 10, 20 and 40 trials, on the simulator's profiles.

Every study runs through the real ``TrialRunner`` (baseline first, duplicates reused, failed starts recorded as
constraints, the C=64 skip) with the simulator's ground truth plus seeded measurement noise in place of a server,
so a 40-trial study takes seconds. The true optimum is the best ground-truth score over every distinct valid
configuration of the space. "best-found" is the ground truth of the trial the study itself ranks best (what a
user would deploy), divided by that optimum.

    .venv/bin/python bench/sample_efficiency.py --seeds 20            # prints a markdown table

Samplers: the default (``auto``: GP when torch is installed, else TPE), TPE, GP, random search, and a
one-flag-at-a-time sweep like the seed campaign (start from the baseline, sweep one flag with the others fixed,
keep the best, next flag, repeat).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import optuna

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tuner.app.tune import best_trial, enqueue_baseline
from tuner.engine.landscape import OracleMeasurer, true_scores
from tuner.engine.loop import Limits, run_trials
from tuner.engine.samplers import make_sampler
from tuner.engine.trial import COUNTS, TrialRunner
from tuner.sglang.options import load_option_table
from tuner.simulator.profile import load_profile
from tuner.study.file import load_study_file
from tuner.study.space import SearchSpace
from tuner.study.spec import StudySpec

REPO = Path(__file__).resolve().parent.parent
CHECKPOINTS = (10, 20, 40)
TARGET_RATIO = 0.98


def run_optuna(spec: StudySpec, space: SearchSpace, profile: Any, table: Any, sampler_name: str, seed: int,
               budget: int, noise: float, truth: dict[str, float]) -> list[float]:
    """Ratio (truth of the study's own best ÷ optimum) after each measured trial."""
    settings = replace(spec.study, sampler=sampler_name, seed=seed)  # type: ignore[arg-type]
    spec = replace(spec, study=settings)
    study = optuna.create_study(direction="maximize", sampler=make_sampler(sampler_name, seed))
    enqueue_baseline(study, space, spec)
    runner = TrialRunner(spec, space, OracleMeasurer(profile, table, spec.benchmark, noise=noise, seed=seed))
    optimum = max(truth.values())
    ratios: list[float] = []
    started = time.monotonic()
    while len(ratios) < budget:
        # The product's own loop (tuner/engine/loop.py): duplicates are free, a repeat is followed by a neighbour, and
        # a study whose proposals stay free for too long ends "exhausted" — as `spectune tune` would.
        limits = Limits(n_trials=len(ratios) + 1, timeout_s=None, started=started)
        if run_trials(study, runner, limits, "sqlite:///:memory:") != "n_trials":
            break
        best = best_trial(study)
        ratios.append(truth.get(best.user_attrs["config_key"], 0.0) / optimum if best else 0.0)
    return ratios + [ratios[-1]] * (budget - len(ratios)) if ratios else [0.0] * budget


def run_sweep(spec: StudySpec, space: SearchSpace, profile: Any, table: Any, seed: int, budget: int,
              noise: float, truth: dict[str, float]) -> list[float]:
    """The seed campaign's method: one flag at a time from the baseline, the others held at the incumbent."""
    measurer = OracleMeasurer(profile, table, spec.benchmark, noise=noise, seed=seed)
    study = optuna.create_study(direction="maximize")  # only as a store for the runner's scorer
    runner = TrialRunner(spec, space, measurer, skip_phases=False)
    optimum = max(truth.values())
    current = space.encode(spec.baseline)
    seen: dict[str, float] = {}
    best_key, best_score = "", float("-inf")
    ratios: list[float] = []

    def evaluate(params: dict[str, Any]) -> float:
        nonlocal best_key, best_score
        study.enqueue_trial(params)  # the runner then measures exactly these parameters
        study.optimize(runner, n_trials=1)
        t = study.trials[-1]
        score = t.value if t.value is not None else float("-inf")
        feasible = all(v <= 0 for v in (t.constraints or {}).values())
        key = t.user_attrs.get("config_key", "")
        if t.user_attrs.get(COUNTS):
            if feasible and score > best_score:
                best_key, best_score = key, score
            ratios.append(truth.get(best_key, 0.0) / optimum)
        return score if feasible else float("-inf")

    while len(ratios) < budget:
        before = len(ratios)
        for dim in space.dimensions:
            scores = {}
            for value in dim.encoded_values():
                candidate = dict(current, **{dim.name: value})
                proposal = space.decode(candidate)
                if proposal.config is None:
                    continue
                key = proposal.config.key()
                if key not in seen:
                    seen[key] = evaluate(candidate)
                scores[value] = seen[key]
                if len(ratios) >= budget:
                    break
            if scores:
                current[dim.name] = max(scores, key=lambda v: scores[v])
            if len(ratios) >= budget:
                break
        if len(ratios) == before:
            break  # converged: every neighbour measured
    return ratios + [ratios[-1]] * (budget - len(ratios)) if ratios else [0.0] * budget


def trials_to_reach(ratios: list[float], target: float) -> int | None:
    return next((i + 1 for i, r in enumerate(ratios) if r >= target), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--budget", type=int, default=40)
    parser.add_argument("--noise", type=float, default=0.02, help="relative measurement noise (σ)")
    parser.add_argument("--samplers", default="auto,tpe,gp,random,sweep")
    parser.add_argument("--studies", default="studies/simulated.toml,bench/studies/llama-8b-h100.toml")
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    table = load_option_table()
    rows = []
    for study_path in args.studies.split(","):
        spec = load_study_file(REPO / study_path)
        profile = load_profile(spec.target.settings.profile)
        space = SearchSpace(spec, table)
        t0 = time.perf_counter()
        truth = true_scores(space, profile, table)
        print(f"# {study_path}: {len(truth)} feasible distinct configurations, optimum score "
              f"{max(truth.values()):.3f} (ground truth in {time.perf_counter() - t0:.1f} s)", file=sys.stderr)
        for sampler in args.samplers.split(","):
            t0 = time.perf_counter()
            curves = []
            for seed in range(args.seeds):
                if sampler == "sweep":
                    curves.append(run_sweep(spec, space, profile, table, seed, args.budget, args.noise, truth))
                else:
                    curves.append(run_optuna(spec, space, profile, table, sampler, seed, args.budget, args.noise,
                                             truth))
            medians = {k: statistics.median(c[k - 1] for c in curves) for k in CHECKPOINTS if k <= args.budget}
            reach = [trials_to_reach(c, TARGET_RATIO) for c in curves]
            reached = [r for r in reach if r is not None]
            # Seeds that never got there count as "after the budget"; the median says so when they are most.
            middle = statistics.median_low(r if r is not None else args.budget + 1 for r in reach)
            median_reach = middle if middle <= args.budget else None
            rows.append((Path(study_path).stem, sampler, medians, median_reach, len(reached), len(curves),
                         time.perf_counter() - t0))
            print(f"  {sampler}: {medians} reach≥{TARGET_RATIO}: {median_reach} ({len(reached)}/{len(curves)})",
                  file=sys.stderr)
    print(f"| study | sampler | {' | '.join(f'@{k}' for k in CHECKPOINTS)} | median trials to ≥{TARGET_RATIO} "
          "| seeds reaching it | wall s |")
    print("|---|---|" + "---|" * (len(CHECKPOINTS) + 3))
    for study, sampler, medians, reach, n_reached, n, wall in rows:
        cells = " | ".join(f"{medians[k]:.3f}" if k in medians else "–" for k in CHECKPOINTS)
        reach_text = f"{reach:g}" if reach is not None else f">{args.budget}"
        print(f"| {study} | {sampler} | {cells} | {reach_text} | {n_reached}/{n} | {wall:.0f} |")


if __name__ == "__main__":
    main()
