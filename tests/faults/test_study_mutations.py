"""A property-based mutator over the example study files: one value replaced by a hostile one must
be refused by ``spectune validate`` with exit 2, one line per problem, no traceback, and the study's
database untouched.
"""

from __future__ import annotations

import hashlib
import math
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import STUDIES
from tuner.cli import main

EXAMPLES = sorted(STUDIES.glob("*.toml"))

# On the module, not the test: Hypothesis seeds a derandomized test from its source, decorators
# included, and a changed seed draws other cases (two of which do not hold yet: docs/faults.md).
pytestmark = pytest.mark.fault("study_mutations")

#: Values no key of a study file accepts where a number is read.
HOSTILE_NUMBERS: list[Any] = [math.nan, math.inf, -math.inf, -1e300, 10**30, "", "1.2.3", [],
                              {"a": 1}]
#: ... and where a string is read (a name, a URL, a flag value, a constraint).
HOSTILE_STRINGS: list[Any] = [math.nan, {"a": {"b": []}}, [[[]]], "<= .", "<= 1.2.3", "../../x",
                              "mysql://x/y"]


def leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from leaves(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from leaves(item, (*path, index))
    else:
        yield path, value


def replaced(doc: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copy = dict(doc) if isinstance(doc, dict) else list(doc)
    copy[path[0]] = replaced(doc[path[0]], path[1:], new)  # type: ignore[index]
    return copy


# The keys where a hostile value is still a legal one (free text, a name the simulator does not
# check).
TOLERANT = {"model-path", "speculative-draft-model-path", "served-model-name", "name", "dataset",
            "profile",
            "system_prompt", "chat_template", "log_dir", "command", "launch_prefix", "unit", "host",
            "user", "env"}


@st.composite
def mutations(draw: st.DrawFn) -> tuple[Path, tuple[Any, ...], Any]:
    example = draw(st.sampled_from(EXAMPLES))
    doc = tomllib.loads(example.read_text())
    # A key is tolerant for every item under it too (each word of a ``command`` list is free text).
    choices = [(p, v) for p, v in leaves(doc) if not isinstance(v, bool) and p
               and not TOLERANT.intersection(
               k for k in p if isinstance(k, str)) and isinstance(v, (int, float, str))]
    path, value = draw(st.sampled_from(choices))
    pool = HOSTILE_NUMBERS if isinstance(value, (int, float)) else HOSTILE_STRINGS
    return example, path, draw(st.sampled_from(pool))


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()
            if p.is_file()}


# Derandomized: the same cases on every run (a CI run must not fail by the luck of the draw); each
# case validates a whole study (seconds for the large example's space), so the count is what fits
# the suite's time budget.
@pytest.mark.timeout(900)
@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutations())
def test_a_hostile_value_is_one_line_exit_2(tmp_path: Path,
                                            mutation: tuple[Path, tuple[Any, ...], Any]) -> None:
    example, path, value = mutation
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    doc = replaced(tomllib.loads(example.read_text()), path, value)
    study = folder / example.name
    try:
        study.write_text(tomli_w.dumps(doc))
    except (TypeError, ValueError):
        # tomli_w cannot write it (NaN in some versions): skip the case
        study.write_text(example.read_text())
        return
    (folder / (study.stem + ".db")).write_bytes(b"SQLite format 3\x00 stand-in")
    before = _digest(folder)
    result = CliRunner().invoke(main, ["validate", str(study)])
    assert result.exit_code == 2, (path, value, result.output)
    assert not isinstance(result.exception, Exception) \
           or isinstance(result.exception, SystemExit), result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert errors and "Traceback" not in result.output, (path, value, result.output)
    assert len(errors) == 1, (path, value, errors)  # one mistake, one line
    assert all(len(line) < 600 for line in errors)
    assert _digest(folder) == before, "validate touched the study's folder"
