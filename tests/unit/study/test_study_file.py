"""Study files: the examples load; every kind of broken file gets its own clear line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import STUDIES
from tuner.core.errors import StudyFileError
from tuner.study.load import load_study_file

VALID = """
[study]
name = "t"
n_trials = 5
timeout = "1h"
sampler = "auto"
seed = 1

[target]
kind = "simulated"
time_scale = 10.0

[server.flags]
model-path = "m"
speculative-algorithm = "EAGLE3"
speculative-draft-model-path = "d"

[server.env]
FOO = "bar"

[search]
speculative-num-steps = { min = 1, max = 5 }
speculative-eagle-topk = { choices = [1, 2] }
speculative-num-draft-tokens = { min = 2, max = 8 }
mem-fraction-static = { min = 0.80, max = 0.90, step = 0.02 }

[benchmark]
phases = [{ concurrency = 1, requests = 4 }, { concurrency = 64, requests = 64 }]

[objective]
weights = { c1 = 0.6, c64 = 0.4 }
constraints = ["error_rate <= 0.01", "c64.ttft_p99_ms < 2000"]

[finish]
deploy = "original"
"""


BASELINE = """
[baseline]
speculative-num-steps = 3
speculative-eagle-topk = 1
mem-fraction-static = 0.86
"""


def write(tmp_path: Path, text: str, name: str = "study.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def problems_of(tmp_path: Path, text: str) -> list[str]:
    path = write(tmp_path, text)
    with pytest.raises(StudyFileError) as info:
        load_study_file(path)
    lines = info.value.problems
    assert all(line.startswith(f"{path}: ") for line in lines), lines
    return lines


def replace(old: str, new: str) -> str:
    assert old in VALID, old
    return VALID.replace(old, new)


@pytest.mark.parametrize("name", ["simulated.toml", "qwen3.5-122b-eagle3.toml"])
def test_example_studies_are_valid(name: str) -> None:
    spec = load_study_file(STUDIES / name)
    assert spec.search, "an example study must tune something"
    assert sorted(p.concurrency for p in spec.benchmark.phases) == [1, 64]


def test_seed_study_targets_a_placeholder_host() -> None:
    spec = load_study_file(STUDIES / "qwen3.5-122b-eagle3.toml")
    assert spec.target.kind == "systemd-ssh"
    assert spec.target.settings.host.endswith(".example")
    assert {p.flag for p in spec.search} >= {"--speculative-num-steps", "--speculative-eagle-topk"}
    steps = next(p for p in spec.search if p.flag == "--speculative-num-steps")
    assert (steps.low, steps.high) == (1, 8)


def test_valid_file_resolves_values(tmp_path: Path) -> None:
    spec = load_study_file(write(tmp_path, VALID))
    assert spec.study.timeout_s == 3600.0
    assert spec.study.storage == f"sqlite:///{(tmp_path / 'study.db').resolve()}"
    assert spec.server_flags["--model-path"] == "m"
    assert spec.server_env == {"FOO": "bar"}
    assert spec.objective.weights == {1: 0.6, 64: 0.4}
    assert spec.objective.constraints[1].phase == 64
    assert spec.objective.constraints[1].metric == "ttft_p99_ms"


# (mutation of VALID, the key the line must name, a fragment of the problem)
BROKEN = {
    "toml-syntax": ("[study\nname='x'", None, "invalid TOML"),
    "unknown-section": (replace("[finish]", "[finsh]"), "finsh", "did you mean 'finish'"),
    "unknown-key": (replace("n_trials = 5", "n_trails = 5"), "study.n_trails",
                    "did you mean 'n_trials'"),
    "wrong-type": (replace("n_trials = 5", 'n_trials = "five"'), "study.n_trials",
                   "must be an integer"),
    "missing-required": (replace('name = "t"\n', ""), "study.name", "missing (required)"),
    "unknown-target-kind": (replace('kind = "simulated"', 'kind = "simulator"'), "target.kind",
                            "did you mean 'simulated'"),
    "unknown-sampler": (replace('sampler = "auto"', 'sampler = "bayes"'), "study.sampler",
                        "unknown sampler"),
    "unknown-flag": (replace('model-path = "m"', 'model-path = "m"\nmodel-pth2 = "x"'),
                     "server.flags.model-pth2", "unknown SGLang 0.5.23 option --model-pth2"),
    "ambiguous-flag": (replace("[search]\n", "[search]\nspeculative-num = { choices = [2, 3] }\n"),
                       "search.speculative-num",
                       "use the full name: one of --speculative-num-draft-tokens"),
    "abbreviated-flag": (replace('model-path = "m"', 'model-path = "m"\ntp = 4'), "server.flags.tp",
                         "abbreviation; write the full option name --tp-size"),
    "value-outside-choices": (replace('model-path = "m"',
                                      'model-path = "m"\nattention-backend = "fa9"'),
                              "server.flags.attention-backend", "does not accept 'fa9'"),
    "flag-wrong-type": (replace('model-path = "m"', 'model-path = "m"\ntp-size = "four"'),
                        "server.flags.tp-size", "takes an integer"),
    "empty-range": (replace("min = 1, max = 5", "min = 5, max = 1"), "search.speculative-num-steps",
                    "empty range: min 5 > max 1"),
    "impossible-range": (replace("min = 0.80, max = 0.90", "min = 0.80, max = 1.20"),
                         "search.mem-fraction-static", "impossible range"),
    "empty-choices": (replace("choices = [1, 2]", "choices = []"),
                      "search.speculative-eagle-topk.choices", "is empty"),
    "float-range-without-step": (replace(", step = 0.02", ""), "search.mem-fraction-static",
                                 "needs a step"),
    "fixed-and-tuned": (replace('model-path = "m"', 'model-path = "m"\nspeculative-num-steps = 3'),
                        "search.speculative-num-steps", "both fixed"),
    "target-owned-port": (replace('model-path = "m"', 'model-path = "m"\nport = 31000'),
                          "server.flags.port", "set by the target"),
    "missing-profile-file": (replace("time_scale = 10.0",
                                     'time_scale = 10.0\nprofile = "./nope.toml"'),
                             "target.profile", "file not found"),
    "missing-prompt-file": (replace("[benchmark]\n",
                                    '[benchmark]\ndataset = "prompts/missing.jsonl"\n'),
                            "benchmark.dataset", "prompt file not found"),
    "bad-duration": (replace('timeout = "1h"', 'timeout = "8 hours"'), "study.timeout",
                     "cannot read duration"),
    "weight-for-missing-phase": (replace("c64 = 0.4", "c32 = 0.4"), "objective.weights.c32",
                                 "no benchmark phase with concurrency 32"),
    "negative-weight": (replace("c1 = 0.6", "c1 = -1"), "objective.weights.c1",
                        "must be a number ≥ 0"),
    "bad-constraint": (replace('"error_rate <= 0.01"', '"error_rate << 0.01"'),
                       "objective.constraints[0]", "cannot read"),
    "unknown-metric": (replace('"error_rate <= 0.01"', '"ttft_p95_ms <= 100"'),
                       "objective.constraints[0]", "unknown metric 'ttft_p95_ms'"),
    "bad-env-name": (replace('FOO = "bar"', '"1FOO" = "bar"'), "server.env.1FOO",
                     "not a valid environment"),
    "zero-concurrency": (replace("{ concurrency = 1, requests = 4 }",
                                 "{ concurrency = 0, requests = 4 }"),
                         "benchmark.phases[0].concurrency", "must be ≥ 1"),
    "duplicate-phase": (replace("{ concurrency = 64, requests = 64 }",
                                "{ concurrency = 1, requests = 64 }"),
                        "benchmark.phases[1].concurrency", "appears in two phases"),
    "unknown-finish": (replace('deploy = "original"', 'deploy = "restore"'), "finish.deploy",
                       "unknown action"),
    "steps-missing-for-tree": (replace("speculative-num-steps = { min = 1, max = 5 }\n", ""),
                               "search", "bare AssertionError"),
    "speculative-without-algorithm": (replace('speculative-algorithm = "EAGLE3"\n', ""),
                                      "server.flags", "without --speculative-algorithm"),
    "no-valid-configuration": (replace('model-path = "m"',
                                       'model-path = "m"\nattention-backend = "flex_attention"'),
                               "search", "Flex Attention"),
    "baseline-outside-range": (
        VALID + "\n[baseline]\nspeculative-num-steps = 9\nspeculative-eagle-topk = 1\n"
        "mem-fraction-static = 0.84\n", "baseline.speculative-num-steps",
        "outside the search range 1..5"),
    "unknown-sglang-version": (replace('seed = 1', 'seed = 1\nsglang_version = "0.4.0"'),
                               "study.sglang_version",
                               "no option table for SGLang 0.4.0: spectune knows SGLang"),
    "not-a-release": (replace('seed = 1', 'seed = 1\nsglang_version = "latest"'),
                      "study.sglang_version", "'latest' is not an SGLang release number"),
    "bad-storage-url": (replace('seed = 1', 'seed = 1\nstorage = "mongodb://x/y"'), "study.storage",
                        "unsupported database 'mongodb'"),
    # NaN and infinities are valid TOML floats; none of them means anything in a study file.
    "nan-time-scale": (replace("time_scale = 10.0", "time_scale = nan"), "target.time_scale",
                       "must be a finite number, not nan"),
    "inf-range-bound": (replace("min = 0.80, max = 0.90", "min = 0.80, max = inf"),
                        "search.mem-fraction-static.max", "must be a finite number, not inf"),
    "nan-weight": (replace("c1 = 0.6", "c1 = nan"), "objective.weights.c1",
                   "must be a finite number, not nan"),
    "nan-fixed-flag": (replace('model-path = "m"',
                               'model-path = "m"\nschedule-conservativeness = nan'),
                       "server.flags.schedule-conservativeness",
                       "must be a finite number, not nan"),
    "nan-choice": (replace("choices = [1, 2]", "choices = [1, nan]"),
                   "search.speculative-eagle-topk.choices", "must be a finite number, not nan"),
    "inf-temperature": (replace("[benchmark]\n", "[benchmark]\ntemperature = -inf\n"),
                        "benchmark.temperature", "must be a finite number, not -inf"),
    "inf-constraint-bound": (replace('"error_rate <= 0.01"', '"error_rate <= 1e999"'),
                             "objective.constraints[0]", "the bound must be a finite number"),
    "inf-heartbeat": (replace("seed = 1", "seed = 1\nheartbeat_interval = inf"),
                      "study.heartbeat_interval", "must be a finite duration, not inf"),
    "negative-seed": (replace("seed = 1", "seed = -1"), "study.seed", "must be ≥ 0, not -1"),
    "huge-seed": (replace("seed = 1", "seed = 4294967296"), "study.seed",
                  "must be < 4294967296, not 4294967296"),
    "exploding-grid": (replace("step = 0.02", "step = 1e-9"), "search.mem-fraction-static.step",
                       "grid points from 0.8 to 0.9 (at most 1,000,000); use a larger step"),
    "name-with-slash": (replace('name = "t"', 'name = "a/b"'), "study.name",
                        "must not contain '/', '\\' or '..'"),
    "name-with-dotdot": (replace('name = "t"', 'name = "..t"'), "study.name", "must not contain"),
    "mysql-storage": (replace("seed = 1", 'seed = 1\nstorage = "mysql://u@h/db"'), "study.storage",
                      "unsupported database 'mysql' (supported: sqlite, postgresql, "
                      "postgresql+psycopg)"),
    "unknown-driver": (replace("seed = 1", 'seed = 1\nstorage = "postgresql+psycopg2://u@h/db"'),
                       "study.storage",
                       "unsupported database driver 'postgresql+psycopg2' (supported: sqlite, "
                       "postgresql"),
    "sqlite-dir-missing": (replace("seed = 1", 'seed = 1\nstorage = "sqlite:///no/such/dir/x.db"'),
                           "study.storage", "/no/such/dir does not exist"),
    "sqlite-absolute-dir-missing": (
        replace("seed = 1", 'seed = 1\nstorage = "sqlite:////no-such-spectune-dir/x.db"'),
        "study.storage",
        "directory /no-such-spectune-dir does not exist"),
    "zero-timeout": (replace('timeout = "1h"', 'timeout = "0s"'), "study.timeout",
                     "must be > 0, not '0s'"),
    "int-range-with-float": (replace("min = 1, max = 5", "min = 1.5, max = 5"),
                             "search.speculative-num-steps.min", "must be an integer, not 1.5"),
    "unknown-target-key": (replace("time_scale = 10.0", "time_scale = 10.0\ntimescale = 2"),
                           "target.timescale", "unknown key (did you mean 'time_scale'?)"),
    "unknown-phase-key": (replace("{ concurrency = 1, requests = 4 }",
                                  "{ concurrency = 1, request = 4 }"),
                          "benchmark.phases[0].request", "unknown key (did you mean 'requests'?)"),
    "unknown-range-key": (replace("min = 1, max = 5", "min = 1, maximum = 5"),
                          "search.speculative-num-steps.maximum",
                          "unknown key (did you mean 'max'?)"),
    # One bad entry used to refuse the whole [search] (or [server]) and then every check across
    # sections complained on the defaults: "not tuned in [search]" for each baseline flag, "set
    # without --speculative-algorithm".
    "search-entry-not-finite": (
        replace("max = 0.90, step = 0.02", "max = inf, step = 0.02") + BASELINE,
        "search.mem-fraction-static.max", "must be a finite number, not inf"),
    "search-entry-unknown-key": (
        replace("{ min = 1, max = 5 }", "{ min = 1, max = 5, bogus = 2 }") + BASELINE,
        "search.speculative-num-steps.bogus", "unknown key"),
    "env-not-finite": (replace('FOO = "bar"', "FOO = nan"), "server.env.FOO",
                       "must be a finite number, not nan"),
    "baseline-not-finite": (VALID + BASELINE.replace("0.86", "nan"),
                            "baseline.mem-fraction-static", "must be a finite number, not nan"),
    # the change said of a draft count the tree cannot verify is the rule's cap (was: a
    # proportional neighbour, "deployed as 2" beside "verifies at most 3")
    "baseline-draft-above-cap": (
        VALID + BASELINE.replace("num-steps = 3", "num-steps = 1").replace(
            "eagle-topk = 1", "eagle-topk = 2\nspeculative-num-draft-tokens = 4"),
        "baseline", "speculative-num-draft-tokens = 4 would be deployed as 3: a tree of "
                    "num-steps 1 and eagle-topk 2 verifies at most"),
    "unknown-algorithm": (replace('speculative-algorithm = "EAGLE3"',
                                  'speculative-algorithm = "EAGLE9"'),
                          "server.flags.speculative-algorithm",
                          "'EAGLE9' is not a speculative algorithm SGLang knows"),
    "unknown-algorithm-choice": (
        replace('speculative-algorithm = "EAGLE3"\n', "").replace(
            "[search]\n", '[search]\nspeculative-algorithm = { choices = ["EAGLE3", "<= ."] }\n'),
        "search.speculative-algorithm.choices", "'<= .' is not a speculative algorithm"),
}


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_broken_study_file_gets_one_clear_line(tmp_path: Path, kind: str) -> None:
    text, key, fragment = BROKEN[kind]
    lines = problems_of(tmp_path, text)
    matching = [line for line in lines if fragment in line]
    assert matching, f"no line mentions {fragment!r}: {lines}"
    if key is not None:
        assert any(line.split(": ", 2)[1] == key for line in matching), (key, matching)
    assert all("\n" not in line and "Traceback" not in line for line in lines)


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_one_cause_one_line(tmp_path: Path, kind: str) -> None:
    """Each broken file has one mistake, so one line: checks that depend on a refused section do
    not report its defaults as further problems."""
    assert len(problems_of(tmp_path, BROKEN[kind][0])) == 1


def test_at_least_fifteen_distinct_kinds() -> None:
    assert len(BROKEN) >= 15


def test_all_problems_are_reported_together(tmp_path: Path) -> None:
    text = replace("n_trials = 5", 'n_trials = "x"').replace('sampler = "auto"', 'sampler = "nope"')
    lines = problems_of(tmp_path, text)
    assert any("study.n_trials" in line for line in lines)
    assert any("study.sampler" in line for line in lines)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(StudyFileError) as info:
        load_study_file(tmp_path / "absent.toml")
    assert info.value.problems == [f"{tmp_path / 'absent.toml'}: file not found"]


def test_relative_sqlite_storage_is_beside_the_study(tmp_path: Path) -> None:
    (tmp_path / "db").mkdir()
    spec = load_study_file(write(tmp_path,
                                 replace("seed = 1", 'seed = 1\nstorage = "sqlite:///db/x.db"')))
    assert spec.study.storage == f"sqlite:///{(tmp_path / 'db' / 'x.db').resolve()}"


def test_seed_preset_means_greedy_past_eos(tmp_path: Path) -> None:
    spec = load_study_file(write(tmp_path,
                                 replace("[benchmark]\n", '[benchmark]\npreset = "seed"\n')))
    assert spec.benchmark.workload.temperature == 0.0
    assert spec.benchmark.workload.ignore_eos is True
    realistic = load_study_file(write(tmp_path, VALID, "b.toml")).benchmark.workload
    assert realistic.temperature > 0 and realistic.ignore_eos is False


def test_a_study_name_may_not_be_blank(tmp_path: Path) -> None:
    lines = problems_of(tmp_path, replace('name = "t"', 'name = "  "'))
    assert any(line.endswith(": study.name: must not be empty") for line in lines), lines


def test_tokens_per_chunk_is_a_constraint_metric_because_phases_report_it(tmp_path: Path) -> None:
    spec = load_study_file(write(tmp_path,
                                 replace('"error_rate <= 0.01"', '"tokens_per_chunk >= 1"')))
    assert spec.objective.constraints[0].metric == "tokens_per_chunk"


def test_absolute_sqlite_storage_is_kept(tmp_path: Path) -> None:
    db = tmp_path / "abs.db"
    spec = load_study_file(write(tmp_path,
                                 replace("seed = 1", f'seed = 1\nstorage = "sqlite:///{db}"')))
    assert spec.study.storage == f"sqlite:///{db}"


def test_constraint_metrics_are_the_metrics_a_phase_reports() -> None:
    import dataclasses

    from objectives.results import PhaseResult
    from tuner.study.objective import CONSTRAINT_METRICS

    fields = {f.name for f in dataclasses.fields(PhaseResult)}
    assert set(CONSTRAINT_METRICS) <= fields
