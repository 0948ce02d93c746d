"""Values that used to pass ``spectune validate`` and then crash ``spectune tune``, and storage that
``tune`` could not use: each is now refused by ``validate`` with one line naming the file, the key
and the problem (exit 2; for the storage, ``tune``'s own exit code 4) — and by ``tune`` the same
way, before any server starts or anything is written.

``validate`` runs in this process (click's runner: it is a pure function of the file); ``tune`` is
forked from the fault suite's fork server (tests/faults/forkserver.py), a process of its own.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import optuna
import pytest
from click.testing import CliRunner

from tests.faults.conftest import assert_one_line, error_lines, load, wait_gone
from tests.faults.forkserver import ForkServer
from tests.faults.quick import DEADLINE_S, copy_of, err, name_of, start, tiny_study
from tuner.cli import main
from tuner.store.storage import has_retry

pytestmark = pytest.mark.fault("hostile_values")

BIG = "x" * 3_000_000  # a 3 MB flag value: past what one argument of a process may be
#: Ten environment values, each within the bound for one value, together past what a start can pass.
MANY = "\n".join(f'SPECTUNE_PAD_{i} = "{"y" * 60_000}"' for i in range(10))


def _flag(line: str) -> tuple[str, str]:
    return "enable-metrics = true", f"enable-metrics = true\n{line}"


def _env(line: str) -> tuple[str, str]:
    return "[search]", f"[server.env]\n{line}\n\n[search]"


#: case → (the edit of the tiny study: text replaced, by what), what its one line names.
CASES: dict[str, tuple[tuple[str, str], str]] = {
    "weight_1e308": (("weights = { c1 = 0.5, c64 = 0.5 }", "weights = { c1 = 1e308, c64 = 0.3 }"),
                     "objective.weights.c1"),
    "weight_1e9": (("weights = { c1 = 0.5, c64 = 0.5 }", "weights = { c1 = 1e9, c64 = 0.3 }"),
                   "objective.weights.c1: must be at most"),
    "flag_nul": (_flag('served-model-name = "a\\u0000b"'),
                 "server.flags.served-model-name: the value holds a NUL"),
    "flag_3mb": (_flag(f'served-model-name = "{BIG}"'),
                 "server.flags.served-model-name: the value is 3,000,000"),
    "env_nul": (_env('HF_HOME = "/tmp/\\u0000x"'), "server.env.HF_HOME: the value holds a NUL"),
    "server_total": (_env(MANY), "server: its flags and environment hold 600,"),
    "key_nul": (_env('"A\\u0000B" = "1"'), "server.env: the key 'A\\x00B'"),
    "timeout_1e15": (("max_tokens = 32", "max_tokens = 32\nrequest_timeout = 1e15"),
                      "benchmark.request_timeout: must be at most 366 days"),
    "count_1e30": (("max_tokens = 32",
                    "max_tokens = 32\ninput_tokens = 1000000000000000000000000000000"),
                   "benchmark.input_tokens: must be at most 1e+18"),
    "dataset_not_jsonl": (('dataset = "builtin"', 'dataset = "prompts.jsonl"'),
                          "not a JSONL prompt file"),
    "dataset_empty": (('dataset = "builtin"', 'dataset = "empty.jsonl"'),
                      "empty.jsonl: no prompts"),
}


def _hostile(tmp_path: Path, case: str) -> Path:
    study = tiny_study(tmp_path, f"fault-value-{case}-{os.getpid()}")
    (tmp_path / "prompts.jsonl").write_text("this is, not JSON\n{\"prompt\": \"fine\"}\n")
    (tmp_path / "empty.jsonl").write_text("\n\n")
    (old, new), _ = CASES[case]
    text = study.read_text()
    assert old in text, old
    study.write_text(text.replace(old, new, 1))
    return study


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hostile_value_is_refused_by_validate_and_by_tune(forks: ForkServer, tmp_path: Path,
                                                            case: str) -> None:
    study = _hostile(tmp_path, case)
    result = CliRunner().invoke(main, ["validate", str(study)])
    assert result.exit_code == 2, result.output[-2000:]
    assert_one_line(result.output, contains=CASES[case][1])
    assert all(len(line) < 600 for line in error_lines(result.output))
    pid = start(forks, study, ["--n-trials", "1", "--confirm", "0"])
    code = forks.wait(pid, DEADLINE_S)
    text = err(study).read_text()
    assert code == 2, text[-2000:]
    assert_one_line(text, contains=CASES[case][1])
    assert not study.with_suffix(".db").exists(), "tune opened the study"
    assert wait_gone(name_of(study), timeout=10) == []


@pytest.mark.fault("storage")
@pytest.mark.parametrize("place", ["/proc", "/sys/kernel"])
def test_storage_on_a_pseudo_file_system_is_one_line(forks: ForkServer, tmp_path: Path,
                                                     place: str) -> None:
    """A SQLite path where no file can be made: ``validate`` says so with ``tune``'s exit code (4),
    and ``tune`` stops with one line (it raised PermissionError on its lock file), before any server
    starts."""
    study = tiny_study(tmp_path, f"fault-ro-{place.replace('/', '-')}-{os.getpid()}")
    study.write_text(re.sub(r"^seed = 7$",
                            f'seed = 7\nstorage = "sqlite:///{place}/spectune-fault.db"',
                            study.read_text(), count=1, flags=re.M))
    result = CliRunner().invoke(main, ["validate", str(study)])
    assert result.exit_code == 4, result.output[-2000:]
    assert_one_line(result.output, contains=f"cannot create files in {place}")
    pid = start(forks, study, ["--n-trials", "1", "--confirm", "0"])
    code = forks.wait(pid, DEADLINE_S)
    text = err(study).read_text()
    assert code == 4, text[-2000:]
    assert_one_line(text, contains=f"{place}/spectune-fault.db")
    assert wait_gone(name_of(study), timeout=10) == []


#: A study edited between a kill and the resume: edit → the section its one line names.
EDITS: dict[str, tuple[tuple[str, str], str]] = {
    "fixed_flag_added": (_flag("chunked-prefill-size = 4096"), "[server.flags] has changed"),
    "env_added": (_env('SGLANG_ENABLE_TORCH_COMPILE = "1"'), "[server.env] has changed"),
    "benchmark": (("max_tokens = 32", "max_tokens = 48"), "[benchmark] has changed"),
}


@pytest.mark.fault("study_edits")
@pytest.mark.parametrize("edit", sorted(EDITS))
def test_a_study_edited_before_the_resume_is_refused(forks: ForkServer, measured: Path,
                                                     tmp_path: Path, edit: str) -> None:
    """The measured study (as a kill would leave it), its file edited where every trial's numbers
    depend on it: ``tune`` refuses to mix old and new trials (exit 2, one line naming the section),
    the database untouched."""
    study = tiny_study(tmp_path, f"fault-edit-{edit}-{os.getpid()}")
    copy_of(measured, study)
    (old, new), says = EDITS[edit]
    study.write_text(study.read_text().replace(old, new, 1))
    before = study.with_suffix(".db").read_bytes()
    code = forks.wait(start(forks, study, ["--n-trials", "3", "--confirm", "0"]), DEADLINE_S)
    text = err(study).read_text()
    assert code == 2, text[-2000:]
    assert_one_line(text, contains=says)
    assert study.with_suffix(".db").read_bytes() == before, "the study changed"
    assert wait_gone(name_of(study), timeout=10) == []


@pytest.mark.fault("hostile_values")
def test_a_crash_inside_a_trial_restores_the_target(forks: ForkServer, measured: Path,
                                                    tmp_path: Path) -> None:
    """Whatever a value the checks missed makes crash (the weights' ZeroDivisionError was one): an
    unexpected error inside a trial ends the tuner with one line and exit 1, the server stopped, the
    trial queued again."""
    study = tiny_study(tmp_path, f"fault-crash-{os.getpid()}")
    copy_of(measured, study)
    code = forks.wait(start(forks, study, ["--n-trials", "3", "--confirm", "0"],
                            "after_spawn:raise"), DEADLINE_S)
    text = err(study).read_text()
    assert code == 1, text[-2000:]
    assert_one_line(text, contains="unexpected InjectedFault: fault injected at after_spawn")
    assert wait_gone(name_of(study), timeout=10) == []
    trials = load(study).get_trials(deepcopy=False)
    assert trials[2].state == optuna.trial.TrialState.FAIL and has_retry(trials, 2)
