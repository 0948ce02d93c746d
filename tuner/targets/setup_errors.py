"""When the target's own SGLang cannot judge a configuration: a setup error, never a verdict on the
configuration.

SGLang answers a command line with a verdict (argparse's exit 2; a ``ValueError``,
``AssertionError``, ``NotImplementedError`` or ``TypeError`` from its argument checks) — or with an
error that says nothing about the configuration: it sees no GPU ("No accelerator (CUDA, XPU, HPU,
NPU, MUSA, MPS) or platform plugin is available"), a module it needs is missing ("No module named
'sgl_kernel'"), a shared library does not load. Such an error would come back for every
configuration; recorded as a rejection each time, a study would end "exhausted" with nothing
measured. ``setup_problem`` tells them apart and says what to do about it; the resolver then stops
the study at preflight with one line (``SGLangCannotJudge``, exit 3) — or, where the study allows it
(``[target] when_sglang_cannot_judge = "rules"``), spectune's own rules judge instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tuner.targets.base import TargetUnavailable

#: What ``[target] when_sglang_cannot_judge`` may say.
STOP = "stop"
RULES = "rules"

#: The exception classes SGLang's argument checks raise for a configuration it refuses (and
#: argparse's exit 2): the real 0.5.x checks raise nothing else
#: (tests/fixtures/sglang-*-fidelity.json). Anything else — a ``RuntimeError``, an
#: ``AttributeError`` — is judged by whether SGLang still accepts a configuration it accepted before
#: (``SGLangResolver``): if not, the installation changed under the study.
VERDICT_ERRORS = ("ValueError", "AssertionError", "NotImplementedError", "TypeError")


@dataclass(frozen=True)
class _Known:
    pattern: re.Pattern[str]
    cause: str
    fix: str


_KNOWN: tuple[_Known, ...] = (
    _Known(re.compile(r"No module named 'sglang'"),
           "SGLang is not installed in that Python",
           "set [target] python (or the interpreter of [target] command) to the Python the server "
           "runs"),
    _Known(re.compile(r"No accelerator \(|No CUDA GPUs are available|Found no NVIDIA driver|"
                      r"Torch not compiled with CUDA|CUDA driver initialization failed|no "
                      r"CUDA-capable device",
                      re.IGNORECASE),
           "SGLang sees no GPU",
           "run spectune where `nvidia-smi` lists the target's GPU (the resolver shows it to "
           "SGLang from there), or name it in [target] gpu"),
    _Known(re.compile(r"No module named '?([\w.]+)'?"),
           "a module SGLang imports is missing",
           "install it into the target's Python (the server would fail to start the same way), or "
           "set [target] python to the interpreter the server runs"),
    _Known(re.compile(
        r"ImportError|cannot import name|undefined symbol|cannot open shared object file|"
        r"DLL load failed|GLIBC", re.IGNORECASE),
           "SGLang's installation does not import",
           "repair the target's SGLang installation (matching torch, sgl_kernel and flashinfer "
           "builds)"),
)


def setup_problem(error: str) -> tuple[str, str] | None:
    """``(cause, fix)`` when SGLang's error line means it cannot judge any configuration there; None
    for a verdict on this configuration (or an error this module does not know: see
    ``is_verdict``)."""
    for known in _KNOWN:
        match = known.pattern.search(error)
        if match is None:
            continue
        cause = known.cause
        if match.groups() and match.group(1):
            cause = f"{cause} ({match.group(1)})"
        return cause, known.fix
    return None


def is_verdict(error: str, exit_code: int | None) -> bool:
    """Whether SGLang's refusal reads as a verdict on the configuration: argparse (exit 2) or an
    exception class its argument checks raise on purpose — and no known setup problem."""
    if setup_problem(error) is not None:
        return False
    if exit_code == 2:
        return True
    kind = error.split(":", 1)[0].strip()
    return kind in VERDICT_ERRORS


class SGLangCannotJudge(TargetUnavailable):
    """The target's SGLang cannot judge configurations (not importable, no GPU visible to it, a
    missing module, a resolver that crashed or did not answer): the study stops at preflight with
    this one line (exit 3) and nothing is recorded on any trial. Waiting does not help, so it is not
    retried."""

    retryable = False

    def __init__(self, where: str, cause: str, fix: str, detail: str = "") -> None:
        self.cause = cause
        self.fix = fix
        shown = f" ({detail})" if detail and detail not in cause else ""
        super().__init__(
            f"SGLang on {where} cannot judge configurations: {cause}{shown} — {fix}; or set "
            "[target] when_sglang_cannot_judge = \"rules\" to let spectune's own "
            "rules judge")


def cannot_judge(where: str, error: str) -> SGLangCannotJudge:
    """The one-line stop for SGLang's error line ``error`` (a known setup problem, or an unexplained
    failure)."""
    known = setup_problem(error)
    if known is not None:
        return SGLangCannotJudge(where, known[0], known[1], _short(error))
    return SGLangCannotJudge(where, "the resolver failed",
                             "check that the target's Python imports sglang "
                             "(`python -c 'import sglang.srt.server_args'`)", _short(error))


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
