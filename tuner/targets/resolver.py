"""Ask the target's own SGLang what it does with a command line, without starting a server.

Where the target's Python can import ``sglang``, one long-lived process per study runs ``RESOLVER_SCRIPT`` with
that interpreter — a child process for ``local``, a command over the target's SSH connection for
``systemd-ssh`` (``Pipe`` is all the two differ in). It imports SGLang once, then answers one JSON line per
command line with what ``sglang serve`` does before it touches a GPU — ``prepare_server_args`` (argparse, exit
2), ``ServerArgs.resolve_once()`` and ``check_server_args()`` (exit 1, with the last line of the traceback) — or
the effective values it resolved (the same fields as tests/fixtures/sglang-0.5.23-fidelity.json, from
bench/sglang_fidelity/generate.py). Answers are cached by command line. Where SGLang is not importable,
``start`` returns None (one logged line) and spectune's own rules (tuner.sglang.rules) are all there is.
"""

from __future__ import annotations

import json
import logging
import queue
import subprocess
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from tuner.targets.base import DeployFailed

log = logging.getLogger(__name__)

#: Runs under the target's interpreter (any Python ≥ 3.9 with SGLang): imports nothing from spectune. The same text
#: runs locally and over SSH. Before SGLang (and torch) are imported the GPUs are hidden (``CUDA_VISIBLE_DEVICES``
#: empty), so resolving can never create a CUDA context or allocate GPU memory next to a running server; what
#: SGLang's checks read about the GPU (name, compute capability, memory) comes from ``nvidia-smi`` instead — the
#: driver's tool, no CUDA context — and is handed to SGLang the way bench/sglang_fidelity/generate.py fakes it
#: (torch.cuda probes plus SGLang's own ``override_platform``).
RESOLVER_SCRIPT = r"""
import contextlib, importlib.util, io, json, logging, os, subprocess, sys

def say(data):
    print(json.dumps(data, default=str), flush=True)

def gpus():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,compute_cap,memory.total",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=30).stdout
    except Exception:
        return []
    rows = []
    for row in out.splitlines():
        parts = [p.strip() for p in row.split(",")]
        try:
            major, minor = (int(x) for x in parts[1].split("."))
            rows.append((parts[0], major, minor, int(float(parts[2]))))
        except (IndexError, ValueError):
            pass
    return rows

GPUS = gpus()
os.environ["CUDA_VISIBLE_DEVICES"] = ""
try:
    import sglang
except Exception as exc:
    say({"unavailable": f"{type(exc).__name__}: {exc}"})
    raise SystemExit(0)

def present(gpus):
    import torch
    name, major, minor, memory_mb = gpus[0]
    torch.cuda.is_available = lambda: True
    torch.cuda.device_count = lambda: len(gpus)
    torch.cuda.get_device_capability = lambda *a, **k: (major, minor)
    torch.cuda.get_device_name = lambda *a, **k: name
    from sglang.srt.utils import common
    common.get_nvgpu_memory_capacity = lambda: memory_mb
    from sglang.srt.runtime_context import override_platform
    override_platform(
        is_cuda=True, is_hip=False, is_npu=False, is_xpu=False, is_musa=False, is_mps=False,
        is_sm90=(major, minor) == (9, 0), is_sm100=major == 10, is_sm100_or_sm110=major in (10, 11),
        is_sm110=major == 11, is_sm120=major == 12, is_blackwell=major in (10, 11, 12),
        is_hopper_with_cuda_12_3=major == 9, has_amx=False,
        has_flashinfer=importlib.util.find_spec("flashinfer") is not None,
        device_sm=major * 10 + minor, device_capability=(major, minor),
    ).install()

if GPUS:
    try:
        present(GPUS)
    except Exception as exc:
        say({"unavailable": f"cannot show SGLang {getattr(sglang, '__version__', '?')} the GPU without touching "
                            f"it: {type(exc).__name__}: {exc}"})
        raise SystemExit(0)
try:  # after the GPU is presented: SGLang caches what it probes at import
    from sglang.srt.server_args import prepare_server_args
except Exception as exc:
    say({"unavailable": f"{type(exc).__name__}: {exc}"})
    raise SystemExit(0)
logging.disable(logging.CRITICAL)
say({"version": getattr(sglang, "__version__", None), "gpu": GPUS[0][0] if GPUS else None})

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
    say(answer)
"""

#: How long importing SGLang may take (it imports torch) and how long one answer may take.
START_TIMEOUT_S = 120.0
ANSWER_TIMEOUT_S = 30.0
#: The environment the resolver runs with: no GPU visible (see RESOLVER_SCRIPT), unbuffered answers.
RESOLVER_ENV = {"CUDA_VISIBLE_DEVICES": "", "PYTHONUNBUFFERED": "1"}


@dataclass(frozen=True)
class Answer:
    """SGLang's verdict on one command line."""

    accepted: bool
    error: str | None = None
    exit_code: int | None = None
    effective: dict[str, Any] | None = None


class Pipe(Protocol):
    """One running resolver process: JSON lines in, JSON lines out (a local child, or a command over SSH)."""

    def send(self, line: str) -> None:
        """Write one line; ``OSError`` when the process is gone."""

    def receive(self, timeout_s: float) -> str | None:
        """The next line, or None at end of output or when none came within ``timeout_s``."""

    def close(self) -> None: ...


class ProcessPipe:
    """A resolver running as a child process of spectune (the ``local`` target)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self._proc = proc
        self._lines: queue.Queue[str] = queue.Queue()
        # Pipes have no portable read timeout: one reader thread per process hands the lines over.
        threading.Thread(target=self._read, daemon=True).start()

    @classmethod
    def spawn(cls, argv: Sequence[str], env: dict[str, str] | None) -> ProcessPipe | None:
        try:
            return cls(subprocess.Popen([*argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, text=True, env=env))
        except OSError:
            return None

    def _read(self) -> None:
        stdout = self._proc.stdout
        assert stdout is not None
        for text in stdout:
            self._lines.put(text)
        self._lines.put("")  # end of output

    def send(self, line: str) -> None:
        stdin = self._proc.stdin
        assert stdin is not None
        stdin.write(line + "\n")
        stdin.flush()

    def receive(self, timeout_s: float) -> str | None:
        try:
            text = self._lines.get(timeout=timeout_s)
        except queue.Empty:
            return None
        if not text:
            self._lines.put("")  # stays at end of output
            return None
        return text

    def close(self) -> None:
        proc = self._proc
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


class SGLangResolver:
    """Asks one SGLang installation about command lines, through a resolver process ``spawn`` starts (locally
    or over SSH). Answers are cached by command line. A resolver that stops answering is started once more;
    if that fails too, ``resolve`` returns None from then on (spectune's rules judge) and says so once."""

    def __init__(self, spawn: Callable[[], Pipe | None], pipe: Pipe, version: str | None, where: str,
                 gpu: str | None = None) -> None:
        self._spawn = spawn
        self._pipe: Pipe | None = pipe
        self.version = version
        self.where = where
        self.gpu = gpu
        self._cache: dict[tuple[str, ...], Answer] = {}
        self._lock = threading.Lock()

    @classmethod
    def start(cls, spawn: Callable[[], Pipe | None], *, where: str) -> SGLangResolver | None:
        """Start the resolver; None — with one logged line saying why — when SGLang cannot be imported there
        (or the interpreter does not run at all): spectune's rules then judge every configuration."""
        pipe, first = _started(spawn)
        if pipe is None or first is None or "version" not in first:
            why = (first or {}).get("unavailable") or "the interpreter did not start or did not answer"
            log.warning("SGLang cannot be asked on %s (%s); spectune's own rules judge the configurations", where, why)
            return None
        return cls(spawn, pipe, first.get("version"), where, first.get("gpu"))

    def resolve(self, server_argv: Sequence[str]) -> Answer | None:
        """SGLang's answer for ``server_argv`` (server arguments only, as ``sglang serve`` gets them); None when
        the resolver is gone."""
        key = tuple(server_argv)
        with self._lock:
            if key not in self._cache:
                data = self._ask(json.dumps(list(server_argv)))
                if data is None:
                    return None
                self._cache[key] = Answer(data.get("verdict") == "accepted", data.get("error"),
                                          data.get("exit_code"), data.get("effective"))
            return self._cache[key]

    def _ask(self, request: str) -> dict[str, Any] | None:
        if self._pipe is None:
            return None  # gone earlier (and said so then)
        for attempt in (1, 2):
            pipe = self._pipe
            try:
                pipe.send(request)
                data = _json_line(pipe.receive(ANSWER_TIMEOUT_S))
            except OSError:
                data = None
            if data is not None and "verdict" in data:
                return data
            pipe.close()
            self._pipe = None
            if attempt == 1:  # a dropped SSH connection or a crashed process: one fresh start
                fresh, first = _started(self._spawn)
                if fresh is not None and first is not None and first.get("version") == self.version:
                    self._pipe = fresh
                    continue
                if fresh is not None:
                    fresh.close()
            break
        log.warning("the SGLang resolver on %s stopped answering; spectune's own rules judge from now on", self.where)
        return None

    def check(self, server_argv: Sequence[str]) -> Answer | None:
        """``resolve``, raising ``DeployFailed("invalid-flags")`` with SGLang's own error when it refuses."""
        answer = self.resolve(server_argv)
        if answer is not None and not answer.accepted:
            raise DeployFailed("invalid-flags", refusal(answer, self.version, self.where), answer.error or "")
        return answer

    def close(self) -> None:
        if self._pipe is not None:
            self._pipe.close()
            self._pipe = None


def refusal(answer: Answer, version: str | None, where: str) -> str:
    """What a trial SGLang refuses is told (SGLang's own error line)."""
    return f"SGLang {version} on {where} refuses this configuration (exit {answer.exit_code}): {answer.error}"


def check_version(resolver: SGLangResolver, table_version: str) -> None:
    """Refuse a study whose option table is for another SGLang than the one installed on the target."""
    if resolver.version is not None and resolver.version != table_version:
        raise DeployFailed("invalid-flags", (
            f"the target runs SGLang {resolver.version} ({resolver.where}) but the study checks flags against "
            f"SGLang {table_version}'s option table: set [study] sglang_version to the installed version (if "
            "spectune ships its table) or install SGLang " + table_version))


def _started(spawn: Callable[[], Pipe | None]) -> tuple[Pipe | None, dict[str, Any] | None]:
    pipe = spawn()
    if pipe is None:
        return None, None
    first = _json_line(pipe.receive(START_TIMEOUT_S))
    if first is None or "version" not in first:
        pipe.close()
        return None, first
    return pipe, first


def _json_line(text: str | None) -> dict[str, Any] | None:
    if not text or not text.strip():
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def server_args_of(command: Sequence[str]) -> tuple[str | None, list[str]]:
    """For a launch command ``python -m sglang.launch_server ARGS`` (or ``.../bin/sglang serve ARGS``): its
    interpreter (None when the command does not name one) and the server arguments it already carries."""
    argv = list(command)
    for i, token in enumerate(argv[:-1]):
        if token == "-m" and argv[i + 1].startswith("sglang"):
            python = argv[i - 1] if i > 0 and "python" in argv[i - 1].rsplit("/", 1)[-1] else None
            return python, argv[i + 2:]
        if is_sglang_script(token) and argv[i + 1] == "serve":
            return None, argv[i + 2:]
    return None, []


def is_sglang_script(path: str) -> bool:
    """Whether ``path`` names SGLang's console script (``sglang``, ``.../bin/sglang``): its Python is in its ``#!``."""
    return path.rsplit("/", 1)[-1] == "sglang"


def interpreter_of_script(first_line: str) -> str | None:
    """The Python a console script (``.../bin/sglang``) runs, from its ``#!`` line; None when it names none."""
    first_line = first_line.split("\n", 1)[0]
    if not first_line.startswith("#!"):
        return None
    words = first_line[2:].split()
    if words and words[0].rsplit("/", 1)[-1] == "env":
        words = [w for w in words[1:] if not w.startswith("-")]
    return words[0] if words and "python" in words[0].rsplit("/", 1)[-1] else None
