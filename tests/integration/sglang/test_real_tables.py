"""Heavy tier: a shipped option table regenerated from the real SGLang wheel and compared with the
file.

Needs the cache bench/sglang_versions/env.py builds (real wheels, a CPU-only torch); skips, saying
how to build it, where that cache is absent. One release only (importing SGLang costs ~10-30 s of
CPU): 0.5.14, the first with SGLang's deprecation marks on the renamed CUDA-graph flag, so the
rename spectune maps is read from the real parser here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.sglang_versions import tables
from tuner.sglang import versions
from tuner.sglang.options import OptionTable, load_option_table

# One import of SGLang: seconds on a quiet machine, minutes on a loaded one (pytest-timeout defaults
# to 300 s).
pytestmark = [pytest.mark.sglang_real, pytest.mark.slow, pytest.mark.timeout(900)]

RELEASE = "0.5.14"


def _release_dir(version: str) -> Path:
    path = tables.CACHE / "releases" / version
    if not (path / ".pythonpath").is_file():
        pytest.skip(f"no cached SGLang {version} in {tables.CACHE} (build it: python3.11 "
                    f"bench/sglang_versions/env.py {version})")
    return path


def test_the_shipped_table_is_what_the_real_parser_says() -> None:
    real = tables.read_table(tables.CACHE, _release_dir(RELEASE))
    shipped = (tables.DATA / f"sglang-{RELEASE}.json").read_text(encoding="utf-8")
    assert tables.render(real) == shipped
    table = OptionTable.from_json(real)
    assert table.fingerprint == load_option_table(RELEASE).fingerprint
    old = table.by_option("--cuda-graph-max-bs")
    assert old is not None and old.deprecated and old.replaced_by == "--cuda-graph-max-bs-decode"
    assert versions.spelling_in("--cuda-graph-max-bs", table) == "--cuda-graph-max-bs"
    assert versions.spelling_in("--cuda-graph-max-bs-decode", table) == "--cuda-graph-max-bs-decode"
