"""``spectune report`` on a full disk: one line, exit 1, and the report already there left whole.

The disk is "full" through the process's own file-size limit (RLIMIT_FSIZE, set before it starts: a
write past it fails with EFBIG, as one past a full disk fails with ENOSPC; Python ignores the
SIGXFSZ that comes with it), as in the SQLite storage faults (test_sqlite_faults.py). The page
(interactive plots, megabytes) cannot be written; the earlier report's page stays as it was, not
truncated.
"""

from __future__ import annotations

import os
import resource
import subprocess
from pathlib import Path

import pytest

from tests.faults.conftest import assert_one_line
from tests.faults.quick import DEADLINE_S, copy_of, tiny_study
from tests.helpers import spectune_command

LIMIT_BYTES = 200_000  # the summary and the CSV fit; the page does not


def _report(study: Path, out: Path, *, full: bool) -> subprocess.CompletedProcess[str]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT_BYTES, LIMIT_BYTES))

    return subprocess.run([*spectune_command(), "report", str(study), "-o", str(out)],
                          capture_output=True,
                          text=True, cwd=study.parent, timeout=DEADLINE_S, preexec_fn=limit if full
                          else None)


@pytest.mark.fault("storage")
def test_report_on_a_full_disk_is_one_line_and_keeps_the_old_report(measured: Path,
                                                                    tmp_path: Path) -> None:
    study = tiny_study(tmp_path, f"fault-report-disk-{os.getpid()}")
    copy_of(measured, study)
    out = tmp_path / "report"
    first = _report(study, out, full=False)
    assert first.returncode == 0, first.stderr
    page = (out / "index.html").read_bytes()
    assert len(page) > LIMIT_BYTES  # else the limit would not bite
    result = _report(study, out, full=True)
    assert result.returncode == 1, result.stderr
    assert_one_line(result.stderr, contains=f"cannot write {out / 'index.html'}")
    assert (out / "index.html").read_bytes() == page, "the earlier report was damaged"
    assert not [p.name for p in out.iterdir() if p.name.endswith(".part")], \
           "a partial file was left"
