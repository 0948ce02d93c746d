"""The startup-failure classifier over log tails as SGLang 0.5.23 writes them."""

from __future__ import annotations

import pytest

from tuner.targets.classify import ExitInfo, classify

USAGE = "usage: launch_server.py [-h] --model-path MODEL_PATH [--tokenizer-path TOKENIZER_PATH]\n"
START = (
    "[2025-11-30 10:00:01] server_args=ServerArgs(model_path='Qwen/Qwen3.5-122B-A10B', tp_size=4, "
    "...)\n[2025-11-30 10:00:05 TP0] Load weight begin. avail mem=94.50 GB\n"
    "[2025-11-30 10:01:05 TP0] Load weight end. elapsed=60.1 s, type=Qwen3MoeForCausalLM, mem "
    "usage=61.20 GB.\n[2025-11-30 10:01:06 TP0] KV Cache is allocated. dtype: torch.bfloat16, "
    "#tokens: 812345, KV size: 18.3 GB\n"
)
TRACEBACK = ('Traceback (most recent call last):\n  File "<frozen runpy>", line 198, in '
             '_run_module_as_main\n')

CASES = [
    ("unrecognized",
     USAGE + "launch_server.py: error: unrecognized arguments: --speculative-foo 3\n", ExitInfo(2),
     "invalid-flags", "unrecognized arguments"),
    ("ambiguous",
     USAGE + "launch_server.py: error: ambiguous option: --cuda-graph-max-bs could match "
     "--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill\n", ExitInfo(2), "invalid-flags",
     "ambiguous option"),
    ("bad choice",
     USAGE + "launch_server.py: error: argument --attention-backend: invalid choice: 'x' "
     "(choose from 'fa3', 'flashinfer')\n", ExitInfo(2), "invalid-flags", "invalid choice"),
    ("bare assertion",
     TRACEBACK + '  File "sglang/srt/arg_groups/speculative_hook.py", line 88, in '
     "_handle_eagle_family\n    assert self.speculative_num_steps is not None\nAssertionError\n",
     ExitInfo(1), "invalid-flags", "AssertionError"),
    ("validation",
     TRACEBACK + "ValueError: speculative_eagle_topk(4) > 1 requires page_size == 1 with the "
     "flashinfer backend\n", ExitInfo(1), "invalid-flags", "ValueError: speculative_eagle_topk"),
    ("graph oom", START + "[2025-11-30 10:01:07 TP0] Capture target verify CUDA graph begin. "
                          "bs=[1, 2, 4, 8]\n" + TRACEBACK
     + "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate "
                   "2.10 GiB. GPU 0 has "
     "a total capacity of 95.00 GiB of which 1.20 GiB is free.\nPossible solutions:\n", ExitInfo(1),
     "out-of-memory", "Capture cuda graph failed"),
    ("weights oom", START.splitlines()[0] + "\n" + START.splitlines()[1] + "\n" + TRACEBACK
     + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB.\n", ExitInfo(1),
     "out-of-memory", "OutOfMemoryError"),
    ("cuda error oom",
     START + "RuntimeError: CUDA error: out of memory\nCUDA kernel errors might be asynchronously "
     "reported\n", ExitInfo(1), "out-of-memory", "CUDA error: out of memory"),
    ("kv pool",
     START.splitlines()[1] + "\n" + TRACEBACK + "RuntimeError: Not enough memory. Please try to "
     "increase --mem-fraction-static.\n", ExitInfo(1), "out-of-memory", "Not enough memory"),
    ("journal prefixes", "Nov 30 10:00:00 gpu python3[4242]: Traceback (most recent call last):\n"
     "Nov 30 10:00:00 gpu python3[4242]: ValueError: --tp-size 3 does not divide 64 attention "
     "heads\nNov 30 10:00:00 gpu systemd[1]: sglang.service: Main process exited, code=exited, "
     "status=1/FAILURE\n",
     ExitInfo(1), "invalid-flags", "ValueError: --tp-size 3"),
    ("nccl after weights",
     START + TRACEBACK + "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
     "unhandled system error\n", ExitInfo(1), "crashed", "NCCL error"),
    ("value error after weights",
     START + TRACEBACK + "ValueError: weight shape mismatch for layers.3\n",
     ExitInfo(1), "crashed", "weight shape mismatch"),
    ("killed", START, ExitInfo(signal=9), "crashed", "killed by signal 9"),
    ("missing module", TRACEBACK + "ModuleNotFoundError: No module named 'sglang'\n", ExitInfo(1),
     "other", "No module named 'sglang'"),
    ("silent", "", ExitInfo(1), "other", "without output"),
]


@pytest.mark.parametrize(("log", "exit", "expected", "reason"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_classifies_realistic_tails(log: str, exit: ExitInfo, expected: str, reason: str) -> None:
    verdict = classify(log, exit)
    assert verdict.failure_class == expected
    assert reason in verdict.reason


def test_argparse_error_wins_over_a_value_that_mentions_memory() -> None:
    log = USAGE + "launch_server.py: error: unrecognized arguments: --note out of memory\n"
    assert classify(log, ExitInfo(2)).failure_class == "invalid-flags"


def test_oom_wins_over_an_earlier_warning_value_error_after_weights() -> None:
    log = START + "ValueError: ignored\n" + "torch.OutOfMemoryError: CUDA out of memory.\n"
    assert classify(log, ExitInfo(1)).failure_class == "out-of-memory"
