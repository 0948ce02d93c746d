"""The real resolver script (tuner/targets/resolver_script.py, through ``SGLangResolver`` and a
child process, as the ``local`` target runs it) against the real SGLang wheels of several releases:
verdicts, effective values, the draft attention backend table, the option table, and the setup
errors a user meets (no GPU visible to SGLang, a missing module).

Heavy tier (``-m sglang_real``): it needs the shared environment of real releases that
``bench/sglang_versions/env.py`` builds (default /work/.cache/sglang, override
$SPECTUNE_SGLANG_CACHE: a CPU-only venv plus one unpacked wheel per release,
docs/sglang-fidelity.md) and is skipped, saying so, where that is absent. CUDA-only packages no CPU
host can install (``sgl_kernel``, ``flashinfer``, and torchvision, which does not load against a CPU
torch) are stood in by bench/sglang_fidelity/stubs.py, imported through a ``sitecustomize`` — as on
a GPU host, where they are installed. The GPU is an H100 named by a stand-in ``nvidia-smi`` (a B200
through ``[target] gpu`` for one release): the resolver shows it to SGLang as it does on a GPU host,
with the device itself hidden.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tuner.sglang.loading import (
    DECODE_TEMPLATE,
    DRAFT_DECODE_BACKENDS,
    DRAFT_EXTEND_BACKENDS,
    EXTEND_TEMPLATE,
)
from tuner.targets import resolver_script
from tuner.targets.resolver import RESOLVER_SCRIPT, ProcessPipe, SGLangResolver, resolver_env
from tuner.targets.setup_errors import SGLangCannotJudge

# The module fixture imports four releases (~15 s of CPU each): on a loaded host that outruns the
# default 300 s.
pytestmark = [pytest.mark.sglang_real, pytest.mark.slow, pytest.mark.timeout(900)]

CACHE = Path(os.environ.get("SPECTUNE_SGLANG_CACHE", "/work/.cache/sglang"))
ROOT = Path(__file__).parents[3]
STUBS = ROOT / "bench" / "sglang_fidelity"
#: The releases asked (a spread over the supported range; each costs one import of SGLang, ~15 s of
#: CPU), the number of options their own ``ServerArgs.add_cli_args`` defines, and the GPU shown to
#: SGLang.
RELEASES = {"0.5.10": (354, "nvidia-smi"), "0.5.14": (420, "nvidia-smi"),
            "0.5.20": (494, "target-gpu"), "0.5.23": (531, "nvidia-smi")}
LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
         "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 32,
         "num_key_value_heads": 8,
         "vocab_size": 128256, "max_position_embeddings": 131072, "rms_norm_eps": 1e-5,
         "rope_theta": 500000.0, "torch_dtype": "bfloat16"}


def _pythonpath(release: str) -> str | None:
    marker = CACHE / "releases" / release / ".pythonpath"
    return marker.read_text().strip() if marker.exists() else None


if not (CACHE / "base" / "bin" / "python").exists():
    pytest.skip(f"no real SGLang environment at {CACHE} (bench/sglang_versions/env.py builds it)",
                allow_module_level=True)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("real-sglang")
    (root / "site").mkdir()
    (root / "site" / "sitecustomize.py").write_text(
        f"import sys\nsys.path.insert(0, {str(STUBS)!r})\nimport stubs\n"
        "stubs.STUB_ROOTS = (*stubs.STUB_ROOTS, 'flashinfer')\n")
    (root / "bin").mkdir()
    smi = root / "bin" / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'NVIDIA H100 80GB HBM3, 9.0, 81559'\n")
    smi.chmod(0o755)
    (root / "llama").mkdir()
    (root / "llama" / "config.json").write_text(json.dumps(LLAMA))
    return root


def start(workdir: Path, release: str, *, gpu: str | None = "nvidia-smi",
          stubs: bool = True) -> SGLangResolver | None:
    """The resolver of a target whose Python runs ``release``, as LocalTarget starts it."""
    pythonpath = _pythonpath(release)
    if pythonpath is None:
        pytest.skip(f"release {release} is not in {CACHE}/releases")
    path = [p for p in os.environ["PATH"].split(os.pathsep)
            if not (Path(p) / "nvidia-smi").exists()]
    if gpu == "nvidia-smi":
        path.insert(0, str(workdir / "bin"))
    target_gpu = "NVIDIA B200|10.0|183359|1" if gpu == "target-gpu" else None
    env = {**os.environ, **resolver_env(target_gpu), "PATH": os.pathsep.join(path),
           "PYTHONPATH": os.pathsep.join([pythonpath, *([str(workdir / "site")] if stubs else [])])}
    python = str(CACHE / "base" / "bin" / "python")
    # Imports take ~15 s of CPU each; on a loaded 2-core CI host several at once take minutes.
    return SGLangResolver.start(lambda: ProcessPipe.spawn([python, "-c", RESOLVER_SCRIPT], env),
                                where=release, start_timeout_s=600)


@pytest.fixture(scope="module")
def resolvers(workdir: Path) -> Iterator[dict[str, SGLangResolver]]:
    available = [r for r in RELEASES if _pythonpath(r) is not None]
    if len(available) < len(RELEASES):
        pytest.skip(
            f"releases missing from {CACHE}/releases: {sorted(set(RELEASES) - set(available))}")
    # Started side by side: each spends its time importing SGLang (and torch).
    with ThreadPoolExecutor(2) as pool:
        started = dict(zip(available,
                           pool.map(lambda r: start(workdir, r, gpu=RELEASES[r][1]), available),
                           strict=True))
    yield {r: s for r, s in started.items() if s is not None}
    for resolver in started.values():
        if resolver is not None:
            resolver.close()


def eagle3(model: Path, *extra: str, steps: int = 3, topk: int = 4, draft: int = 8) -> list[str]:
    return ["--model-path", str(model), "--speculative-algorithm", "EAGLE3",
            "--speculative-draft-model-path",
            str(model), "--speculative-num-steps", str(steps), "--speculative-eagle-topk",
            str(topk), "--speculative-num-draft-tokens", str(draft), *extra]


@pytest.mark.parametrize("release", sorted(RELEASES))
def test_each_release_judges_with_its_own_code(resolvers: dict[str, SGLangResolver], workdir: Path,
                                               release: str) -> None:
    resolver = resolvers[release]
    options, gpu = RELEASES[release]
    assert resolver.version == release
    assert resolver.gpu == ("NVIDIA B200" if gpu == "target-gpu" else "NVIDIA H100 80GB HBM3")
    assert "torch.cuda" in resolver.seams
    llama = workdir / "llama"
    # An EAGLE-3 tree as given: accepted, with the request cap SGLang sets for speculative decoding.
    accepted = resolver.resolve(eagle3(llama))
    assert accepted is not None and accepted.accepted, accepted
    effective = accepted.effective or {}
    assert (effective["speculative_num_steps"], effective["speculative_eagle_topk"],
            effective["speculative_num_draft_tokens"]) == (3, 4, 8)
    assert effective["max_running_requests"] == 48
    # torch_native passes every argument check, and SGLang refuses it only while loading the draft
    # model (its draft attention backend table): judged here, before anything is deployed.
    refused = resolver.resolve(eagle3(llama, "--attention-backend", "torch_native", topk=1,
                                      draft=4))
    assert refused is not None and not refused.accepted
    assert refused.error == "ValueError: EAGLE is not supported in decode attention backend " \
                            "torch_native"
    assert refused.stage == "loading the draft model"
    # argparse's own refusal (exit 2).
    unknown = resolver.resolve(["--model-path", str(llama), "--no-such-flag"])
    assert unknown is not None and unknown.exit_code == 2 \
           and "unrecognized arguments: --no-such-flag" in (
        unknown.error or "")
    # The release's own option table.
    table = resolver.option_table()
    assert table is not None and table["sglang_version"] == release \
           and len(table["options"]) == options


def test_the_gpu_decides_sglangs_defaults(resolvers: dict[str, SGLangResolver],
                                          workdir: Path) -> None:
    """H100 (nvidia-smi) and B200 ([target] gpu) get the defaults each release picks for them."""
    plain = ["--model-path", str(workdir / "llama")]
    hopper = resolvers["0.5.23"].resolve(plain)
    assert hopper is not None and hopper.effective is not None
    assert (hopper.effective["attention_backend"], hopper.effective["page_size"]) == ("fa3", 1)
    blackwell = resolvers["0.5.20"].resolve(plain)
    assert blackwell is not None and blackwell.effective is not None
    # fa3 is Hopper's; Blackwell gets another default
    assert blackwell.effective["attention_backend"] != "fa3"


def test_the_rules_draft_backend_tables_are_the_real_ones() -> None:
    """Where SGLang cannot be asked, spectune's copy of 0.5.23's draft backend table judges
    (tuner/sglang/ loading.py): it is the table the resolver reads from the real wheel's source (no
    import: cheap)."""
    older = ("0.5.3", "0.5.6.post2", "0.5.10", "0.5.14", "0.5.17", "0.5.20", "0.5.22")
    missing = [r for r in ("0.5.23", *older) if not (CACHE / "releases" / r / "sglang").is_dir()]
    if missing:  # as the fixtures do: an environment built for fewer releases skips, saying which
        pytest.skip(f"releases missing from {CACHE}/releases: {missing}")
    source = CACHE / "releases" / "0.5.23" / "sglang" / "srt" / "speculative" / "draft_utils.py"
    tables = {kind: (set(keys), template) for kind, keys,
              template in resolver_script.tables_in(str(source))}
    assert tables == {"decode": (set(DRAFT_DECODE_BACKENDS), DECODE_TEMPLATE),
                      "extend": (set(DRAFT_EXTEND_BACKENDS), EXTEND_TEMPLATE)}
    for release in older:
        speculative = CACHE / "releases" / release / "sglang" / "srt" / "speculative"
        found = resolver_script.tables_in(str(speculative / "draft_utils.py")) if (
            speculative / "draft_utils.py").exists() else []
        found = found or resolver_script.tables_in(str(speculative / "eagle_worker.py"))
        assert [kind for kind, _, _ in found] == ["decode", "extend"], release
        assert all("fa3" in keys and "torch_native" not in keys for _, keys, _ in found), release


def test_no_gpu_visible_to_sglang_is_a_setup_error(workdir: Path) -> None:
    resolver = start(workdir, "0.5.23", gpu=None)
    assert resolver is not None and resolver.gpu is None
    try:
        with pytest.raises(SGLangCannotJudge,
                           match=r"SGLang sees no GPU \(RuntimeError: No accelerator") as info:
            resolver.resolve(["--model-path", str(workdir / "llama")])
        assert info.value.exit_code == 3
    finally:
        resolver.close()


def test_a_missing_module_is_a_setup_error(workdir: Path) -> None:
    with pytest.raises(SGLangCannotJudge,
                       match=r"a module SGLang imports is missing \((sgl_kernel|torchvision|"
                             r"flashinfer)\)"):
        start(workdir, "0.5.14", stubs=False)
