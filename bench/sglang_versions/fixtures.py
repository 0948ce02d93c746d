"""Regenerate the fidelity fixtures (tests/fixtures/sglang-<version>-fidelity.json) from real SGLang
wheels.

Runs bench/sglang_fidelity/generate.py under each release set up by bench/sglang_versions/env.py
(the base venv with the unpacked wheel on PYTHONPATH). A few minutes of CPU per release.

    python3.11 bench/sglang_versions/fixtures.py 0.5.20 0.5.23    # these releases
    python3.11 bench/sglang_versions/fixtures.py                  # every release with a shipped
    option table
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from tables import CACHE, DATA, ROOT, release_dirs

GENERATOR = ROOT / "bench" / "sglang_fidelity" / "generate.py"
FIXTURES = ROOT / "tests" / "fixtures"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("releases", nargs="*")
    ap.add_argument("--cache", type=Path, default=CACHE)
    opts = ap.parse_args()
    available = release_dirs(opts.cache)
    shipped = [p.stem.removeprefix("sglang-") for p in sorted(DATA.glob("sglang-*.json"))]
    wanted = opts.releases or [v for v in shipped if v in available]
    failed = 0
    for version in wanted:
        if version not in available:
            print(f"{version}: not set up (run bench/sglang_versions/env.py {version})")
            failed += 1
            continue
        pythonpath = (available[version] / ".pythonpath").read_text(encoding="utf-8").strip()
        out = FIXTURES / f"sglang-{version}-fidelity.json"
        started = time.monotonic()
        proc = subprocess.run([str(opts.cache / "base" / "bin" / "python"), str(GENERATOR), "--out",
                               str(out)],
                              env={**os.environ, "PYTHONPATH": pythonpath,
                                   "CUDA_VISIBLE_DEVICES": ""},
                              capture_output=True, text=True, timeout=3600)
        lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
        summary = [ln for ln in lines
                   if "command lines:" in ln] if proc.returncode == 0 else lines[-1:]
        print(f"{version}: {summary[-1] if summary else proc.returncode} "
              f"({time.monotonic() - started:.0f} s)",
              flush=True)
        failed += proc.returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
