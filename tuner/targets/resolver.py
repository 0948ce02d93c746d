"""Ask the target's own SGLang what it does with a command line, without starting a server.

Where the target's Python can import ``sglang``, one long-lived process per study runs ``RESOLVER_SCRIPT`` with
that interpreter: it imports SGLang once, then answers one JSON line per command line with what ``sglang serve``
does before it touches a GPU — ``prepare_server_args`` (argparse, exit 2), ``ServerArgs.resolve_once()`` and
``check_server_args()`` (exit 1, with the last line of the traceback) — or the effective values it resolved
(the same fields as tests/fixtures/sglang-0.5.23-fidelity.json, from bench/sglang_fidelity/generate.py).
Answers are cached by command line. Where SGLang is not importable, ``start`` returns None and spectune's own
rules (tuner.sglang.rules) are all there is.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any

from tuner.targets.base import DeployFailed

#: Runs under the target's interpreter (any Python ≥ 3.9 with SGLang): imports nothing from spectune.
RESOLVER_SCRIPT = r'''
import contextlib, io, json, logging, sys
try:
    import sglang
    from sglang.srt.server_args import prepare_server_args
except Exception as exc:
    print(json.dumps({"unavailable": f"{type(exc).__name__}: {exc}"}), flush=True)
    raise SystemExit(0)
logging.disable(logging.CRITICAL)
print(json.dumps({"version": getattr(sglang, "__version__", None)}), flush=True)

def line(exc):
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__

def effective(args):
    try:
        from sglang.srt.arg_groups.overrides import resolving_view
        v = resolving_view(args)
    except Exception:
        v = args
    graphs = getattr(v, "cuda_graph_config", None)
    decode = getattr(graphs, "decode", None)
    return {
        "speculative_algorithm": v.speculative_algorithm, "speculative_num_steps": v.speculative_num_steps,
        "speculative_eagle_topk": v.speculative_eagle_topk,
        "speculative_num_draft_tokens": v.speculative_num_draft_tokens, "page_size": v.page_size,
        "attention_backend": v.attention_backend,
        "cuda_graph_disabled": (str(getattr(decode, "backend", "")) in ("disabled", "Backend.DISABLED"))
        or bool(getattr(v, "disable_cuda_graph", False)),
        "cuda_graph_max_bs": getattr(decode, "max_bs", None),
        "max_running_requests": v.max_running_requests,
    }

for raw in sys.stdin:
    argv = json.loads(raw)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            args = prepare_server_args(argv)
    except SystemExit as exc:
        lines = [x for x in err.getvalue().splitlines() if x.strip()]
        answer = {"verdict": "refused", "exit_code": int(exc.code or 0), "error": lines[-1] if lines else ""}
    else:
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                if hasattr(args, "resolve_once"):
                    args.resolve_once()
                args.check_server_args()
            answer = {"verdict": "accepted", "effective": effective(args)}
        except Exception as exc:
            answer = {"verdict": "refused", "exit_code": 1, "error": line(exc)}
    print(json.dumps(answer, default=str), flush=True)
'''

#: How long importing SGLang may take (it imports torch) and how long one answer may take.
START_TIMEOUT_S = 120.0
ANSWER_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Answer:
    """SGLang's verdict on one command line."""

    accepted: bool
    error: str | None = None
    exit_code: int | None = None
    effective: dict[str, Any] | None = None


class SGLangResolver:
    """One resolver process (``command`` runs ``python -c RESOLVER_SCRIPT``, locally or over SSH)."""

    def __init__(self, proc: subprocess.Popen[str], version: str | None, where: str) -> None:
        self._proc = proc
        self.version = version
        self.where = where
        self._cache: dict[tuple[str, ...], Answer] = {}
        self._lock = threading.Lock()

    @classmethod
    def start(cls, command: Sequence[str], *, where: str, env: dict[str, str] | None = None) -> SGLangResolver | None:
        """Start the resolver; None when the interpreter cannot import SGLang (or does not run at all)."""
        try:
            proc = subprocess.Popen([*command], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, text=True, env=env)
        except OSError:
            return None
        first = _read_line(proc, START_TIMEOUT_S)
        if first is None or "version" not in first:
            _end(proc)
            return None
        return cls(proc, first.get("version"), where)

    def resolve(self, server_argv: Sequence[str]) -> Answer:
        """SGLang's answer for ``server_argv`` (server arguments only, as ``sglang serve`` gets them)."""
        key = tuple(server_argv)
        with self._lock:
            if key in self._cache:
                return self._cache[key]
            stdin = self._proc.stdin
            assert stdin is not None
            try:
                stdin.write(json.dumps(list(server_argv)) + "\n")
                stdin.flush()
            except OSError:
                raise DeployFailed("other", f"the SGLang resolver on {self.where} exited") from None
            data = _read_line(self._proc, ANSWER_TIMEOUT_S)
            if data is None:
                raise DeployFailed("other", f"the SGLang resolver on {self.where} did not answer")
            answer = Answer(data.get("verdict") == "accepted", data.get("error"), data.get("exit_code"),
                            data.get("effective"))
            self._cache[key] = answer
            return answer

    def check(self, server_argv: Sequence[str]) -> Answer:
        """``resolve``, raising ``DeployFailed("invalid-flags")`` with SGLang's own error when it refuses."""
        answer = self.resolve(server_argv)
        if not answer.accepted:
            raise DeployFailed("invalid-flags", f"SGLang {self.version} on {self.where} refuses this configuration "
                               f"(exit {answer.exit_code}): {answer.error}", answer.error or "")
        return answer

    def close(self) -> None:
        _end(self._proc)


def check_version(resolver: SGLangResolver, table_version: str) -> None:
    """Refuse a study whose option table is for another SGLang than the one installed on the target."""
    if resolver.version is not None and resolver.version != table_version:
        raise DeployFailed("invalid-flags", (
            f"the target runs SGLang {resolver.version} ({resolver.where}) but the study checks flags against "
            f"SGLang {table_version}'s option table: set [study] sglang_version to the installed version (if "
            "spectune ships its table) or install SGLang " + table_version))


def _read_line(proc: subprocess.Popen[str], timeout_s: float) -> dict[str, Any] | None:
    """One JSON line from the resolver within ``timeout_s`` (a thread: pipes have no portable read timeout)."""
    out: list[str] = []
    stdout: IO[str] | None = proc.stdout
    if stdout is None:
        return None
    reader = threading.Thread(target=lambda: out.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout_s)
    if not out or not out[0].strip():
        return None
    try:
        data = json.loads(out[0])
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def _end(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def server_args_of(command: Sequence[str]) -> tuple[str | None, list[str]]:
    """For a launch command ``python -m sglang.launch_server ARGS`` (or ``sglang serve``): its interpreter
    (None when it is not a Python running SGLang) and the server arguments it already carries."""
    argv = list(command)
    for i, token in enumerate(argv[:-1]):
        if token == "-m" and argv[i + 1].startswith("sglang"):
            python = argv[i - 1] if i > 0 and "python" in argv[i - 1].rsplit("/", 1)[-1] else None
            return python, argv[i + 2:]
    return None, []
