"""Ask the target's own SGLang what it does with a command line, without starting a server.

One long-lived process per study runs ``RESOLVER_SCRIPT`` (tuner/targets/resolver_script.py) with
the target's interpreter — a child process for ``local``, a command over the target's SSH connection
for ``systemd-ssh`` (``Pipe`` is all the two differ in). It imports SGLang once, then answers one
JSON line per command line with what ``sglang serve`` does before it touches a GPU —
``prepare_server_args`` (argparse, exit 2), ``ServerArgs.resolve_once()`` and
``check_server_args()`` (exit 1, with the last line of the traceback) — or the effective values it
resolved. Answers are cached by command line. It can also list the target's own option table.

A setup error is never a verdict (tuner/targets/setup_errors.py): when SGLang cannot judge, the
study stops with one line (exit 3), or — where the study allows — spectune's own rules
(tuner.sglang.rules) judge instead.
"""

from __future__ import annotations

import json
import logging
import queue
import subprocess
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from tuner.sglang import dump
from tuner.sglang.options import OptionTable
from tuner.targets.base import SGLangRefused, Target
from tuner.targets.setup_errors import SGLangCannotJudge, cannot_judge, is_verdict, setup_problem

log = logging.getLogger(__name__)

#: The resolver process's source (tuner/targets/resolver_script.py), sent as ``python -c``: the same
#: text runs locally and over SSH, under the target's interpreter.
RESOLVER_SCRIPT = f"DUMP_SOURCE = {dump.source()!r}\n" + (
    Path(__file__).parent / "resolver_script.py").read_text(encoding="utf-8")

#: How long importing SGLang may take (it imports torch) and how long one answer may take.
START_TIMEOUT_S = 120.0
ANSWER_TIMEOUT_S = 30.0
#: The environment the resolver runs with: no GPU visible (see RESOLVER_SCRIPT), unbuffered answers.
RESOLVER_ENV = {"CUDA_VISIBLE_DEVICES": "", "PYTHONUNBUFFERED": "1"}


def resolver_env(gpu: str | None) -> dict[str, str]:
    """``RESOLVER_ENV``, plus ``SPECTUNE_GPU`` (``TargetSettings.resolver_gpu``) where the study
    names the GPU."""
    return {**RESOLVER_ENV, **({"SPECTUNE_GPU": gpu} if gpu else {})}


@dataclass(frozen=True)
class Answer:
    """SGLang's verdict on one command line."""

    accepted: bool
    error: str | None = None
    exit_code: int | None = None
    effective: dict[str, Any] | None = None
    #: Where SGLang refuses it when not in its argument checks: "loading the draft model" (its draft
    #: backend table, read without loading anything).
    stage: str | None = None


class Pipe(Protocol):
    """One running resolver process: JSON lines in, JSON lines out (a local child, or a command over
    SSH)."""

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
    """Asks one SGLang installation about command lines, through a resolver process ``spawn`` starts
    (locally or over SSH). Answers are cached by command line.

    Only a verdict on the configuration is ever returned as one. When SGLang cannot judge — the
    process does not start, crashes or does not answer, or its error is a setup problem
    (``setup_errors``) — it raises ``SGLangCannotJudge`` (exit 3, one line), unless the study allows
    spectune's rules to judge instead (``fallback``): then one line is logged and ``resolve``
    returns None from then on. A refusal of an unfamiliar kind (not an argument-check exception)
    counts as a verdict only while SGLang still accepts the first command line it accepted:
    otherwise the installation changed under the study."""

    def __init__(self, spawn: Callable[[], Pipe | None], pipe: Pipe, version: str | None,
                 where: str,
                 gpu: str | None = None, *, fallback: bool = False, seams: Sequence[str] = (),
                 build: str | None = None) -> None:
        self._spawn = spawn
        self._pipe: Pipe | None = pipe
        self.version = version
        self.where = where
        self.gpu = gpu
        self.fallback = fallback
        #: How the GPU was shown to SGLang (torch.cuda probes, SGLang's helpers, override_platform).
        self.seams = tuple(seams)
        #: Tells builds of one version apart (a hash of SGLang's server_args.py): the option table
        #: cache's key.
        self.build = build
        self._cache: dict[tuple[str, ...], Answer] = {}
        self._known_good: tuple[str, ...] | None = None
        self._lock = threading.Lock()

    @classmethod
    def start(cls, spawn: Callable[[], Pipe | None], *, where: str, fallback: bool = False,
              start_timeout_s: float = START_TIMEOUT_S) -> SGLangResolver | None:
        """Start the resolver (importing SGLang may take ``start_timeout_s``). When SGLang cannot be
        asked there: ``SGLangCannotJudge`` naming the cause and the fix — or, with ``fallback``,
        None and one logged line (spectune's rules then judge)."""
        pipe, first = _started(spawn, start_timeout_s)
        if pipe is None or first is None or "version" not in first or first.get("unavailable"):
            why = (first or {}).get("unavailable")
            give_up(cannot_judge(where, why) if why else SGLangCannotJudge(
                where, f"its Python did not start or did not answer within {start_timeout_s:g} s",
                "check that the interpreter of [target] command (or [target] python) runs there"),
                    fallback)
            return None
        return cls(spawn, pipe, first.get("version"), where, first.get("gpu"), fallback=fallback,
                   seams=first.get("seams") or (), build=first.get("build"))

    def resolve(self, server_argv: Sequence[str]) -> Answer | None:
        """SGLang's answer for ``server_argv`` (server arguments only, as ``sglang serve`` gets
        them); None when spectune's rules judge instead (``fallback``)."""
        key = tuple(server_argv)
        with self._lock:
            if key not in self._cache:
                data = self._ask(json.dumps(list(server_argv)))
                if data is None:
                    return None
                answer = Answer(data.get("verdict") == "accepted", data.get("error"),
                                data.get("exit_code"), data.get("effective"), data.get("stage"))
                if not answer.accepted and not self._is_verdict(answer):
                    self._stop(cannot_judge(self.where, answer.error or "no error line"))
                    return None
                if answer.accepted and self._known_good is None:
                    self._known_good = key
                self._cache[key] = answer
            return self._cache[key]

    def _is_verdict(self, answer: Answer) -> bool:
        error = answer.error or ""
        if setup_problem(error) is not None:
            return False
        if is_verdict(error, answer.exit_code):
            return True
        # nothing accepted yet to compare with: SGLang cannot be shown to judge
        if self._known_good is None:
            return False
        again = self._ask(json.dumps(list(self._known_good)))
        return again is not None and again.get("verdict") == "accepted"

    def option_table(self) -> dict[str, Any] | None:
        """This SGLang's own option table (``ServerArgs.add_cli_args`` on a fresh parser, the format
        of tuner/sglang/data); None when this SGLang cannot list it (or the resolver is gone)."""
        with self._lock:
            data = self._ask(json.dumps({"table": True}), key="table")
        table = (data or {}).get("table")
        return table if isinstance(table, dict) else None

    def _ask(self, request: str, key: str = "verdict") -> dict[str, Any] | None:
        if self._pipe is None:
            return None  # gone earlier (and said so then)
        for attempt in (1, 2):
            pipe = self._pipe
            try:
                pipe.send(request)
                data = _json_line(pipe.receive(ANSWER_TIMEOUT_S))
            except OSError:
                data = None
            if data is not None and key in data:
                return data
            pipe.close()
            self._pipe = None
            if attempt == 1:  # a dropped SSH connection or a crashed process: one fresh start
                fresh, first = _started(self._spawn)
                if fresh is not None and first is not None \
                        and first.get("version") == self.version and not first.get("unavailable"):
                    self._pipe = fresh
                    continue
                if fresh is not None:
                    fresh.close()
            break
        self._stop(SGLangCannotJudge(
            self.where, f"its resolver stopped answering (twice, {ANSWER_TIMEOUT_S:g} s "
            "each)", "check the target's SGLang installation, then run "
                     "the study again "
            "(it resumes)"))
        return None

    def _stop(self, exc: SGLangCannotJudge) -> None:
        """Stop asking: raise ``exc`` — or, with ``fallback``, say once that the rules judge from
        now on."""
        if self._pipe is not None:
            self._pipe.close()
            self._pipe = None
        give_up(exc, self.fallback)

    def check(self, server_argv: Sequence[str]) -> Answer | None:
        """``resolve``, raising ``DeployFailed("invalid-flags")`` with SGLang's own error when it
        refuses."""
        answer = self.resolve(server_argv)
        if answer is not None and not answer.accepted:
            raise SGLangRefused(refusal(answer, self.version, self.where), answer.error or "")
        return answer

    def close(self) -> None:
        if self._pipe is not None:
            self._pipe.close()
            self._pipe = None


class AskingTarget(Target):
    """What a target whose SGLang a resolver asks has in common (``local``, ``systemd-ssh``): the
    installed version, the target's own option table, and the table its launch commands are rendered
    with."""

    _resolver: SGLangResolver | None
    table: OptionTable

    def installed_sglang(self) -> str | None:
        return self._resolver.version if self._resolver is not None else None

    def sglang_table(self,
                     cached: Callable[[str, str],
                                      OptionTable | None] | None = None) -> OptionTable | None:
        return table_of(self._resolver, cached)

    def use_table(self, table: OptionTable) -> None:
        self.table = table

    def sglang_build(self) -> str | None:
        return self._resolver.build if self._resolver is not None else None


def start_resolver(spawn: Callable[[], Pipe | None] | None, command: Sequence[str], *,
                   where: str, fallback: bool) -> SGLangResolver | None:
    """The resolver of a target whose server runs ``command``: ``spawn`` starts it under the
    command's Python (None: the command names none). A command that is not SGLang's launcher (the
    simulator) has no SGLang to ask: spectune's rules judge, as for the simulated target. One that
    is, but whose Python cannot be told, cannot be judged (``SGLangCannotJudge``, or the rules after
    one line with ``fallback``)."""
    if spawn is None:
        if any(is_sglang_script(word) or word.startswith("sglang") for word in command):
            give_up(SGLangCannotJudge(where, f"no Python in [target] command {list(command)}",
                                      "set [target] python (systemd-ssh), or name the interpreter "
                                      "in the command"),
                    fallback)
        return None
    return SGLangResolver.start(spawn, where=where, fallback=fallback)


def give_up(exc: SGLangCannotJudge, fallback: bool) -> None:
    """Raise ``exc`` — or, where the study lets spectune's rules judge instead, say so in one logged
    line."""
    if not fallback:
        raise exc
    log.warning("%s; spectune's own rules judge the configurations instead ([target] "
                "when_sglang_cannot_judge = \"rules\")", str(exc).split(" — ", 1)[0])


#: The prefix of every refusal by the target's own SGLang (``refusal``): how a stored reason is told
#: from one by spectune's rules in records written before the reason carried its source.
REFUSAL_PREFIX = "SGLang "


def refusal(answer: Answer, version: str | None, where: str) -> str:
    """What a trial SGLang refuses is told (SGLang's own error line)."""
    stage = f", while {answer.stage}" if answer.stage else ""
    return (f"SGLang {version} on {where} refuses this configuration (exit "
            f"{answer.exit_code}{stage}): {answer.error}")


def table_of(resolver: SGLangResolver | None,
             cached: Callable[[str, str], OptionTable | None] | None = None) -> OptionTable | None:
    """The option table of the SGLang ``resolver`` asks — from ``cached`` (version, build) when it
    holds it, else read there; None when there is no resolver or it cannot list its table."""
    if resolver is None or resolver.version is None:
        return None
    if cached is not None and resolver.build is not None:
        table = cached(resolver.version, resolver.build)
        if table is not None:
            return table
    data = resolver.option_table()
    try:
        return OptionTable.from_json(data) if data is not None else None
    except (KeyError, TypeError, ValueError):
        return None


def _started(spawn: Callable[[], Pipe | None],
             timeout_s: float = START_TIMEOUT_S) -> tuple[Pipe | None, dict[str, Any] | None]:
    pipe = spawn()
    if pipe is None:
        return None, None
    first = _json_line(pipe.receive(timeout_s))
    if first is None or "version" not in first or first.get("unavailable"):
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
    """For a launch command ``python -m sglang.launch_server ARGS`` (or ``.../bin/sglang serve
    ARGS``): its interpreter (None when the command does not name one) and the server arguments it
    already carries."""
    argv = list(command)
    for i, token in enumerate(argv[:-1]):
        if token == "-m" and argv[i + 1].startswith("sglang"):
            python = argv[i - 1] if i > 0 and "python" in argv[i - 1].rsplit("/", 1)[-1] else None
            return python, argv[i + 2:]
        if is_sglang_script(token) and argv[i + 1] == "serve":
            return None, argv[i + 2:]
    return None, []


def is_sglang_script(path: str) -> bool:
    """Whether ``path`` names SGLang's console script (``sglang``, ``.../bin/sglang``): its Python
    is in its ``#!``."""
    return path.rsplit("/", 1)[-1] == "sglang"


def interpreter_of_script(first_line: str) -> str | None:
    """The Python a console script (``.../bin/sglang``) runs, from its ``#!`` line; None when it
    names none."""
    first_line = first_line.split("\n", 1)[0]
    if not first_line.startswith("#!"):
        return None
    words = first_line[2:].split()
    if words and words[0].rsplit("/", 1)[-1] == "env":
        words = [w for w in words[1:] if not w.startswith("-")]
    return words[0] if words and "python" in words[0].rsplit("/", 1)[-1] else None
