"""Does the search learn from failures it did not see coming? Trials spent in a failing region, per
sampler.

Two landscapes whose configurations fail *after* the server started (run failures,
tuner/run/trial.py):

- ``simulator``: the simulator's ground truth on the seed space (bench/studies/qwen-seed-space.toml)
  with the profile's faults on (tuner/simulator/faults.py): deep wide trees (topk ≥ 2, steps ≥ 4)
  answer wrongly at temperature 0, and a C=64 decode batch beyond the memory model's headroom runs
  out of memory;
- ``unsafe_fast``: bench/landscapes/unsafe_fast.py (memory-tight's physics; its fastest region
  answers wrongly, large draft × batch at C=64 crash).

For each sampler and seed it runs ``evaluate_search`` (the study's real loop) and counts the
measured trials that ended ``run-failed``, against random search — a sampler told nothing, whatever
the trials report — and states the share of the space's distinct configurations that fail. It also
checks that no search picked a failing configuration as its best.

    .venv/bin/python bench/failure_avoidance.py --seeds 3 --budget 25
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import optuna

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.landscapes import unsafe_fast
from tuner.evaluation.landscape import evaluate_search, simulator_landscape
from tuner.simulator.profile import DEFAULT_PROFILE, load_profile
from tuner.store.record import Outcome, measured_records
from tuner.study.load import load_study_file
from tuner.study.space import SearchSpace
from tuner.targets.base import RunFailed

STUDY = Path(__file__).resolve().parent / "studies" / "qwen-seed-space.toml"
FAULTS = """
[[faults]]
kind = "wrong-output"
when = { speculative_eagle_topk = { min = 2 }, speculative_num_steps = { min = 4 } }
after_tokens = 3

[[faults]]
kind = "decode-oom"
gb_per_token = 0.015
"""


def faulty_profile(folder: Path) -> str:
    source = Path(load_profile(DEFAULT_PROFILE).source)
    if not source.is_file():
        source = (Path(__file__).resolve().parent.parent / "tuner" / "simulator" / "profiles"
                  / f"{DEFAULT_PROFILE}.toml")
    path = folder / "faulty.toml"
    path.write_text(source.read_text(encoding="utf-8") + FAULTS, encoding="utf-8")
    return str(path)


def failing_share(spec, landscape, sample: int = 3000) -> float:  # type: ignore[no-untyped-def]
    """Share of the space's distinct valid configurations that start but fail while measured
    (estimated on a seeded random sample of ``sample`` raw points)."""
    space = SearchSpace(spec, spec.option_table)
    truth = landscape.measurer(0)
    seen: dict[str, bool] = {}
    points = list(space.points())
    random.Random(0).shuffle(points)
    for params in points[:sample]:
        config = space.decode(params).config
        if config is None or config.key() in seen:
            continue
        try:
            truth.deploy(config)
        except Exception:  # a failed start is not a run failure
            seen[config.key()] = False
            continue
        seen[config.key()] = any(_fails(truth, i) for i in range(len(spec.benchmark.phases)))
    return sum(seen.values()) / max(len(seen), 1)


def _fails(measurer, phase_index: int) -> bool:  # type: ignore[no-untyped-def]
    """Whether the phase fails: in the plain form (a ``failure`` key) or raised (``RunFailed``, as
    the landscapes' measurers report a crash or a wrong answer)."""
    try:
        return bool(measurer.measure(phase_index).get("failure"))
    except RunFailed:
        return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--budget", type=int, default=25)
    parser.add_argument("--samplers", default="auto,tpe,random")
    parser.add_argument("--landscapes", default="simulator,unsafe_fast")
    parser.add_argument("--no-share", action="store_true",
                        help="skip counting the failing share of the space")
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    spec = load_study_file(STUDY)
    with tempfile.TemporaryDirectory() as folder:
        landscapes = {"simulator": simulator_landscape(spec, profile=faulty_profile(Path(folder))),
                      "unsafe_fast": unsafe_fast.landscape(spec)}
        print(f"budget {args.budget} measured trials, {args.seeds} seeds; median [min, max] over "
              "seeds\n")
        print("| landscape | sampler | run-failed trials | share of budget | in the second half | "
              "failing share of space | unsafe best |")
        print("|---|---|---|---|---|---|---|")
        for name, landscape in landscapes.items():
            if name not in args.landscapes.split(","):
                continue
            share = None if args.no_share else failing_share(spec, landscape)
            for sampler in args.samplers.split(","):
                counts, late, unsafe_best = [], [], 0
                started = time.monotonic()
                for seed in range(args.seeds):
                    result = evaluate_search(spec, landscape, n_trials=args.budget, seed=seed,
                                             sampler="random" if sampler == "random"
                                             else sampler,  # type: ignore[arg-type]
                                             designed_start=sampler != "random")
                    measured = measured_records(result.study)
                    counts.append(sum(r.outcome is Outcome.RUN_FAILED for r in measured))
                    late.append(sum(r.outcome is Outcome.RUN_FAILED
                                    for r in measured[args.budget // 2:]))
                    unsafe_best += (result.best is not None
                                    and result.best.outcome is not Outcome.MEASURED)
                label = "random (told nothing)" if sampler == "random" else sampler
                median = statistics.median(counts)
                half = args.budget - args.budget // 2
                print(f"| {name} | {label} | {median:g} [{min(counts)}, {max(counts)}] | "
                      f"{median / args.budget:.0%} | {statistics.median(late) / half:.0%} | "
                      f"{'–' if share is None else f'{share:.0%}'} | {unsafe_best} |"
                      f"  <!-- {time.monotonic() - started:.0f} s -->")


if __name__ == "__main__":
    main()
