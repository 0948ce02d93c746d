"""How precise is a trial's score, paired with the reference run's requests or not?

For the study file (default: studies/simulated.toml, the demo) at its own request counts and time
scale: measure the baseline (the reference run), the baseline again on a fresh start (a null
comparison: its true score is 1), and a few other configurations of the search space, each on a
fresh simulator, then print each score with

* its unpaired 95 % interval (each phase's figure interval on its own, objectives/confidence.py —
  how scores were computed before pairing), and
* its paired interval (each phase against the reference run's same requests, objectives/paired.py —
  how spectune computes them now),

the half-widths in %, and how many times the phases' request counts would have to grow for ±3 %
without pairing (half-widths shrink as 1/√n). Results go in docs/scoring.md.

    .venv/bin/python bench/paired_precision.py [--study studies/simulated.toml]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path
from typing import Any

from objectives.runner import run_benchmark
from objectives.scoring import Scorer, references_from, with_paired
from tuner.sglang.launch import ServerConfig
from tuner.simulator.process import running_simulator
from tuner.study.load import load_study_file

#: Other configurations of the demo's space (tuned flags over the baseline's).
OTHERS: tuple[dict[str, Any], ...] = (
    {"speculative-num-steps": 4, "speculative-num-draft-tokens": 5},
    {"speculative-num-steps": 2, "speculative-num-draft-tokens": 3},
    {"speculative-num-steps": 5, "speculative-num-draft-tokens": 6, "mem-fraction-static": 0.9},
    {"speculative-eagle-topk": 2, "speculative-num-steps": 3, "speculative-num-draft-tokens": 6},
)
TARGET = 0.03


def measure(argv: list[str], spec: Any, profile: str | None,
            scale: float) -> dict[int, dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp, running_simulator(argv, profile=profile,
                                                                 time_scale=scale,
                                                                 log_path=Path(tmp) / "sim.log",
                                                                 ready_timeout_s=300) as sim:
        result = run_benchmark(sim.url, spec.benchmark)
    return {p.spec.concurrency: p.at_time_scale(scale).to_dict() for p in result.phases}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--study", default="studies/simulated.toml")
    args = parser.parse_args()
    spec = load_study_file(args.study)
    settings = spec.target.settings
    profile, scale = getattr(settings, "profile", None), float(getattr(settings, "time_scale", 1.0))
    table = spec.option_table
    weights = spec.objective.weights
    baseline = {**spec.server_flags, **spec.baseline}
    configs = [("baseline (reference)", baseline), ("baseline again", baseline),
               *((", ".join(f"{k.removeprefix('speculative-')}={v}" for k, v in o.items()),
                  {**baseline, **o})
                 for o in OTHERS)]
    runs = [(name, measure(ServerConfig.build(flags).argv(table), spec, profile, scale)) for name,
            flags in configs]
    reference = runs[0][1]
    refs = references_from(reference, weights)
    assert refs is not None, "the reference run measured nothing usable"
    scorer = Scorer(weights, refs)
    counts = ", ".join(f"{p.label} n={p.requests}" for p in spec.benchmark.phases)
    print(f"{args.study}: {counts}, weights {dict(weights)}, time scale {scale:g}\n")
    print(f"{'configuration':<44} {'score':>6} {'unpaired ±':>11} {'paired ±':>9} "
          f"{'n× for ±3 % unpaired':>21}")
    unpaired_hw, paired_hw = [], []
    for name, metrics in runs[1:]:
        score = scorer.score(metrics)
        plain = scorer.interval(metrics)
        paired = scorer.interval(with_paired(metrics, reference))
        if score is None or plain is None or paired is None:
            print(f"{name:<44} (no interval)")
            continue
        h_plain = (plain.high - plain.low) / 2 / score
        h_paired = (paired.high - paired.low) / 2 / score
        unpaired_hw.append(h_plain)
        paired_hw.append(h_paired)
        print(f"{name:<44} {score:>6.3f} {h_plain:>10.1%} {h_paired:>8.1%} "
              f"{(h_plain / TARGET) ** 2:>20.1f}×")
    print(f"\nmedian half-width: unpaired ±{statistics.median(unpaired_hw):.1%}, "
          f"paired ±{statistics.median(paired_hw):.1%} (same requests)")


if __name__ == "__main__":
    main()
