"""Record what the real SGLang does with a few hundred command lines: the fidelity fixture.

Run by hand under one release's Python (bench/sglang_versions/env.py builds them;
docs/sglang-fidelity.md)::

    R=/work/.cache/sglang; PYTHONPATH=$(cat $R/releases/0.5.23/.pythonpath) $R/base/bin/python \
        bench/sglang_fidelity/generate.py --out tests/fixtures/sglang-0.5.23-fidelity.json

or for every release at once: ``python3.11 bench/sglang_versions/fixtures.py``.

For every command line it runs SGLang's own ``prepare_server_args`` (argparse, exit 2 on bad flags),
``ServerArgs.resolve_once()`` (the arg_groups hooks) and ``check_server_args()`` — what ``sglang
serve`` does before it touches a GPU — and records the verdict (exit code and the error line SGLang
prints) and the effective values. Nothing downloads: models are local directories holding only a
``config.json``. The GPU is faked (``torch.cuda`` answers plus, from SGLang 0.5.20, its own
``override_platform``: ``_fake_gpu``), one worker process per GPU kind, because some of SGLang's
probes are cached per process.

This file runs under the wheel's venv, not spectune's: it imports nothing from ``tuner``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from cases import ARCHITECTURES, GPUS, cases  # noqa: E402

MODEL_TOKEN = "@model:"  # argv placeholder for a fake model directory, e.g. "@model:llama"


def _fake_models(root: Path) -> dict[str, str]:
    paths = {}
    for key, config in ARCHITECTURES.items():
        d = root / key
        d.mkdir(parents=True, exist_ok=True)
        (d / "config.json").write_text(json.dumps(config), encoding="utf-8")
        paths[key] = str(d)
    return paths


def _resolver_script() -> Any:
    """tuner/targets/resolver_script.py loaded by path: the GPU is described to SGLang exactly as
    the resolver does it on a target (this file runs under the wheel's venv, where spectune is not
    installed)."""
    import importlib.util

    path = HERE.parents[1] / "tuner" / "targets" / "resolver_script.py"
    spec = importlib.util.spec_from_file_location("spectune_resolver_script", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _fake_gpu(gpu: str) -> str:
    """Make SGLang believe it runs on ``gpu`` through the resolver's own seams; which ones this
    release has.

    ``present`` patches ``torch.cuda`` before SGLang is imported (every release reads it; up to
    0.5.20 once, at import); ``present_sglang`` patches SGLang's memory probe
    (``sglang.srt.utils.common``, or ``sglang.srt.utils`` in 0.5.3 and older) and, from 0.5.20,
    installs SGLang's own ``override_platform``. flashinfer only ships CUDA builds; on a GPU host it
    is installed, so it is stood in for here like ``sgl_kernel``.
    """
    import stubs

    stubs.STUB_ROOTS = (*stubs.STUB_ROOTS, "flashinfer")
    script = _resolver_script()
    (major,
     minor), name, mem_mb = GPUS[gpu]["capability"], GPUS[gpu]["name"], GPUS[gpu]["memory_mb"]
    rows = [(name, major, minor, int(mem_mb))] * 8
    seams: list[str] = script.present(rows)
    import sglang  # noqa: F401  (present_sglang patches modules of the imported package)

    script.present_sglang(rows, seams)
    return " + ".join(seams)


def _effective(server_args: Any) -> dict[str, Any]:
    """The values SGLang resolved. Releases without ``arg_groups`` (before 0.5.14) or a per-phase
    ``cuda_graph_config`` (before 0.5.20) keep them on ``ServerArgs`` itself; absent ones are
    None."""
    try:
        from sglang.srt.arg_groups.overrides import resolving_view

        v = resolving_view(server_args)
    except ImportError:
        v = server_args
    decode = getattr(getattr(v, "cuda_graph_config", None), "decode", None)
    if decode is not None:
        disabled = str(decode.backend) in ("disabled", "Backend.DISABLED")
        max_bs = decode.max_bs
    else:
        disabled = bool(getattr(v, "disable_cuda_graph", False))
        max_bs = getattr(v, "cuda_graph_max_bs", None)
    fields = ("speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
              "speculative_num_draft_tokens", "page_size", "attention_backend",
              "prefill_attention_backend",
              "decode_attention_backend", "speculative_draft_attention_backend")
    return {**{f: getattr(v, f, None) for f in fields}, "cuda_graph_disabled": disabled,
            "cuda_graph_max_bs": max_bs,
            "max_running_requests": getattr(v, "max_running_requests", None),
            "context_length": getattr(v, "context_length", None)}


def _error_line(exc: BaseException) -> str:
    """The last line of the traceback Python prints for ``exc`` (a bare assert prints its class
    name)."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def run_one(argv: list[str]) -> dict[str, Any]:
    from sglang.srt.server_args import prepare_server_args

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            server_args = prepare_server_args(argv)
    except SystemExit as exc:  # argparse: usage + "sglang serve: error: ..." on stderr
        lines = [line for line in err.getvalue().splitlines() if line.strip()]
        return {"verdict": "refused", "exit_code": int(exc.code or 0), "error": lines[-1] if lines
                else ""}
    # before 0.5.20 ServerArgs checks in __post_init__, inside prepare_server_args
    except Exception as exc:
        return {"verdict": "refused", "exit_code": 1, "error": _error_line(exc)}
    try:
        # 0.5.20 and newer; older releases resolve in __post_init__
        if hasattr(server_args, "resolve_once"):
            server_args.resolve_once()
        server_args.check_server_args()
    except Exception as exc:  # what `sglang serve` dies of: a traceback, exit 1
        return {"verdict": "refused", "exit_code": 1, "error": _error_line(exc)}
    return {"verdict": "accepted", "exit_code": None, "error": None,
            "effective": _effective(server_args)}


def _worker(gpu: str, models: dict[str, str], indices: list[int]) -> dict[str, Any]:
    import logging

    seam = _fake_gpu(gpu)
    logging.disable(logging.CRITICAL)
    all_cases = cases()
    out = []
    for i in indices:
        case = all_cases[i]
        argv = [models[a.removeprefix(MODEL_TOKEN)] if a.startswith(MODEL_TOKEN) else a
                for a in case["argv"]]
        out.append({"index": i, **run_one(argv)})
    return {"seam": seam, "results": out}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--worker", help=argparse.SUPPRESS)  # internal: gpu:models_json:indices
    opts = ap.parse_args()
    if opts.worker:
        gpu, models_json, idx = opts.worker.split("|")
        result = _worker(gpu, json.loads(models_json), [int(i) for i in idx.split(",") if i])
        opts.out.write_text(json.dumps(result), encoding="utf-8")
        return 0

    # first: sglang's package __init__ imports torchvision in some releases
    importlib.import_module("stubs")
    import sglang

    all_cases = cases()
    results: dict[int, dict[str, Any]] = {}
    seams: set[str] = set()
    with tempfile.TemporaryDirectory() as tmp:
        models = _fake_models(Path(tmp) / "models")
        for gpu in GPUS:
            indices = [i for i, c in enumerate(all_cases) if c["gpu"] == gpu]
            part = Path(tmp) / f"{gpu}.json"
            worker = f"{gpu}|{json.dumps(models)}|{','.join(map(str, indices))}"
            subprocess.run([sys.executable, __file__, "--out", str(part), "--worker", worker],
                           check=True)
            answer = json.loads(part.read_text(encoding="utf-8"))
            seams.add(answer["seam"])
            for row in answer["results"]:
                results[row.pop("index")] = row
    fixture = {
        "sglang_version": sglang.__version__,
        "generator": "bench/sglang_fidelity/generate.py",
        "platform_seam": " + ".join(sorted(seams)),
        "architectures": {k: v["architectures"][0] for k, v in ARCHITECTURES.items()},
        "gpus": {k: {"name": v["name"], "capability": list(v["capability"])} for k,
                 v in GPUS.items()},
        "cases": [{**case, **results[i]} for i, case in enumerate(all_cases)],
    }
    opts.out.parent.mkdir(parents=True, exist_ok=True)
    opts.out.write_text(json.dumps(fixture, indent=1) + "\n", encoding="utf-8")
    accepted = sum(1 for c in fixture["cases"] if c["verdict"] == "accepted")
    print(f"{len(all_cases)} command lines: {accepted} accepted, {len(all_cases) - accepted} "
          f"refused → {opts.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
