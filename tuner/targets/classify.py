"""Why did the server not come up? Classify from its exit status and the tail of its log.

The classes decide what the study does next: ``invalid-flags`` and ``out-of-memory`` are properties of the
configuration (the sampler should learn to avoid them); ``crashed``/``other`` may be flukes. The rules follow
SGLang 0.5.23's startup (reference notes §7): argparse exits 2 at once; validation ``ValueError``s and bare
``AssertionError``s come before any weight is loaded; out-of-memory shows up while loading weights, allocating
the KV cache or — most often — capturing CUDA graphs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tuner.targets.base import FailureClass

#: Lines that mean the GPU ran out of memory (any stage). Checked before everything but argparse errors.
_OOM = re.compile(
    r"out of memory|Capture cuda graph failed|OutOfMemoryError|CUDA error: out of memory|"
    r"Not enough memory\. Please try to increase --mem-fraction-static|RuntimeError: CUDA out of memory",
    re.IGNORECASE,
)
#: argparse's own messages (exit 2): "launch_server.py: error: unrecognized arguments: …" and friends.
_ARGPARSE = re.compile(
    r"error: (unrecognized arguments|ambiguous option|argument [^:]+: |the following arguments are required|"
    r"one of the arguments)"
)
#: The last line of a Python traceback for a validation error: "ValueError: …" or a bare "AssertionError",
#: possibly behind a logger or journal prefix.
_EXCEPTION = re.compile(r"(?:^|[\s\]:])(ValueError|AssertionError)(?::|\s*$)", re.MULTILINE)
#: Reached only once the configuration was accepted: the server began loading the model.
_WEIGHTS_BEGIN = "Load weight begin"


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


def classify(log_tail: str, exit: ExitInfo | None = None) -> Classification:
    """Classify a startup failure. ``exit=None`` means the process state is unknown (e.g. still running)."""
    lines = [line.rstrip() for line in log_tail.splitlines()]
    how = exit.describe() if exit is not None else "failed"

    argparse_line = _last_match(lines, _ARGPARSE)
    if argparse_line is not None and (exit is None or exit.code in (2, None) or "usage:" in log_tail):
        return Classification("invalid-flags", argparse_line)

    oom_line = _first_match(lines, _OOM)
    if oom_line is not None:
        return Classification("out-of-memory", oom_line)

    weights_at = next((i for i, line in enumerate(lines) if _WEIGHTS_BEGIN in line), None)
    before_weights = "\n".join(lines if weights_at is None else lines[:weights_at])
    exc = _EXCEPTION.search(before_weights)
    if exc is not None and (exit is None or exit.signal is None):
        line = before_weights[exc.start(1):].splitlines()[0]
        return Classification("invalid-flags", f"{line} (raised before loading weights)")

    if exit is not None and exit.code == 2 and weights_at is None and "usage:" in log_tail:
        return Classification("invalid-flags", f"{how} after printing its usage")

    last = next((line for line in reversed(lines) if line.strip()), "")
    if exit is not None and (exit.signal is not None or weights_at is not None):
        # It got past argument checking (or something killed it): a crash while starting.
        return Classification("crashed", f"{how}; last line: {last}" if last else how)
    return Classification("other", f"{how}; last line: {last}" if last else f"{how} without output")


def _first_match(lines: list[str], pattern: re.Pattern[str]) -> str | None:
    return next((line.strip() for line in lines if pattern.search(line)), None)


def _last_match(lines: list[str], pattern: re.Pattern[str]) -> str | None:
    return next((line.strip() for line in reversed(lines) if pattern.search(line)), None)
