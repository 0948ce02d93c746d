"""How close each sampler gets to the true optimum after 10, 20 and 40 trials, on the simulator's profiles.

Every study runs through the real ``TrialRunner`` (baseline first, duplicates reused, failed starts recorded as
constraints, the C=64 skip) with the simulator's ground truth plus seeded measurement noise in place of a server,
so a 40-trial study takes seconds. The true optimum is the best ground-truth score over every distinct valid
configuration of the space. "best-found" is the ground truth of the trial the study itself ranks best (what a
user would deploy), divided by that optimum.

    .venv/bin/python bench/sample_efficiency.py --seeds 20            # prints a markdown table

By default it runs six landscapes: the simulator on the seed space and on the Llama space, and the four
landscapes of bench/landscapes/ (their own physics) on the seed space — ``spread_roofline`` was written after the
search was tuned on the other five, to check it. Medians come with bootstrap 90 %
intervals over seeds (``scipy.stats.bootstrap``, percentile method).

Any other landscape plugs in with ``--landscape MODULE:FACTORY`` (docs/benchmarks.md: the ``Landscape`` protocol
and ``evaluate_search``, tuner/engine/landscape.py):

    .venv/bin/python bench/sample_efficiency.py --landscape my_model.py:landscape --studies my-study.toml

Samplers: the default (``auto``: the grey-box sampler, ``greybox``), TPE, GP (each after the baseline and the
designed start, as ``spectune tune`` runs them), plain random search (the baseline, then random points), and a
one-flag-at-a-time sweep like the seed campaign (start from the baseline, sweep one flag with the others fixed,
keep the best, next flag, repeat).

After the table it prints how many times fewer trials the first sampler (the default) needs to reach 0.98 than
random search and the sweep; ``--long-budget 150`` gives those two a longer budget, so that the ratio is a
figure rather than "neither got there". ``--gpu-hours`` adds the simulated GPU-hours to reach 0.98 per
landscape and method, and the sweep costed as the seed campaign worked (bench/gpu_hours.py):

    .venv/bin/python bench/sample_efficiency.py --seeds 8 --budget 20 --long-budget 150 \
        --samplers auto,tpe,random,sweep --gpu-hours
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.util
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Before NumPy loads: OpenBLAS threads on tiny matrices make the grey-box sampler's GP fits 50× slower on a
# busy machine (a study is one process here; several run in a bench).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
import optuna
from scipy.stats import bootstrap

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.gpu_hours import HoursRow, Run, hours_table, landscape_hours, ratio_table, trials_text
from tuner.engine.landscape import Landscape, MeasuredLandscape, evaluate_search, simulator_landscape
from tuner.engine.record import TrialRecord, measured_records
from tuner.engine.trial import TrialRunner
from tuner.study.file import load_study_file
from tuner.study.space import SearchSpace
from tuner.study.spec import StudySpec

REPO = Path(__file__).resolve().parent.parent
CHECKPOINTS = (10, 20, 40)
TARGET_RATIO = 0.98
#: study[@MODULE:FACTORY] per landscape; without a factory, the simulator's ground truth.
DEFAULT_CASES = ("bench/studies/qwen-seed-space.toml", "bench/studies/llama-8b-h100.toml",
                 *(f"bench/studies/qwen-seed-space.toml@bench/landscapes/{name}.py:landscape"
                   for name in ("memory_tight", "deep_tree", "ridge", "spread_roofline")))
CACHE = REPO / ".spectune" / "bench-truth"


def run_optuna(spec: StudySpec, landscape: Landscape, sampler_name: str, seed: int, budget: int,
               truth: dict[str, float]) -> tuple[list[float], list[TrialRecord]]:
    """Ratio (truth of the study's own best ÷ optimum) after each measured trial, and the measured trials."""
    # The product's own loop (tuner/engine/loop.py, through the public evaluate_search): duplicates are free, a
    # repeat is followed by a neighbour, and a study whose proposals stay free for too long ends "exhausted" —
    # as `spectune tune` would.
    # Random search is the reference a user would run by hand: the baseline, then random points — without the
    # product's designed start, which is part of what is being measured against it.
    result = evaluate_search(spec, landscape, n_trials=budget, seed=seed, sampler=sampler_name,  # type: ignore[arg-type]
                             designed_start=sampler_name != "random")
    optimum = max(truth.values())
    ratios = []
    for k in range(1, result.measured + 1):
        best = result.best_after(k)
        ratios.append(truth.get(best.config.key() if best.config else "", 0.0) / optimum if best else 0.0)
    return _padded(ratios, budget), measured_records(result.study)


def _padded(ratios: list[float], budget: int) -> list[float]:
    return ratios + [ratios[-1]] * (budget - len(ratios)) if ratios else [0.0] * budget


def run_sweep(spec: StudySpec, space: SearchSpace, landscape: Landscape, seed: int, budget: int,
              truth: dict[str, float]) -> tuple[list[float], list[TrialRecord]]:
    """The seed campaign's method: one flag at a time from the baseline, the others held at the incumbent."""
    measurer = landscape.measurer(seed)
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
        t = TrialRecord.from_trial(study.trials[-1])
        score = t.values[0] if t.values else float("-inf")
        if t.is_measured:
            if t.feasible and score > best_score:
                best_key, best_score = t.config.key() if t.config else "", score
            ratios.append(truth.get(best_key, 0.0) / optimum)
        return score if t.feasible else float("-inf")

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
    return _padded(ratios, budget), measured_records(study)


def load_landscape_factory(text: str) -> Callable[[StudySpec], Any]:
    """``MODULE:FACTORY``: MODULE importable (``pkg.mod``) or a file path (``path/to/mod.py``)."""
    module_name, sep, factory_name = text.rpartition(":")
    if not sep or not module_name or not factory_name:
        raise SystemExit(f"--landscape: expected MODULE:FACTORY, not {text!r}")
    if module_name.endswith(".py") or "/" in module_name:
        path = Path(module_name).resolve()
        if not path.is_file():
            raise SystemExit(f"--landscape: no file {path}")
        module_spec = importlib.util.spec_from_file_location(path.stem, path)
        assert module_spec is not None and module_spec.loader is not None
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(module_name)
    factory = getattr(module, factory_name, None)
    if not callable(factory):
        raise SystemExit(f"--landscape: {module_name} has no callable {factory_name!r}")
    return factory


def make_landscape(spec: StudySpec, factory: Callable[[StudySpec], Any] | None, noise: float) -> Landscape:
    """The factory's landscape for this study (a bare Measurer is its own truth), or the simulator's."""
    if factory is None:
        return simulator_landscape(spec, noise=noise)
    made = factory(spec)
    if callable(getattr(made, "measurer", None)) and callable(getattr(made, "true_score", None)):
        return made
    return MeasuredLandscape(spec, lambda _seed: made, truth=made)


def true_score_table(space: SearchSpace, landscape: Landscape) -> dict[str, float]:
    """Config key → true score over the distinct valid configurations of ``space`` that can be the answer."""
    known = getattr(landscape, "true_scores", None)
    if callable(known):
        return known()
    scores: dict[str, float] = {}
    for params in space.points():
        config = space.decode(params).config
        if config is not None and config.key() not in scores:
            score = landscape.true_score(config)
            if score is not None:
                scores[config.key()] = score
    return scores


def cached_truth(space: SearchSpace, landscape: Landscape, study_path: str, factory_text: str | None,
                 noise: float) -> dict[str, float]:
    """``true_score_table``, kept on disk per (study file, landscape module source): a held-out landscape's truth
    measures all ~90,000 configurations, ~45 s each run on a shared CPU."""
    sources = [(REPO / study_path).read_bytes()]
    if factory_text:
        module = factory_text.rpartition(":")[0]
        path = Path(module) if module.endswith(".py") else None
        sources += [path.read_bytes() if path and path.is_file() else module.encode(),
                    factory_text.encode(), (path.parent / "_base.py").read_bytes()
                    if path and (path.parent / "_base.py").is_file() else b""]
    else:
        sources.append(f"simulator:{noise}".encode())
    digest = hashlib.sha256(b"\0".join(sources)).hexdigest()[:16]
    cache = CACHE / f"{digest}.json"
    if cache.is_file():
        return {str(k): float(v) for k, v in json.loads(cache.read_text()).items()}
    truth = true_score_table(space, landscape)
    CACHE.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(truth))
    return truth


def median_interval(values: list[float], seed: int = 0) -> tuple[float, float, float]:
    """Median and its bootstrap 90 % interval (percentile method: robust for the ties a median of ratios has)."""
    data = np.asarray(values, dtype=float)
    if len(data) < 2 or np.all(data == data[0]):
        return float(np.median(data)), float(data[0]), float(data[0])
    res = bootstrap((data,), np.median, confidence_level=0.9, method="percentile", n_resamples=2000,
                    random_state=np.random.default_rng(seed))
    return float(np.median(data)), float(res.confidence_interval.low), float(res.confidence_interval.high)


def trials_to_reach(ratios: list[float], target: float) -> int | None:
    return next((i + 1 for i, r in enumerate(ratios) if r >= target), None)


def cases_from(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    """(study file, landscape factory or None) per landscape: ``--studies``/``--landscape`` as before, else
    ``--cases``."""
    if args.studies or args.landscape:
        studies = (args.studies or "studies/simulated.toml,bench/studies/llama-8b-h100.toml").split(",")
        return [(study, args.landscape) for study in studies]
    out = []
    for case in args.cases.split(","):
        study, _, factory = case.partition("@")
        out.append((study, factory or None))
    return out


def fmt(cell: tuple[float, float, float], digits: int = 3) -> str:
    median, low, high = cell
    return f"{median:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--budget", type=int, default=40)
    parser.add_argument("--noise", type=float, default=0.02, help="relative measurement noise (σ)")
    parser.add_argument("--samplers", default="auto,tpe,gp,random,sweep")
    parser.add_argument("--cases", default=",".join(DEFAULT_CASES),
                        help="comma-separated STUDY[@MODULE:FACTORY], one per landscape")
    parser.add_argument("--studies", help="study files, all on --landscape (or the simulator)")
    parser.add_argument("--landscape", metavar="MODULE:FACTORY",
                        help="an external landscape: FACTORY(study_spec) returns a Landscape or a Measurer "
                             "(docs/benchmarks.md); default: the simulator's ground truth (+ --noise)")
    parser.add_argument("--long-budget", type=int, metavar="N",
                        help="budget of random and sweep only (e.g. 150: long enough to reach 0.98 or not)")
    parser.add_argument("--gpu-hours", action="store_true",
                        help="also print the simulated GPU-hours to reach 0.98 and the seed's manual method "
                             "(bench/gpu_hours.py)")
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    rows = []
    hours: list[HoursRow] = []
    for study_path, factory_text in cases_from(args):
        factory = load_landscape_factory(factory_text) if factory_text else None
        spec = load_study_file(REPO / study_path)
        space = SearchSpace(spec, spec.option_table)
        landscape = make_landscape(spec, factory, args.noise)
        name = (Path(study_path).stem if args.studies or args.landscape
                else Path(factory_text.rpartition(":")[0]).stem if factory_text else f"{Path(study_path).stem} (sim)")
        t0 = time.perf_counter()
        truth = cached_truth(space, landscape, study_path, factory_text, args.noise)
        if not truth:
            raise SystemExit(f"{study_path}: no configuration of the space can be the answer on this landscape")
        print(f"# {name}: {len(truth)} feasible distinct configurations, optimum score "
              f"{max(truth.values()):.3f} (ground truth in {time.perf_counter() - t0:.1f} s)", file=sys.stderr)
        runs_here: dict[str, tuple[int, list[Run]]] = {}
        for sampler in args.samplers.split(","):
            t0 = time.perf_counter()
            budget = args.long_budget if args.long_budget and sampler in ("random", "sweep") else args.budget
            runs = [run_sweep(spec, space, landscape, seed, budget, truth) if sampler == "sweep"
                    else run_optuna(spec, landscape, sampler, seed, budget, truth) for seed in range(args.seeds)]
            curves = [ratios for ratios, _ in runs]
            cells = {k: median_interval([c[k - 1] for c in curves]) for k in CHECKPOINTS if k <= budget}
            reach = [trials_to_reach(c, TARGET_RATIO) for c in curves]
            # Seeds that never got there count as "after the budget"; the median says so when they are most.
            reach_cell = median_interval([float(r if r is not None else budget + 1) for r in reach])
            n_reached = sum(r is not None for r in reach)
            rows.append((name, sampler, cells, reach_cell, n_reached, len(curves), time.perf_counter() - t0, budget))
            runs_here[sampler] = (budget, runs)
            print(f"  {sampler}: " + " ".join(f"@{k} {fmt(v)}" for k, v in cells.items())
                  + f" reach≥{TARGET_RATIO}: {fmt(reach_cell, 0)} ({n_reached}/{len(curves)})", file=sys.stderr)
        if args.gpu_hours:
            hours += landscape_hours(name, spec, runs_here, TARGET_RATIO)
    print(f"| landscape | sampler | {' | '.join(f'@{k} [90 % CI]' for k in CHECKPOINTS)} "
          f"| trials to ≥{TARGET_RATIO} [90 % CI] | seeds reaching it | wall s |")
    print("|---|---|" + "---|" * (len(CHECKPOINTS) + 3))
    for name, sampler, cells, reach_cell, n_reached, n, wall, budget in rows:
        text = " | ".join(fmt(cells[k]) if k in cells else "–" for k in CHECKPOINTS)
        print(f"| {name} | {sampler} | {text} | {trials_text(reach_cell, budget)} | {n_reached}/{n} | {wall:.0f} |")
    ratios = ratio_table({(r[0], r[1]): (r[3], r[7]) for r in rows}, rows[0][1] if rows else "", TARGET_RATIO)
    if ratios:
        print("\n" + "\n".join(ratios))
    if args.gpu_hours:
        print("\n" + "\n".join(hours_table(hours, median_interval)))


if __name__ == "__main__":
    main()
