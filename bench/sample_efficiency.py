"""How close each sampler gets to the true optimum after 10, 20 and 40 trials, on the simulator's
profiles.

Every study runs through the real ``TrialRunner`` (baseline first, duplicates reused, failed starts
recorded as constraints, the C=64 skip) with the simulator's ground truth plus seeded measurement
noise in place of a server, so a 40-trial study takes seconds. The true optimum is the best
ground-truth score over every distinct valid configuration of the space. "best-found" is the ground
truth of the trial the study itself ranks best (what a user would deploy), divided by that optimum.

    .venv/bin/python bench/sample_efficiency.py --seeds 20            # prints a markdown table

By default it runs thirteen cases: the simulator on the seed space and on the Llama space, the
nine landscapes of bench/landscapes/ (their own physics) on the seed space — ``spread_roofline``
was written after the search was tuned on the other five, to check it; ``long_prompt_moe``,
``small_gains`` and ``prefill_bound`` in issue 27, ``beam_tree`` and ``expert_traffic`` after it —
``expert_traffic``'s second factory ``wide_close``, and ``long_prompt_moe`` on the Llama space too.
Medians come with bootstrap 90 % intervals over seeds (``scipy.stats.bootstrap``, percentile
method).

Any other landscape plugs in with ``--landscape MODULE:FACTORY`` (docs/benchmarks.md: the
``Landscape`` protocol and ``evaluate_search``, tuner/evaluation/landscape.py):

    .venv/bin/python bench/sample_efficiency.py --landscape my_model.py:landscape --studies
    my-study.toml

Samplers: the default (``auto``: the grey-box sampler, ``greybox``), TPE, GP (each after the
baseline and the designed start, as ``spectune tune`` runs them), plain random search (the baseline,
then random points), and a one-flag-at-a-time sweep like the seed campaign (start from the baseline,
sweep one flag with the others fixed, keep the best, next flag, repeat).

After the table it prints how many times fewer trials the first sampler (the default) needs to reach
0.98 than random search and the sweep; ``--long-budget 150`` gives those two a longer budget, so
that the ratio is a figure rather than "neither got there". ``--gpu-hours`` adds the simulated
GPU-hours to reach 0.98 per landscape and method, and the sweep costed as the seed campaign worked
(bench/gpu_hours.py):

    .venv/bin/python bench/sample_efficiency.py --seeds 8 --budget 20 --long-budget 150 \
        --samplers auto,tpe,random,sweep --gpu-hours
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

# Before NumPy loads: OpenBLAS threads on tiny matrices make the grey-box sampler's GP fits 50×
# slower on a busy machine (a study is one process here; several run in a bench).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
import optuna
from scipy.stats import bootstrap

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.gpu_hours import HoursRow, Run, hours_table, landscape_hours, ratio_table, trials_text
from tuner.core.errors import SpectuneError
from tuner.evaluation.landscape import (
    Landscape,
    MeasuredLandscape,
    evaluate_search,
    simulator_landscape,
)
from tuner.evaluation.landscape_plugin import (
    LandscapeError,
    cached_true_scores,
    landscape_fingerprint,
    load_landscape,
    study_of,
)
from tuner.evaluation.reference_search import (
    found_so_far,
    random_search,
    sweep_search,
    truth_table,
)
from tuner.store.record import TrialRecord, measured_records
from tuner.study.load import load_study_file
from tuner.study.space import SearchSpace
from tuner.study.spec import StudySpec

REPO = Path(__file__).resolve().parent.parent
CHECKPOINTS = (10, 20, 40)
TARGET_RATIO = 0.98
#: study[@MODULE:FACTORY] per landscape; without a factory, the simulator's ground truth.
DEFAULT_CASES = ("bench/studies/qwen-seed-space.toml", "bench/studies/llama-8b-h100.toml",
                 *(f"bench/studies/qwen-seed-space.toml@bench/landscapes/{name}.py:landscape"
                   for name in ("memory_tight", "deep_tree", "ridge", "spread_roofline",
                                "long_prompt_moe", "small_gains", "prefill_bound", "beam_tree",
                                "expert_traffic")),
                 "bench/studies/qwen-seed-space.toml@bench/landscapes/expert_traffic.py:wide_close",
                 "bench/studies/llama-8b-h100.toml@bench/landscapes/long_prompt_moe.py:landscape")
CACHE = REPO / ".spectune" / "bench-truth"
#: The space the landscapes of bench/landscapes/ are named alone on (others: "name (study)").
DEFAULT_SPACE = ("qwen-seed-space",)


def run_search(spec: StudySpec, landscape: Landscape, sampler_name: str, seed: int, budget: int,
               truth: dict[str, float]) -> tuple[list[float], list[TrialRecord]]:
    """Ratio (truth of the study's own best ÷ optimum) after each measured trial, and the measured
    trials.

    Through the public API (tuner/evaluation/reference_search.py): the product's own loop for the
    samplers (duplicates free, a repeat followed by a neighbour, "exhausted" as `spectune tune`
    ends), ``random_search`` (the baseline, then random points — without the designed start, which
    is part of what is measured against it) and ``sweep_search`` (the seed campaign's one flag at a
    time)."""
    if sampler_name == "sweep":
        result = sweep_search(spec, landscape, n_trials=budget, seed=seed)
    elif sampler_name == "random":
        result = random_search(spec, landscape, n_trials=budget, seed=seed)
    else:
        result = evaluate_search(spec, landscape, n_trials=budget, seed=seed,
                                 sampler=sampler_name)  # type: ignore[arg-type]
    return found_so_far(result, truth, budget), measured_records(result.study)


def make_landscape(spec: StudySpec | None, factory: Callable[..., Any] | None, noise: float
                   ) -> tuple[Landscape, StudySpec]:
    """The factory's landscape for this study (a bare Measurer is its own truth), or the
    simulator's; and the study as the landscape completes it (its own objective and baseline; its
    own study when none is given)."""
    if factory is None:
        assert spec is not None
        return simulator_landscape(spec, noise=noise), spec
    made = factory(spec) if spec is not None and _needs_study(factory) else factory()
    if spec is not None and isinstance(made, MeasuredLandscape) and made.spec.path != spec.path:
        # A landscape that carries its study, run on another one (--studies): its truth is of that
        # study.
        made = MeasuredLandscape(spec, made.make_measurer, truth=made.truth_measurer,
                                 objective=made.objective,
                                 baseline=made.baseline, version=made.version)
    if not (callable(getattr(made, "measurer", None))
            and callable(getattr(made, "true_score", None))):
        if spec is None:
            raise LandscapeError(
                "--landscape: a factory that returns a bare Measurer needs --studies")
        bare: Any = made  # bound now: the lambda must not see the landscape this line makes
        made = MeasuredLandscape(spec, lambda _seed: bare, truth=bare)
    return made, study_of(made, spec)


def truth_of(space: SearchSpace, landscape: Landscape, module: ModuleType | None,
             cache: Path = CACHE
             ) -> dict[str, float]:
    """``truth_table`` (a progress bar on stderr), kept on disk
    (tuner/evaluation/landscape_plugin.py ``cached_true_scores``): keyed by the study and by
    everything the landscape is made of (its declared version, else its modules' sources and its
    true scores at a few fixed points: two factories of one module differ); the
    simulator's by its sources and profile. A held-out landscape's truth measures ~90,000
    configurations."""
    if module is None:
        simulator = sorted((REPO / "tuner" / "simulator").rglob("*.py"))
        digest = hashlib.sha256(b"".join(p.read_bytes() for p in simulator)).hexdigest()[:16]
        fingerprint = f"simulator:{digest}:{getattr(space.spec.target.settings, 'profile', None)}"
    else:
        fingerprint = landscape_fingerprint(landscape, module, spec=space.spec)
    return cached_true_scores(lambda: truth_table(landscape, space.spec, progress=True), space.spec,
                              fingerprint, cache)


def median_interval(values: list[float], seed: int = 0) -> tuple[float, float, float]:
    """Median and its bootstrap 90 % interval (percentile method: robust for the ties a median of
    ratios has)."""
    data = np.asarray(values, dtype=float)
    if len(data) < 2 or np.all(data == data[0]):
        return float(np.median(data)), float(data[0]), float(data[0])
    res = bootstrap((data,), np.median, confidence_level=0.9, method="percentile", n_resamples=2000,
                    random_state=np.random.default_rng(seed))
    return float(np.median(data)), float(res.confidence_interval.low), float(
        res.confidence_interval.high)


def trials_to_reach(ratios: list[float], target: float) -> int | None:
    return next((i + 1 for i, r in enumerate(ratios) if r >= target), None)


def cases_from(args: argparse.Namespace) -> list[tuple[Path | None, str | None]]:
    """(study file or None, landscape factory or None) per landscape: ``--studies`` (relative to the
    working directory) on ``--landscape`` (or the simulator); ``--landscape`` alone: the landscape's
    own study (its factory called without one), or the two simulator studies for a factory that
    needs a study; else ``--cases`` (relative to the repository)."""
    if args.studies:
        return [(Path(study).resolve(), args.landscape) for study in args.studies.split(",")]
    if args.landscape:
        factory, _ = load_landscape(args.landscape)
        if _needs_study(factory):
            return [(REPO / study, args.landscape) for study in ("studies/simulated.toml",
                                                                 "bench/studies/llama-8b-h100.toml")]
        return [(None, args.landscape)]
    out: list[tuple[Path | None, str | None]] = []
    for case in args.cases.split(","):
        study, _, factory_text = case.partition("@")
        out.append((REPO / study, factory_text or None))
    return out


def _needs_study(factory: Callable[..., Any]) -> bool:
    try:
        inspect.signature(factory).bind()
    except TypeError:
        return True
    except ValueError:  # no signature to read (a builtin): pass it the study
        return True
    return False


def fmt(cell: tuple[float, float, float], digits: int = 3) -> str:
    median, low, high = cell
    return f"{median:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--budget", type=int, default=40)
    parser.add_argument("--noise", type=float, default=0.02, help="relative measurement noise (σ)")
    parser.add_argument("--samplers", default="auto,tpe,gp,random,sweep")
    parser.add_argument("--cases", default=",".join(DEFAULT_CASES),
                        help="comma-separated STUDY[@MODULE:FACTORY], one per landscape")
    parser.add_argument("--studies",
                        help="study files (relative to the working directory), all on --landscape "
                             "(or the simulator)")
    parser.add_argument("--landscape", metavar="MODULE:FACTORY",
                        help="an external landscape: FACTORY(study_spec) — or FACTORY() for a "
                             "landscape that carries its study — returns a Landscape or a Measurer "
                             "(docs/benchmarks.md); default: the simulator's ground truth (+ "
                             "--noise)")
    parser.add_argument("--long-budget", type=int, metavar="N",
                        help="budget of random and sweep only (e.g. 150: long enough to reach 0.98 "
                             "or not)")
    parser.add_argument("--gpu-hours", action="store_true",
                        help="also print the simulated GPU-hours to reach 0.98 and the seed's "
                             "manual method (bench/gpu_hours.py)")
    parser.add_argument("--truth-cache", default=str(CACHE), metavar="DIR",
                        help="where the landscapes' true scores are kept (default: "
                             ".spectune/bench-truth)")
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    rows = []
    hours: list[HoursRow] = []
    for study_path, factory_text in cases_from(args):
        factory, module = load_landscape(factory_text, base=REPO if not args.landscape else None) \
            if factory_text else (None, None)
        landscape, spec = make_landscape(load_study_file(study_path) if study_path else None,
                                         factory, args.noise)
        space = SearchSpace(spec, spec.option_table)
        name = (Path(spec.path).stem if args.studies or args.landscape
                else Path(factory_text.rpartition(":")[0]).stem if factory_text
                else f"{Path(spec.path).stem} (sim)")
        if factory_text and not (args.studies or args.landscape):
            if spec.path.stem not in DEFAULT_SPACE:
                name += f" ({spec.path.stem})"  # the same landscape on another space
            if not factory_text.endswith(":landscape"):
                name += f" ({factory_text.rpartition(':')[2]})"  # a module's other landscape
        t0 = time.perf_counter()
        truth = truth_of(space, landscape, module if factory_text else None,
                         Path(args.truth_cache).resolve())
        if not truth:
            raise SystemExit(
                f"{spec.path}: no configuration of the space can be the answer on this landscape")
        print(f"# {name}: {len(truth)} feasible distinct configurations, optimum score "
              f"{max(truth.values()):.3f} (ground truth in {time.perf_counter() - t0:.1f} s)",
              file=sys.stderr)
        runs_here: dict[str, tuple[int, list[Run]]] = {}
        for sampler in args.samplers.split(","):
            t0 = time.perf_counter()
            budget = args.long_budget if args.long_budget and sampler in ("random",
                                                                          "sweep") else args.budget
            runs = [run_search(spec, landscape, sampler, seed, budget, truth)
                    for seed in range(args.seeds)]
            curves = [ratios for ratios, _ in runs]
            cells = {k: median_interval([c[k - 1] for c in curves]) for k in CHECKPOINTS
                     if k <= budget}
            reach = [trials_to_reach(c, TARGET_RATIO) for c in curves]
            # Seeds that never got there count as "after the budget"; the median says so when they
            # are most.
            reach_cell = median_interval([float(r if r is not None else budget + 1) for r in reach])
            n_reached = sum(r is not None for r in reach)
            rows.append((name, sampler, cells, reach_cell, n_reached, len(curves),
                         time.perf_counter() - t0, budget))
            runs_here[sampler] = (budget, runs)
            print(f"  {sampler}: " + " ".join(f"@{k} {fmt(v)}" for k, v in cells.items())
                  + f" reach≥{TARGET_RATIO}: {fmt(reach_cell, 0)} ({n_reached}/{len(curves)})",
                  file=sys.stderr)
        if args.gpu_hours:
            hours += landscape_hours(name, spec, runs_here, TARGET_RATIO)
    print(f"| landscape | sampler | {' | '.join(f'@{k} [90 % CI]' for k in CHECKPOINTS)} "
          f"| trials to ≥{TARGET_RATIO} [90 % CI] | seeds reaching it | wall s |")
    print("|---|---|" + "---|" * (len(CHECKPOINTS) + 3))
    for name, sampler, cells, reach_cell, n_reached, n, wall, budget in rows:
        text = " | ".join(fmt(cells[k]) if k in cells else "–" for k in CHECKPOINTS)
        print(f"| {name} | {sampler} | {text} | {trials_text(reach_cell, budget)} | "
              f"{n_reached}/{n} | {wall:.0f} |")
    ratios = ratio_table({(r[0], r[1]): (r[3], r[7]) for r in rows}, rows[0][1] if rows else "",
                         TARGET_RATIO)
    if ratios:
        print("\n" + "\n".join(ratios))
    if args.gpu_hours:
        print("\n" + "\n".join(hours_table(hours, median_interval)))


if __name__ == "__main__":
    try:
        main()
    # a bad study file or landscape: its one-line message, no traceback
    except SpectuneError as exc:
        raise SystemExit(str(exc)) from None
