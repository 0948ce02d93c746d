"""Record what the real SGLang does with a few hundred command lines: the fidelity fixture.

Run by hand, with the SGLang wheel in a throw-away venv (recipe: docs/sglang-fidelity.md)::

    /tmp/sglvenv/bin/python bench/sglang_fidelity/generate.py --out tests/fixtures/sglang-0.5.23-fidelity.json

For every command line it runs SGLang's own ``prepare_server_args`` (argparse, exit 2 on bad flags),
``ServerArgs.resolve_once()`` (the arg_groups hooks) and ``check_server_args()`` — what ``sglang serve`` does
before it touches a GPU — and records the verdict (exit code and the error line SGLang prints) and the effective
values. Nothing downloads: models are local directories holding only a ``config.json``. The GPU is faked
(``torch.cuda`` answers plus SGLang's own ``override_platform``), one worker process per GPU kind, because some
of SGLang's probes are cached per process.

This file runs under the wheel's venv, not spectune's: it imports nothing from ``tuner``.
"""

from __future__ import annotations

import argparse
import contextlib
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


def _fake_gpu(gpu: str) -> None:
    """Make SGLang believe it runs on ``gpu``: torch.cuda probes + SGLang's own platform override."""
    import stubs  # noqa: F401  (kernel packages that only exist for CUDA: import stand-ins)
    import torch

    (major, minor), name, mem_mb = GPUS[gpu]["capability"], GPUS[gpu]["name"], GPUS[gpu]["memory_mb"]
    torch.cuda.is_available = lambda: True  # type: ignore[assignment]
    torch.version.cuda = "12.9"  # type: ignore[misc]
    torch.cuda.device_count = lambda: 8  # type: ignore[assignment]
    torch.cuda.get_device_capability = lambda *a, **k: (major, minor)  # type: ignore[assignment]
    torch.cuda.get_device_name = lambda *a, **k: name  # type: ignore[assignment]
    from sglang.srt.utils import common

    common.get_nvgpu_memory_capacity = lambda: mem_mb
    from sglang.srt.runtime_context import override_platform

    override_platform(
        is_cuda=True, is_hip=False, is_npu=False, is_xpu=False, is_musa=False, is_mps=False,
        is_sm90=(major, minor) == (9, 0), is_sm100=major == 10, is_sm100_or_sm110=major in (10, 11),
        is_sm110=major == 11, is_sm120=major == 12, is_blackwell=major in (10, 11, 12),
        is_hopper_with_cuda_12_3=major == 9, has_amx=False, has_flashinfer=True,
        device_sm=major * 10 + minor, device_capability=(major, minor),
    ).install()


def _effective(server_args: Any) -> dict[str, Any]:
    from sglang.srt.arg_groups.overrides import resolving_view

    v = resolving_view(server_args)
    graphs = v.cuda_graph_config
    return {
        "speculative_algorithm": v.speculative_algorithm,
        "speculative_num_steps": v.speculative_num_steps,
        "speculative_eagle_topk": v.speculative_eagle_topk,
        "speculative_num_draft_tokens": v.speculative_num_draft_tokens,
        "page_size": v.page_size,
        "attention_backend": v.attention_backend,
        "prefill_attention_backend": v.prefill_attention_backend,
        "decode_attention_backend": v.decode_attention_backend,
        "speculative_draft_attention_backend": v.speculative_draft_attention_backend,
        "cuda_graph_disabled": str(graphs.decode.backend) in ("disabled", "Backend.DISABLED"),
        "cuda_graph_max_bs": graphs.decode.max_bs,
        "max_running_requests": v.max_running_requests,
        "context_length": v.context_length,
    }


def _error_line(exc: BaseException) -> str:
    """The last line of the traceback Python prints for ``exc`` (a bare assert prints its class name)."""
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
        return {"verdict": "refused", "exit_code": int(exc.code or 0), "error": lines[-1] if lines else ""}
    try:
        server_args.resolve_once()
        server_args.check_server_args()
    except Exception as exc:  # what `sglang serve` dies of: a traceback, exit 1
        return {"verdict": "refused", "exit_code": 1, "error": _error_line(exc)}
    return {"verdict": "accepted", "exit_code": None, "error": None, "effective": _effective(server_args)}


def _worker(gpu: str, models: dict[str, str], indices: list[int]) -> list[dict[str, Any]]:
    import logging

    _fake_gpu(gpu)
    logging.disable(logging.CRITICAL)
    all_cases = cases()
    out = []
    for i in indices:
        case = all_cases[i]
        argv = [models[a.removeprefix(MODEL_TOKEN)] if a.startswith(MODEL_TOKEN) else a for a in case["argv"]]
        out.append({"index": i, **run_one(argv)})
    return out


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

    import sglang

    all_cases = cases()
    results: dict[int, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        models = _fake_models(Path(tmp) / "models")
        for gpu in GPUS:
            indices = [i for i, c in enumerate(all_cases) if c["gpu"] == gpu]
            part = Path(tmp) / f"{gpu}.json"
            worker = f"{gpu}|{json.dumps(models)}|{','.join(map(str, indices))}"
            subprocess.run([sys.executable, __file__, "--out", str(part), "--worker", worker], check=True)
            for row in json.loads(part.read_text(encoding="utf-8")):
                results[row.pop("index")] = row
    fixture = {
        "sglang_version": sglang.__version__,
        "generator": "bench/sglang_fidelity/generate.py",
        "architectures": {k: v["architectures"][0] for k, v in ARCHITECTURES.items()},
        "gpus": {k: {"name": v["name"], "capability": list(v["capability"])} for k, v in GPUS.items()},
        "cases": [{**case, **results[i]} for i, case in enumerate(all_cases)],
    }
    opts.out.parent.mkdir(parents=True, exist_ok=True)
    opts.out.write_text(json.dumps(fixture, indent=1) + "\n", encoding="utf-8")
    accepted = sum(1 for c in fixture["cases"] if c["verdict"] == "accepted")
    print(f"{len(all_cases)} command lines: {accepted} accepted, {len(all_cases) - accepted} refused → {opts.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
