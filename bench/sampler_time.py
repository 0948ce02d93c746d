"""Sampler time per trial as a study grows: what one more worker costs the others (docs/scaling.md).

Workers take turns to ask (tuner/run/loop.py serializes proposals so every worker sees the trials in
flight), so the time a sampler needs to propose one trial is study-wide: N workers can only be kept
busy while N × sampler time stays well below one trial's length. This measures that time for the
samplers spectune uses (``make_sampler``: multivariate TPE with the constant liar, GPSampler) on the
demo study's search space, with 100, 500 and 1000 trials already stored, and with 3 more in flight
(RUNNING: what other workers are measuring).

The stored trials are random points of the space with a smooth synthetic score; the samplers' cost
depends on how many trials there are and how many dimensions, not on the score. Storage is
in-memory, so the figures are the sampler's own CPU time (reading 1000 trials from PostgreSQL adds
to it; Optuna's cache makes that incremental after the first ask).

    .venv/bin/python bench/sampler_time.py                 # prints a markdown table
    .venv/bin/python bench/sampler_time.py --sizes 100 500 --samplers tpe --asks 10
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
import warnings
import zlib
from pathlib import Path

import optuna

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tuner.search.samplers import SAMPLERS, make_sampler
from tuner.study.load import load_study_file
from tuner.study.space import SearchSpace

REPO = Path(__file__).resolve().parent.parent
IN_FLIGHT = 3


def synthetic(params: dict[str, float | int | str]) -> float:
    """A smooth score over the encoded parameters (any deterministic function serves)."""
    return -sum((zlib.crc32(v.encode()) % 7 if isinstance(v, str) else float(v) % 7 - 3.0) ** 2
                for v in params.values())


def stored_trials(space: SearchSpace, n: int, seed: int) -> list[optuna.trial.FrozenTrial]:
    study = optuna.create_study(direction="maximize",
                                sampler=optuna.samplers.RandomSampler(seed=seed))
    for _ in range(n):
        trial = study.ask()
        proposal = space.suggest(trial)
        study.tell(trial, synthetic(proposal.params))
    return study.trials


def time_asks(sampler_name: str, trials: list[optuna.trial.FrozenTrial], space: SearchSpace,
              asks: int, in_flight: int, seed: int) -> float:
    """Median seconds from ``ask`` to a full proposal (relative sampling happens on the first
    suggest)."""
    study = optuna.create_study(direction="maximize",
                                sampler=make_sampler(sampler_name, seed, space=space))
    study.add_trials(trials)
    for _ in range(in_flight):  # trials other workers are measuring: left RUNNING
        space.suggest(study.ask())
    durations = []
    for _ in range(asks):
        started = time.perf_counter()
        trial = study.ask()
        proposal = space.suggest(trial)
        durations.append(time.perf_counter() - started)
        study.tell(trial, synthetic(proposal.params))
    return statistics.median(durations)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--study", default=str(REPO / "studies" / "simulated.toml"))
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 500, 1000])
    parser.add_argument("--samplers", nargs="+", default=["tpe", "gp"], choices=list(SAMPLERS))
    parser.add_argument("--asks", type=int, default=5,
                        help="timed proposals per cell (the median is shown)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)

    spec = load_study_file(args.study)
    space = SearchSpace(spec, spec.option_table)
    samplers = [s for s in args.samplers if SAMPLERS[s].available()]
    if len(samplers) < len(args.samplers):
        print("(skipped: samplers whose extra is not installed)", file=sys.stderr)
    pool = stored_trials(space, max(args.sizes), args.seed)
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python "
          f"{platform.python_version()}, Optuna {optuna.__version__}; {len(space.dimensions)} "
          f"parameters ({spec.path.name}); median of {args.asks} proposals\n")
    print("| sampler | stored trials | s per proposal | s per proposal, 3 in flight |")
    print("|---|---|---|---|")
    for name in samplers:
        for n in args.sizes:
            alone = time_asks(name, pool[:n], space, args.asks, 0, args.seed)
            busy = time_asks(name, pool[:n], space, args.asks, IN_FLIGHT, args.seed)
            print(f"| {name} | {n} | {alone:.3f} | {busy:.3f} |", flush=True)


if __name__ == "__main__":
    main()
