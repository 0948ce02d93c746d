"""What the output check costs a trial: its seconds against the rest of the trial, on a stored or
fresh study.

    .venv/bin/python bench/output_check_overhead.py studies/simulated.toml          # runs the demo
    first .venv/bin/python bench/output_check_overhead.py studies/simulated.toml --stored # reads a
    finished study

Runs ``spectune tune`` (with ``--confirm 0``: the confirmation stage re-deploys without probing)
unless ``--stored``, then reads every measured trial's timings: ``output_check_s`` (the probe; the
reference's two) against deploy + ready + benchmark. Prints the median and the range of the
per-trial share, and the total.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tuner.store.opening import open_existing_study
from tuner.store.record import Outcome, measured_records
from tuner.study.load import load_study_file


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("study")
    parser.add_argument("--stored", action="store_true",
                        help="read the stored study instead of running it")
    args = parser.parse_args()
    path = Path(args.study)
    if not args.stored:
        script = Path(sys.executable).parent / "spectune"
        subprocess.run([str(script), "tune", str(path), "--confirm", "0", "--no-report"],
                       check=True)
    study = open_existing_study(load_study_file(path))
    shares, check_total, rest_total = [], 0.0, 0.0
    for record in measured_records(study):
        if record.outcome is not Outcome.MEASURED or "output_check_s" not in record.timings:
            continue
        timings = record.timings
        check = timings["output_check_s"]
        rest = sum(timings.get(k, 0.0) for k in ("deploy_s", "ready_s", "benchmark_s"))
        shares.append(check / rest)
        check_total += check
        rest_total += rest
    if not shares:
        print("no measured trial with an output check")
        return
    print(f"{len(shares)} measured trials: output check {statistics.median(shares):.1%} of a "
          f"trial's other time (median; range {min(shares):.1%}–{max(shares):.1%}); total "
          f"{check_total:.1f} s of {rest_total:.1f} s ({check_total / rest_total:.1%})")


if __name__ == "__main__":
    main()
