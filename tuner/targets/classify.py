"""Why did the server not come up? Classify from its exit status and the tail of its log.

The classes decide what the study does next: ``invalid-flags`` and ``out-of-memory`` are properties
of the configuration (the sampler should learn to avoid them); ``crashed``/``other`` may be flukes.
The rules follow SGLang 0.5.23's startup (reference notes §7): argparse exits 2 at once; validation
``ValueError``s and bare ``AssertionError``s come before any weight is loaded; out-of-memory shows
up while loading weights, allocating the KV cache or — most often — capturing CUDA graphs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tuner.targets.base import FailureCause, FailureClass

#: Lines that mean the GPU ran out of memory (any stage). Checked before everything but argparse
#: errors.
_OOM = re.compile(
    r"out of memory|Capture cuda graph failed|OutOfMemoryError|CUDA error: out of memory|"
    r"Not enough memory\. Please try to increase --mem-fraction-static|RuntimeError: CUDA out of "
    r"memory",
    re.IGNORECASE,
)
#: argparse's own messages (exit 2): "launch_server.py: error: unrecognized arguments: …" and
#: friends.
_ARGPARSE = re.compile(
    r"error: (unrecognized arguments|ambiguous option|argument [^:]+: |the following arguments are "
    r"required|one of the arguments)"
)
#: The last line of a Python traceback for a validation error: "ValueError: …" or a bare
#: "AssertionError", possibly behind a logger or journal prefix.
_EXCEPTION = re.compile(r"(?:^|[\s\]:])(ValueError|AssertionError)(?::|\s*$)", re.MULTILINE)
#: Reached only once the configuration was accepted: the server began loading the model.
_WEIGHTS_BEGIN = "Load weight begin"
#: SGLang's messages that tell *where* memory ran out (model_runner.py / pool_configurator.py raise
#: the first when the static pool leaves no room for a KV cache; cuda_graph_runner.py wraps a
#: capture failure in the second; the others are SGLang's own progress lines before and after those
#: stages).
_KV_POOL = re.compile(r"Not enough memory\. Please try to increase --mem-fraction-static",
                      re.IGNORECASE)
_GRAPH_CAPTURE = re.compile(
    r"Capture cuda graph failed|Capture .*CUDA graph begin|Capture cuda graph begin", re.IGNORECASE)
_WEIGHTS_END = "Load weight end"
_GRAPH_END = re.compile(r"Capture cuda graph end", re.IGNORECASE)
#: The server's last line once it is ready (http_server.py): anything after it happened while
#: serving.
_READY = "The server is fired up and ready to roll!"


@dataclass(frozen=True)
class ExitInfo:
    """How the server process ended: an exit code, or the signal that killed it."""

    code: int | None = None
    signal: int | None = None

    def describe(self) -> str:
        if self.signal is not None:
            return f"killed by signal {self.signal}"
        return f"exited with code {self.code}" if self.code is not None else "stopped"


@dataclass(frozen=True)
class Classification:
    failure_class: FailureClass
    reason: str  # one line: the log line that decided it, or what was seen
    cause: FailureCause = FailureCause.OTHER  # the typed cause the samplers read


def classify(log_tail: str, exit: ExitInfo | None = None) -> Classification:
    """Classify a startup failure. ``exit=None`` means the process state is unknown (e.g. still
    running)."""
    lines = [line.rstrip() for line in log_tail.splitlines()]
    how = exit.describe() if exit is not None else "failed"

    argparse_line = _last_match(lines, _ARGPARSE)
    if argparse_line is not None and (exit is None or exit.code in (2, None)
                                      or "usage:" in log_tail):
        return Classification("invalid-flags", argparse_line, FailureCause.INVALID_FLAGS)

    oom_line = _first_match(lines, _OOM)
    if oom_line is not None:
        return Classification("out-of-memory", oom_line, oom_stage(log_tail))

    weights_at = next((i for i, line in enumerate(lines) if _WEIGHTS_BEGIN in line), None)
    before_weights = "\n".join(lines if weights_at is None else lines[:weights_at])
    exc = _EXCEPTION.search(before_weights)
    if exc is not None and (exit is None or exit.signal is None):
        line = before_weights[exc.start(1):].splitlines()[0]
        return Classification("invalid-flags", f"{line} (raised before loading weights)",
                              FailureCause.INVALID_FLAGS)

    if exit is not None and exit.code == 2 and weights_at is None and "usage:" in log_tail:
        return Classification("invalid-flags", f"{how} after printing its usage",
                              FailureCause.INVALID_FLAGS)

    last = next((line for line in reversed(lines) if line.strip()), "")
    if exit is not None and (exit.signal is not None or weights_at is not None):
        # It got past argument checking (or something killed it): a crash while starting.
        return Classification("crashed", f"{how}; last line: {last}" if last else how,
                              FailureCause.CRASH)
    return Classification("other", f"{how}; last line: {last}" if last else f"{how} without output")


def oom_stage(text: str) -> FailureCause:
    """Which memory ran out, from SGLang's own lines: the KV pool (its "Not enough memory" refusal,
    cured by a *larger* static fraction), graph capture, decode (after the server was ready), or
    loading weights. Never by looking for a word such as "kv" in the message: SGLang's pool message
    has none."""
    if _KV_POOL.search(text):
        return FailureCause.KV_POOL_TOO_SMALL
    oom_at = _OOM.search(text)
    before = text[: oom_at.start()] if oom_at else text
    if _READY in before:
        return FailureCause.DECODE_OOM
    if "Capture cuda graph failed" in text or (_GRAPH_CAPTURE.search(before)
                                               and not _GRAPH_END.search(before)):
        return FailureCause.GRAPH_CAPTURE_OOM
    if _WEIGHTS_BEGIN in before and _WEIGHTS_END not in before.rsplit(_WEIGHTS_BEGIN, 1)[-1]:
        return FailureCause.WEIGHTS_OOM
    return FailureCause.OUT_OF_MEMORY


#: A stored failure class → its cause when the text says no more (records written before causes were
#: stored).
_CAUSE_OF_CLASS: dict[str, FailureCause] = {
    "invalid-flags": FailureCause.INVALID_FLAGS, "startup-timeout": FailureCause.STARTUP_TIMEOUT,
    "unreachable": FailureCause.UNREACHABLE, "crashed": FailureCause.CRASH,
    "crashed-under-load": FailureCause.CRASH, "hung": FailureCause.HANG,
    "wrong-output": FailureCause.WRONG_OUTPUT,
}


def cause_of(failure_class: str | None, text: str = "") -> FailureCause | None:
    """The typed cause of a failure stored as ``failure_class`` with ``text`` (its message and log
    tail); None when nothing failed. Out-of-memory is split by stage (``oom_stage``); a run that
    crashed with an out-of-memory in its log is a decode OOM."""
    if not failure_class:
        return None
    if failure_class == "out-of-memory" \
            or (failure_class == "crashed-under-load" and _OOM.search(text)):
        cause = oom_stage(text)
        return FailureCause.DECODE_OOM if failure_class == "crashed-under-load" and \
            cause is FailureCause.OUT_OF_MEMORY else cause
    return _CAUSE_OF_CLASS.get(failure_class, FailureCause.OTHER)


def _first_match(lines: list[str], pattern: re.Pattern[str]) -> str | None:
    return next((line.strip() for line in lines if pattern.search(line)), None)


def _last_match(lines: list[str], pattern: re.Pattern[str]) -> str | None:
    return next((line.strip() for line in reversed(lines) if pattern.search(line)), None)


def telling_line(text: str, limit: int = 300) -> str:
    """The line of a program's output that says what went wrong: the last one naming an error or
    running out of memory, else the last one ("" for none) — an error message stays one line
    however much the program printed."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    telling = next((line for line in reversed(lines) if _TELLING.search(line)), lines[-1])
    return telling[:limit]


#: What a line that says what went wrong contains (``ModuleNotFoundError: …``, ``error: …``,
#: ``Permission denied``, ``Unit sglang.service not found.``, ``CUDA out of memory``).
_TELLING = re.compile(r"error|denied|not found|out of memory|no such|refused", re.IGNORECASE)
