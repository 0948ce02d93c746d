"""``spectune init`` writes study files that the real ``validate`` accepts; ``validate --plan``
shows what the first trial deploys and how long the study takes; ``--check-target`` contacts the
target; ``${NAME}`` in the storage URL reads the environment and no password is printed."""

from __future__ import annotations

import re
import socket
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tests.helpers import STUDIES
from tuner.cli import main
from tuner.study.models import BenchmarkSection, StudySection
from tuner.targets.registry import TARGET_KINDS, settings_model
from tuner.targets.systemd_ssh_settings import SystemdSshTargetSettings


def cli(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def init(path: Path, *args: str) -> Path:
    result = cli("init", "-o", str(path), *args)
    assert result.exit_code == 0, result.output + result.stderr
    return path


def as_comment(description: str) -> str:
    """A description's first words, as the comment above its key starts."""
    return "# " + " ".join(description.replace("``", "`").split()[:6])


@pytest.mark.parametrize("kind", TARGET_KINDS)
def test_init_writes_a_commented_study_file_that_validates_as_written(kind: str,
                                                                      tmp_path: Path) -> None:
    model = [] if kind == "simulated" else ["--model", "Qwen/Qwen3-8B", "--draft",
                                            "Tengyunw/qwen3_8b_eagle3"]
    path = init(tmp_path / f"{kind}.toml", "--target", kind, *model)
    text = path.read_text()
    raw = tomllib.loads(text)
    assert raw["target"]["kind"] == kind and raw["study"]["name"] == kind
    # Every key's comment is its model's description (the text docs/study-file.md is generated
    # from).
    for model_class, key in ((StudySection, "n_trials"), (BenchmarkSection, "max_tokens"),
                             (settings_model(kind), "startup_timeout")):
        assert as_comment(model_class.model_fields[key].description or "") in text, key
    if kind != "simulated":
        assert raw["server"]["flags"]["model-path"] == "Qwen/Qwen3-8B"
    result = cli("validate", str(path))
    assert result.exit_code == 0, result.stderr
    assert "distinct valid configurations" in result.output


def test_init_systemd_uses_placeholders_and_lists_unset_keys_commented_out(tmp_path: Path) -> None:
    text = init(tmp_path / "s.toml", "--target", "systemd-ssh", "--model", "m/M", "--draft",
                "m/D").read_text()
    assert 'host = "gpu-host.example"' in text
    # unset keys: commented out, with defaults
    assert "# key_file = " in text and "# sudo = false" in text
    assert "# startup_timeout = \"15m00s\"" in text  # a duration's default as a user writes it
    assert as_comment(SystemdSshTargetSettings.model_fields["unit"].description or "") in text


@pytest.mark.parametrize("args", [("--target", kind) for kind in TARGET_KINDS] + [
    ("--target", "systemd-ssh", "--template", template) for template in ("eagle3", "mtp", "ngram")])
def test_init_names_no_address_but_the_loopback(tmp_path: Path, args: tuple[str, ...]) -> None:
    """A written study names hosts by placeholders only: an address in it (even commented out) is
    one a user may leave in, and a stray connection to it is a fault here."""
    model = () if "simulated" in args else ("--model", "m/M")
    text = init(tmp_path / "s.toml", *args, *model).read_text()
    addresses = set(re.findall(r"\b\d{1,3}(?:\.\d{1,3}){3}\b", text))
    assert addresses <= {"127.0.0.1", "0.0.0.0"}, addresses


def test_init_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text("mine\n")
    result = cli("init", "-o", str(path))
    assert result.exit_code == 2
    assert result.stderr == f"error: {path}: already exists (use --force to overwrite it)\n"
    assert path.read_text() == "mine\n"
    init(path, "--force")
    assert path.read_text().startswith("#:schema")


def test_init_needs_a_model_for_a_real_target(tmp_path: Path) -> None:
    result = cli("init", "--target", "local", "-o", str(tmp_path / "s.toml"))
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "--model is required for target local" in result.stderr
    assert not (tmp_path / "s.toml").exists()


def test_plan_of_a_systemd_study_shows_the_drop_in_and_the_estimate_without_contacting_anything(
        tmp_path: Path) -> None:
    path = init(tmp_path / "s.toml", "--target", "systemd-ssh", "--model", "Qwen/Qwen3-8B",
                "--draft", "d/E3")
    result = cli("validate", "--plan", str(path))
    assert result.exit_code == 0, result.stderr
    out = result.output
    assert "drop-in /etc/systemd/system/sglang.service.d/50-spectune.conf on " \
           "gpu-host.example" in out
    assert "ExecStart=\n" in out  # clears the unit's own command first
    assert ('ExecStart="/opt/sglang/.venv/bin/python" "-m" "sglang.launch_server" "--model-path" '
            '"Qwen/Qwen3-8B"'
            in out)
    assert '"--speculative-num-steps" "3"' in out  # the baseline is what runs first
    assert "systemctl restart sglang.service" in out and "/health_generate" in out
    # nothing is known of this server yet: an upper bound, and rates that are labelled as another
    # model's
    assert "deploy + ready    15m00s  (at most: startup_timeout" in out \
           and "the totals are upper bounds" in out
    assert "C=1" in out and "C=64" in out
    assert "assumed: the seed campaign's Qwen3.5-122B server on 4 GPUs, not this study's " \
           "model" in out
    # 30 trials of ~16 min do not fit the 8 h timeout.
    assert "Timeout 8h00m: stops new trials after about" in out
    assert "Target check" not in out  # nothing contacted without --check-target


def test_plan_of_a_local_study_shows_the_command_line(tmp_path: Path) -> None:
    path = init(tmp_path / "s.toml", "--target", "local", "--model", "Qwen/Qwen3-8B", "--draft",
                "d/E3")
    out = cli("validate", "--plan", str(path)).output
    assert "python3 -m sglang.launch_server" in out and "--port 30000" in out
    assert "`python3 -m sglang.launch_server --help`" in out  # the preflight
    assert "`python3 -c <resolver>`" in out


def test_plan_of_the_demo_uses_the_simulators_startup_model_and_fits_its_timeout() -> None:
    out = cli("validate", "--plan", str(STUDIES / "simulated.toml")).output
    assert "(the simulator's startup model for this configuration)" in out
    scale = tomllib.loads((STUDIES / "simulated.toml").read_text())["target"]["time_scale"]
    assert f"÷ time_scale {scale:g}" in out
    assert "Timeout 20m00s: the 12 trials fit" in out
    # the phases are priced at the simulator's model of the baseline, not at another model's assumed
    # rates
    assert out.count("the simulator's model of this configuration") == 2 and "assumed:" not in out
    # docs/scoring.md names the demo's time scale as the file has it
    assert f"12 trials at time scale {scale:g})" in (
        STUDIES.parent / "docs" / "scoring.md").read_text()


def test_check_target_of_a_local_study_finds_a_taken_port(tmp_path: Path) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        study = tmp_path / "s.toml"
        study.write_text((STUDIES / "simulated.toml").read_text().replace("port = 0 ",
                                                                          f"port = {port} "))
        taken = cli("validate", "--check-target", str(study))
    assert taken.exit_code == 3
    assert taken.stderr == (
        f"error: port {port} on 127.0.0.1 is already in use (Address already in use); stop what "
        "listens there or choose another port in [target]\n")
    free = cli("validate", "--check-target", str(study))
    assert free.exit_code == 0, free.stderr
    assert f"port {port} on 127.0.0.1 is free" in free.output \
           and "server command found:" in free.output


# ----- storage = "${NAME}" ------------------------------------------------------------------------
def _with_storage(tmp_path: Path, storage: str) -> Path:
    study = tmp_path / "s.toml"
    study.write_text((STUDIES / "simulated.toml").read_text().replace(
        "n_trials = 12", f'n_trials = 12\nstorage = "{storage}"'))
    return study


def test_storage_from_an_unset_variable_is_one_line_naming_file_field_and_variable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPECTUNE_TEST_DB", raising=False)
    study = _with_storage(tmp_path, "${SPECTUNE_TEST_DB}")
    result = cli("validate", str(study))
    assert result.exit_code == 2
    assert result.stderr == (
        f"error: {study}: study.storage: environment variable SPECTUNE_TEST_DB is not set "
        "(the URL reads ${SPECTUNE_TEST_DB})\n")


def test_storage_from_a_variable_is_used_and_its_password_never_printed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECTUNE_TEST_PW", "s3cret-pw")
    study = _with_storage(tmp_path,
                          "postgresql+psycopg://tuner:${SPECTUNE_TEST_PW}@127.0.0.1:1/spectune")
    # port 1: refused at once, and validate now probes the storage
    result = cli("validate", "--plan", str(study))
    assert result.exit_code == 4, result.stderr
    assert "s3cret" not in result.output + result.stderr
    assert "storage postgresql+psycopg://tuner:***@127.0.0.1:1/spectune" in result.stderr
    # not a URL once expanded: the message quotes the file
    monkeypatch.setenv("SPECTUNE_TEST_PW", "s3cret-pw@")
    monkeypatch.setenv("SPECTUNE_TEST_DB", "s3cret-url")
    bad = cli("validate", str(_with_storage(tmp_path, "${SPECTUNE_TEST_DB}")))
    assert bad.exit_code == 2 and "s3cret" not in bad.output + bad.stderr
    assert "study.storage: not a database URL: '${SPECTUNE_TEST_DB}'" in bad.stderr


def test_init_for_the_simulator_writes_its_profiles_model_draft_and_gpus(tmp_path: Path) -> None:
    default = tomllib.loads(init(tmp_path / "a.toml").read_text())
    assert default["target"]["profile"] == "qwen3.5-122b-a10b-eagle3-4x-rtx-pro-6000"
    # the profile's GPUs: at TP 1 the 122B model runs out of memory
    assert default["server"]["flags"]["tp-size"] == 4
    llama = tomllib.loads(init(tmp_path / "b.toml", "--model",
                               "meta-llama/Llama-3.1-8B-Instruct").read_text())
    assert llama["target"]["profile"] == "llama-3.1-8b-eagle3-1x-h100"
    assert llama["server"]["flags"]["speculative-draft-model-path"] \
           == "lmsys/sglang-EAGLE3-LLaMA3.1-Instruct-8B"
    unknown = cli("init", "--model", "Qwen/Qwen3-8B", "-o", str(tmp_path / "c.toml"))
    assert unknown.exit_code == 2 \
           and unknown.stderr.startswith("error: --model: the simulator has no profile of "
                                                                "Qwen/Qwen3-8B (profiles model: ")
    assert not (tmp_path / "c.toml").exists()


def test_init_never_writes_a_file_that_would_not_validate(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text("mine\n")
    result = cli("init", "--algorithm", "BOGUS", "--force", "-o", str(path))
    assert result.exit_code == 2
    assert result.stderr == (f"error: {path} (as written by init): server.flags.speculative-"
                             "algorithm: 'BOGUS' is not a speculative algorithm SGLang knows "
                             "(those of the releases spectune knows: EAGLE, EAGLE3, NEXTN, "
                             "STANDALONE, NGRAM, DFLASH, DSPARK, UNO)\n")
    assert path.read_text() == "mine\n" and sorted(p.name for p in tmp_path.iterdir()) == ["s.toml"]


def test_ci_target_sets_the_request_counts_and_refuses_nan_and_inf(tmp_path: Path) -> None:
    study = tmp_path / "s.toml"
    text = (STUDIES / "simulated.toml").read_text()

    def with_target(value: str) -> Path:
        study.write_text(text.replace('max_tokens = 256\n',
                                      f'max_tokens = 256\nci_target = {value}\n'))
        return study

    out = cli("validate", "--plan", str(with_target("0.01"))).output
    # ±1 % on a 50/50 score: C=1 20 requests, C=64 435 (tuner/study/precision.py), plus the warmups
    assert "C=1" in out and "21 requests × ≤ 256 tokens" in out \
           and "443 requests × ≤ 256 tokens" in out
    # the demo's own counts (4 and 128) are floors: ±3 % needs 5 at C=1 and is met by 128 at C=64
    out = cli("validate", "--plan", str(with_target("0.03"))).output
    assert "6 requests × ≤ 256 tokens" in out and "136 requests × ≤ 256 tokens" in out
    for bad in ("nan", "inf", "0", "1.5"):
        result = cli("validate", str(with_target(bad)))
        assert result.exit_code == 2, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {study}: benchmark.ci_target: "), \
               lines
