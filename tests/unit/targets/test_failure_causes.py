"""Typed failure causes, held to SGLang's real messages (quoted from its source and from torch's
allocator).

- model_runner.py / mem_cache/pool_configurator.py: ``raise RuntimeError("Not enough memory. Please
  try to increase --mem-fraction-static.")`` when the static pool leaves no room for the KV cache;
- model_executor/cuda_graph_runner.py: ``raise Exception(f"Capture cuda graph failed:
  {e}\\n{...}")``;
- torch: ``torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total
  capacity of 79.11 GiB of which 1.02 GiB is free.``;
- managers/scheduler.py: ``logger.error(f"Scheduler hit an exception: {traceback}")``, after which
  entrypoints/engine.py logs "Received sigquit from a child process. It usually means the child
  failed.".
"""

from __future__ import annotations

import pytest

from tuner.targets.base import FailureCause
from tuner.targets.classify import ExitInfo, cause_of, classify, oom_stage

KV_POOL = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."
TORCH_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
             "total capacity of 79.11 GiB of which 1.02 GiB is free.")
GRAPH = ("Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 2.10 GiB. "
         "GPU 0 has a total capacity of 95.00 GiB of which 1.20 GiB is free.")
SCHEDULER = (
    "[2026-12-02 10:00:09 TP0] Scheduler hit an exception: Traceback (most recent call last):")
SIGQUIT = ("[2026-12-02 10:00:09] Received sigquit from a child process. It usually means the "
           "child failed.")
WEIGHTS = "[2026-12-02 10:00:01 TP0] Load weight begin. avail mem=94.50 GB\n"
LOADED = (WEIGHTS
          + "[2026-12-02 10:01:01 TP0] Load weight end. elapsed=60.1 s, mem usage=61.20 GB.\n")
KV_DONE = (LOADED + "[2026-12-02 10:01:02 TP0] KV Cache is allocated. dtype: torch.bfloat16, "
                    "#tokens: 812345\n")
CAPTURE = (KV_DONE + "[2026-12-02 10:01:03 TP0] Capture cuda graph begin. This can take up to "
                     "several minutes.\n")
READY = (CAPTURE + "[2026-12-02 10:01:30 TP0] Capture cuda graph end. Time elapsed: 20.00 s.\n"
         "[2026-12-02 10:01:31] The server is fired up and ready to roll!\n")


@pytest.mark.parametrize(("log", "cause"), [
    (LOADED + SCHEDULER + "\n" + KV_POOL + "\n" + SIGQUIT, FailureCause.KV_POOL_TOO_SMALL),
    (CAPTURE + SCHEDULER + "\n" + GRAPH + "\n" + SIGQUIT, FailureCause.GRAPH_CAPTURE_OOM),
    (WEIGHTS + SCHEDULER + "\n" + TORCH_OOM + "\n" + SIGQUIT, FailureCause.WEIGHTS_OOM),
    (READY + SCHEDULER + "\n" + TORCH_OOM + "\n" + SIGQUIT, FailureCause.DECODE_OOM),
], ids=["kv pool", "graph capture", "weights", "decode"])
def test_out_of_memory_is_split_by_stage_from_sglangs_own_lines(log: str,
                                                                cause: FailureCause) -> None:
    verdict = classify(log, ExitInfo(code=1))
    assert verdict.failure_class == "out-of-memory"
    assert verdict.cause is cause
    assert oom_stage(log) is cause


def test_the_kv_pool_message_has_no_kv_in_it_and_is_still_the_kv_pool() -> None:
    # What the grey-box sampler used to look for: the word "kv". SGLang's message does not contain
    # it.
    assert "kv" not in KV_POOL.lower()
    assert cause_of("out-of-memory", KV_POOL) is FailureCause.KV_POOL_TOO_SMALL
    assert not FailureCause.KV_POOL_TOO_SMALL.needs_less_memory
    assert FailureCause.GRAPH_CAPTURE_OOM.needs_less_memory \
           and FailureCause.DECODE_OOM.needs_less_memory


def test_other_classes_map_to_their_cause() -> None:
    assert classify("launch_server.py: error: unrecognized arguments: --x 3\n", ExitInfo(2)).cause \
        is FailureCause.INVALID_FLAGS
    assert classify(LOADED + SCHEDULER + "\nRuntimeError: NCCL error\n" + SIGQUIT,
                    ExitInfo(code=1)).cause \
        is FailureCause.CRASH
    assert cause_of("hung") is FailureCause.HANG
    assert cause_of("wrong-output") is FailureCause.WRONG_OUTPUT
    assert cause_of("crashed-under-load", READY + TORCH_OOM) is FailureCause.DECODE_OOM
    assert cause_of("crashed-under-load",
                    READY + SCHEDULER + "\nRuntimeError: CUDA error: an illegal memory "
                    "access was encountered\n" + SIGQUIT) is FailureCause.CRASH
    assert cause_of(None) is None
