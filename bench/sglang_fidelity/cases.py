"""The command lines of the fidelity fixture: every case class of the rules, on fake models and
GPUs.

Shared by the generator (which runs them through the real SGLang) and read back from the fixture by
the tests. ``@model:<key>`` in an argv stands for a local directory holding ``ARCHITECTURES[key]``
as its config.json.
"""

from __future__ import annotations

import itertools
from typing import Any

_LLAMA = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
          "num_attention_heads": 32,
          "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 128256,
          "max_position_embeddings": 131072, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
          "torch_dtype": "bfloat16", "head_dim": 128}

#: Fake models: a config.json each, so nothing downloads. Grok and Mistral reuse Llama's shape (only
#: the architecture name matters for the speculative auto-choice).
ARCHITECTURES: dict[str, dict[str, Any]] = {
    "llama": {**_LLAMA, "architectures": ["LlamaForCausalLM"]},
    "qwen": {**_LLAMA, "model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"],
             "vocab_size": 152064, "max_position_embeddings": 32768},
    "grok": {**_LLAMA, "architectures": ["Grok1ForCausalLM"]},
    "mistral": {**_LLAMA, "model_type": "mistral", "architectures": ["MistralForCausalLM"],
                "max_position_embeddings": 32768},
}

GPUS: dict[str, dict[str, Any]] = {
    "sm90": {"name": "NVIDIA H100 80GB HBM3", "capability": (9, 0), "memory_mb": 81559.0},
    "sm120": {"name": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "capability": (12, 0),
              "memory_mb": 97887.0},
    "sm100": {"name": "NVIDIA B200", "capability": (10, 0), "memory_mb": 183359.0},
}

M = ["--model-path", "@model:llama"]
D = ["--speculative-draft-model-path", "@model:llama"]


def _case(cls: str, argv: list[str], gpu: str = "sm90") -> dict[str, Any]:
    return {"class": cls, "gpu": gpu, "argv": argv}


def _tree(steps: int, topk: int, draft: int) -> list[str]:
    return ["--speculative-num-steps", str(steps), "--speculative-eagle-topk", str(topk),
            "--speculative-num-draft-tokens", str(draft)]


def cases() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    e3 = ["--speculative-algorithm", "EAGLE3", *D]
    # Plain trees over backends and page sizes, on both GPU kinds.
    for gpu, backend, page, (steps, topk, draft) in itertools.product(
            ("sm90", "sm120"),
            (None, "fa3", "flashinfer", "triton", "trtllm_mha", "flashmla", "torch_native",
             "flex_attention"), (None, 1, 16, 64),
            ((3, 1, 4), (5, 4, 8), (2, 2, 6))):
        argv = [*M, *e3, *_tree(steps, topk, draft)]
        if backend:
            argv += ["--attention-backend", backend]
        if page:
            argv += ["--page-size", str(page)]
        out.append(_case("tree-backend-page", argv, gpu))
    # Split prefill/decode backends (SGLang checks decode first).
    for which, backend, topk in itertools.product(("--prefill-attention-backend",
                                                   "--decode-attention-backend"),
                                                  ("trtllm_mha", "triton", "fa3", "flashinfer"),
                                                  (1, 4)):
        out.append(_case("split-backends",
                         [*M, *e3, *_tree(3, topk, 4 if topk == 1 else 8), which, backend]))
    out.append(_case("split-backends",
                     [*M, *e3, *_tree(3, 4, 8), "--prefill-attention-backend", "trtllm_mha",
                      "--decode-attention-backend", "triton"]))
    # Draft attention backend.
    for backend in ("torch_native", "triton", "flashinfer", "fa3", "trtllm_mha"):
        out.append(_case("draft-backend",
                         [*M, *e3, *_tree(3, 1, 4), "--speculative-draft-attention-backend",
                          backend]))
    # Hardware gates: the MLA and TRTLLM backends on each GPU kind.
    for gpu, backend in itertools.product(GPUS, ("trtllm_mla", "cutedsl_mla", "trtllm_mha", "fa4",
                                                 "flashmla")):
        out.append(_case("hardware-gate", [*M, "--attention-backend", backend], gpu))
        out.append(_case("hardware-gate",
                         [*M, *e3, *_tree(3, 1, 4), "--attention-backend", backend], gpu))
    # Adaptive steps.
    for steps in (None, 0, 1, 2, 3, 4, 5, 7, 8):
        tree = [] if steps is None else _tree(steps, 1, steps + 1)
        out.append(_case("adaptive", [*M, "--speculative-algorithm", "EAGLE", *D,
                                      "--speculative-adaptive", *tree]))
    out.append(_case("adaptive",
                     [*M, "--speculative-algorithm", "EAGLE", *D, "--speculative-adaptive",
                      *_tree(3, 2, 6)]))
    # Rejection sampling.
    for topk in (1, 2, 4):
        for algo in ("EAGLE", "EAGLE3", "STANDALONE"):
            out.append(_case("rejection-sampling", [*M, "--speculative-algorithm", algo, *D,
                                                    *_tree(3, topk, 4 if topk == 1 else 8),
                                                    "--speculative-use-rejection-sampling"]))
    # Draft window / sink.
    for window, sink in ((0, None), (-1, None), (1, None), (256, None), (256, 4), (None, 4),
                         (256, -1)):
        argv = [*M, *e3, *_tree(3, 1, 4)]
        if window is not None:
            argv += ["--speculative-draft-window-size", str(window)]
        if sink is not None:
            argv += ["--speculative-draft-sink-size", str(sink)]
        out.append(_case("draft-window", argv))
    # NGRAM.
    for breadth, draft, backend, page in itertools.product((1, 4, 10), (None, 8),
                                                           (None, "flashinfer", "fa3"), (None, 16)):
        argv = [*M, "--speculative-algorithm", "NGRAM"]
        if breadth != 10:
            argv += ["--speculative-ngram-max-bfs-breadth", str(breadth)]
        if draft:
            argv += ["--speculative-num-draft-tokens", str(draft)]
        if backend:
            argv += ["--attention-backend", backend]
        if page:
            argv += ["--page-size", str(page)]
        out.append(_case("ngram", argv))
    out.append(_case("ngram", [*M, "--speculative-algorithm", "NGRAM", "--attn-dp-size", "2",
                               "--tp-size", "2"]))
    # Only the algorithm given: the auto-chosen triple by architecture (and what it does to
    # trtllm_mha).
    for model, algo, backend in itertools.product(ARCHITECTURES,
                                                  ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE"),
                                                  (None, "trtllm_mha", "triton")):
        argv = ["--model-path", f"@model:{model}", "--speculative-algorithm", algo, *D]
        if backend:
            argv += ["--attention-backend", backend]
        out.append(_case("auto-choose", argv))
    # Bounds SGLang does not check, stray flags, aliases, converters, argparse errors.
    for tree in ((0, 1, 1), (1, 1, 1), (3, 1, 1), (3, 1, 9), (0, 0, 0), (3, 0, 4), (1, 4, 5),
                 (2, 4, 30)):
        out.append(_case("bounds", [*M, *e3, *_tree(*tree)]))
    for flag, value in (("--speculative-num-steps", "3"), ("--speculative-eagle-topk", "2"),
                        ("--speculative-num-draft-tokens", "4"),
                        ("--speculative-draft-model-path", "@model:llama")):
        out.append(_case("stray", [*M, flag, value]))
    out.append(_case("stray", [*M, *_tree(3, 1, 4)]))
    out.append(_case("partial", [*M, *e3, "--speculative-eagle-topk", "1"]))
    out.append(_case("partial", [*M, *e3, "--speculative-num-steps", "3"]))
    out.append(_case("partial",
                     [*M, *e3, "--speculative-num-steps", "3", "--speculative-eagle-topk", "4"]))
    for algo in ("eagle3", "nextn", "bogus", "DFLASH"):
        out.append(_case("algorithm-name", [*M, "--speculative-algorithm", algo, *D]))
    for spec in ([], [*e3, *_tree(3, 1, 4)], [*e3, *_tree(3, 4, 8)]):
        out.append(_case("alias", [*M, *spec, "--attention-backend", "compressed"]))
    for length in ("128K", "128k", "131072", "1M", "32000"):
        out.append(_case("converter", [*M, "--context-length", length]))
    for tokens in ("1M", "1m", "100k", "2G", "5000"):
        out.append(_case("converter", [*M, "--max-total-tokens", tokens]))
    out.append(_case("required", ["--speculative-algorithm", "EAGLE3"]))
    out.append(_case("required", []))
    out.append(_case("argparse", [*M, "--cuda-graph-max-bs", "8"]))
    out.append(_case("argparse", [*M, "--page-size", "x"]))
    out.append(_case("argparse", [*M, "--no-such-flag"]))
    out.append(_case("running", [*M, *e3, *_tree(3, 1, 4), "--max-running-requests", "64"]))
    out.append(_case("running", [*M, "--max-running-requests", "64"]))
    out.append(_case("graphs", [*M, *e3, *_tree(3, 1, 4), "--cuda-graph-max-bs-decode", "32"]))
    out.append(_case("graphs", [*M, "--disable-cuda-graph"]))
    return out
