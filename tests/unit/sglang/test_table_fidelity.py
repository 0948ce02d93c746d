"""Each shipped option table parses command lines as its real SGLang release did.

The fidelity fixtures (tests/fixtures/sglang-<version>-fidelity.json,
bench/sglang_versions/fixtures.py) record what each release's real ``prepare_server_args`` did with
~400 command lines; argparse's refusals are exit 2. A parser built from that release's shipped table
must refuse exactly those, for the same kind of reason: names, abbreviations, types, choices and
required options as the release has them.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tuner.sglang.options import load_option_table

FIXTURES = sorted((Path(__file__).parents[2] / "fixtures").glob("sglang-*-fidelity.json"))
#: What kind of argparse refusal an error line is (the wording around it differs between releases).
KINDS = ("ambiguous option", "unrecognized arguments", "invalid choice",
         "the following arguments are required",
         "expected one argument", "expected at least one argument", "invalid")


def _kind(error: str) -> str:
    return next((k for k in KINDS if k in error.lower()), error)


def _ours(parser: Any, argv: list[str]) -> str | None:
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parser.parse_args(argv)
    except SystemExit:
        lines = [line for line in err.getvalue().splitlines() if line.strip()]
        return lines[-1] if lines else "?"
    return None


def test_fixtures_cover_a_spread_of_releases() -> None:
    versions = {json.loads(p.read_text(encoding="utf-8"))["sglang_version"] for p in FIXTURES}
    assert "0.5.23" in versions


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_the_table_refuses_what_the_release_refused(path: Path) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    parser = load_option_table(data["sglang_version"]).build_parser(allow_abbrev=True)
    mismatched = []
    for case in data["cases"]:
        argv = [re.sub(r"^@model:", "/models/", a) for a in case["argv"]]
        ours = _ours(parser, argv)
        real = case["error"] if case["exit_code"] == 2 else None
        if (ours is None) != (real is None) or (ours and real and _kind(ours) != _kind(real)):
            mismatched.append((" ".join(case["argv"]), real, ours))
    assert not mismatched, mismatched[:5]
