"""Generate spectune's shipped option tables (tuner/sglang/data/sglang-<version>.json) from real
SGLang wheels.

For each release cached by bench/sglang_versions/env.py, run that release's own parser —
``ServerArgs.add_cli_args`` on a fresh ``argparse.ArgumentParser``, through tuner/sglang/dump.py,
the same code the resolver runs on a target — under the base venv with the unpacked wheel on
``PYTHONPATH``, and write the JSON. Nothing is typed by hand. A post-release (0.5.10.post1) gets a
file of its own only when its table differs from its base release's; otherwise spectune's base table
serves it (``tuner.sglang.versions``).

    python3.11 bench/sglang_versions/env.py 0.5.24          # fetch and unpack the wheel (cached)
    python3.11 bench/sglang_versions/tables.py 0.5.24       # write
    tuner/sglang/data/sglang-0.5.24.json python3.11 bench/sglang_versions/tables.py              #
    every cached release python3.11 bench/sglang_versions/tables.py --check      # compare, write
    nothing (exit 1 on a difference)

Prints one line per release: option count, file size, fingerprint.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tuner" / "sglang" / "data"
DUMP = ROOT / "tuner" / "sglang" / "dump.py"
STUBS = ROOT / "bench" / "sglang_fidelity"
CACHE = Path(os.environ.get("SPECTUNE_SGLANG_CACHE", "/work/.cache/sglang"))

#: Runs under the release's interpreter: stand-ins for CUDA-only imports, then dump.py loaded by
#: path.
_PROGRAM = """
import importlib.util, json, sys
sys.path.insert(0, {stubs!r})
import stubs  # noqa: F401  (sgl_kernel / torchvision stand-ins: the parser never uses them)
spec = importlib.util.spec_from_file_location("spectune_dump", {dump!r})
dump = importlib.util.module_from_spec(spec)
spec.loader.exec_module(dump)
print(json.dumps(dump.dump_sglang()))
"""


def release_dirs(cache: Path) -> dict[str, Path]:
    found = {}
    for path in sorted((cache / "releases").glob("*")):
        if path.is_dir() and (path / ".pythonpath").is_file():
            found[path.name] = path
    return found


def read_table(cache: Path, release: Path) -> dict[str, Any]:
    """The table the release's own parser describes (runs its code under the base venv)."""
    program = _PROGRAM.format(stubs=str(STUBS), dump=str(DUMP))
    marker = release / ".pythonpath"
    if not marker.is_file():
        raise RuntimeError(
            f"{release.name}: not set up (run bench/sglang_versions/env.py {release.name})")
    env = {**os.environ, "PYTHONPATH": marker.read_text(encoding="utf-8").strip(),
           "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run([str(cache / "base" / "bin" / "python"), "-c", program], env=env,
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        tail = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        raise RuntimeError(f"{release.name}: {tail[-1] if tail else f'exit {proc.returncode}'}")
    table: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    if table["sglang_version"] != release.name:
        raise RuntimeError(f"{release.name}: the wheel says it is SGLang {table['sglang_version']}")
    return table


def render(table: dict[str, Any]) -> str:
    """The shipped file's text (one key per line: diffs between releases stay readable)."""
    return json.dumps(table, indent=0) + "\n"


def base_release(version: str) -> str | None:
    match = re.fullmatch(r"(.+)\.post\d+", version)
    return match.group(1) if match else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("releases", nargs="*", help="releases to generate (default: every cached one)")
    ap.add_argument("--cache", type=Path, default=CACHE)
    ap.add_argument("--out", type=Path, default=DATA)
    ap.add_argument("--check", action="store_true",
                    help="compare with the shipped files; write nothing")
    opts = ap.parse_args()
    available = release_dirs(opts.cache)
    wanted = opts.releases or list(available)
    missing = [v for v in wanted if v not in available]
    if missing:
        print(f"not set up: {', '.join(missing)} (run bench/sglang_versions/env.py "
              f"{' '.join(missing)})")
        return 2
    tables: dict[str, dict[str, Any]] = {}
    differ = 0
    for version in wanted:
        table = read_table(opts.cache, available[version])
        tables[version] = table
        base = base_release(version)
        base_table = tables.get(base) if base else None
        if base and base_table is None and (opts.out / f"sglang-{base}.json").is_file():
            base_table = json.loads((opts.out / f"sglang-{base}.json").read_text(encoding="utf-8"))
        path = opts.out / f"sglang-{version}.json"
        text = render(table)
        note = ""
        if base_table is not None and base_table.get("fingerprint") == table["fingerprint"]:
            note = f" = {base}'s table: no file of its own"
            if path.is_file() and not opts.check:
                path.unlink()
        elif opts.check:
            same = path.is_file() and path.read_text(encoding="utf-8") == text
            differ += not same
            note = " matches the shipped file" if same else " DIFFERS from the shipped file"
        else:
            path.write_text(text, encoding="utf-8")
            note = f" → {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}"
        print(f"{version}: {len(table['options'])} options, {len(text.encode()) // 1024} KiB, "
              f"fingerprint {table['fingerprint']}{note}", flush=True)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
