"""How far spectune's own rules (tuner/sglang/rules.py, held to SGLang 0.5.23) are from each
release's real verdicts: the fallback where a target's SGLang cannot be asked.

For every fidelity fixture (tests/fixtures/sglang-<version>-fidelity.json), each command line is
parsed with that release's shipped option table and judged by the rules for the fixture's GPU;
printed per release: how many lines the real release accepts that the rules refuse, and refuses that
the rules accept (the ones that matter: a deploy the release would refuse). The fixtures record
argument checks only: a line "accepted" there may still be refused while SGLang loads the draft
model (its draft attention backend table), which the rules do judge — those count as "rules refuse
them".

    .venv/bin/python bench/sglang_versions/rules_gap.py
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
from pathlib import Path
from typing import Any

from tuner.sglang import rules
from tuner.sglang.hardware import Hardware
from tuner.sglang.options import load_option_table

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures"


def verdict(parser: argparse.ArgumentParser, case: dict[str, Any], data: dict[str, Any]) -> bool:
    argv = [f"/models/{a.removeprefix('@model:')}" if a.startswith("@model:") else a
            for a in case["argv"]]
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            args = vars(parser.parse_args(argv))
    except SystemExit:
        return False
    model = next((a for a in case["argv"] if a.startswith("@model:")), None)
    major, minor = data["gpus"][case["gpu"]]["capability"]
    architecture = data["architectures"][model.removeprefix("@model:")] if model else None
    return rules.judge(args, Hardware(architecture, (int(major), int(minor)))).violation is None


def main() -> int:
    print(
        f"{'release':<14}{'lines':>6}{'real accepts':>14}{'rules refuse them':>19}"
        f"{'real refuses':>14}{'rules accept them':>19}")
    for path in sorted(FIXTURES.glob("sglang-*-fidelity.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        parser = load_option_table(data["sglang_version"]).build_parser(allow_abbrev=True)
        accepted = [c for c in data["cases"] if c["verdict"] == "accepted"]
        refused = [c for c in data["cases"] if c["verdict"] != "accepted"]
        too_strict = sum(1 for c in accepted if not verdict(parser, c, data))
        too_lax = sum(1 for c in refused if verdict(parser, c, data))
        print(
            f"{data['sglang_version']:<14}{len(data['cases']):>6}{len(accepted):>14}{too_strict:>19}"
              f"{len(refused):>14}{too_lax:>19}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
