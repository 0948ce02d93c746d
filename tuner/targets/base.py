"""The deployment-target contract: apply one server configuration, report ready or why not.

Three implementations (``systemd-ssh``, ``local``, ``simulated``) honour the same contract and are
checked by one contract test suite. The study loop only ever sees this module's types.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from tuner.core.errors import SpectuneError
from tuner.sglang.launch import LaunchCommand, ServerConfig

if TYPE_CHECKING:
    from objectives.spec import WorkloadSpec
    from tuner.sglang.options import OptionTable

FailureClass = Literal["invalid-flags", "out-of-memory", "startup-timeout", "unreachable",
                       "crashed", "other"]
FAILURE_CLASSES: tuple[FailureClass, ...] = (
    "invalid-flags", "out-of-memory", "startup-timeout", "unreachable", "crashed", "other",
)
#: Failures of a server that did start: the configuration's fault as much as a failed start is
#: (tuner/run/trial.py stores them as infeasible, never queues them again).
RunFailureClass = Literal["crashed-under-load", "hung", "wrong-output"]
RUN_FAILURE_CLASSES: tuple[RunFailureClass, ...] = ("crashed-under-load", "hung", "wrong-output")


class FailureCause(enum.StrEnum):
    """Why a configuration failed, typed (tuner/targets/classify.py decides it from SGLang's own
    messages).

    The samplers act on the cause: a too-small KV pool is cured by a *larger* static memory
    fraction, an out-of-memory in graph capture or decode by a smaller one (or smaller graphs, fewer
    draft tokens)."""

    # "Not enough memory. Please try to increase --mem-fraction-static."
    KV_POOL_TOO_SMALL = "kv-pool-too-small"
    WEIGHTS_OOM = "weights-oom"  # out of memory while loading weights: the model does not fit
    GRAPH_CAPTURE_OOM = "graph-capture-oom"  # "Capture cuda graph failed: CUDA out of memory ..."
    # torch.OutOfMemoryError once serving: a decode batch beyond the free memory
    DECODE_OOM = "decode-oom"
    OUT_OF_MEMORY = "out-of-memory"  # out of memory at a stage the log does not tell
    INVALID_FLAGS = "invalid-flags"  # argparse or SGLang's validation refused the command line
    STARTUP_TIMEOUT = "startup-timeout"
    UNREACHABLE = "unreachable"
    CRASH = "crash"  # the process died (while starting, or under load without an out-of-memory)
    HANG = "hang"  # it stopped answering: no progress, health check unanswered
    # it kept running but answered a burst of 5xx / reset connections
    SERVER_ERRORS = "server-errors"
    # different text at temperature 0 than the reference configuration
    WRONG_OUTPUT = "wrong-output"
    OTHER = "other"

    @property
    def out_of_memory(self) -> bool:
        return self in (FailureCause.KV_POOL_TOO_SMALL, FailureCause.WEIGHTS_OOM,
                        FailureCause.GRAPH_CAPTURE_OOM,
                        FailureCause.DECODE_OOM, FailureCause.OUT_OF_MEMORY)

    @property
    def needs_less_memory(self) -> bool:
        """More memory for graphs, draft tokens or batches makes it worse (unlike a too-small KV
        pool)."""
        return self.out_of_memory and self is not FailureCause.KV_POOL_TOO_SMALL


@dataclass(frozen=True)
class DeployPlan:
    """What a target would do for one configuration, described without doing it (``spectune validate
    --plan``).

    Each kind renders it from the same code that deploys, so the text is exactly what a deploy would
    write or run."""


    #: What ``text`` is: "drop-in /etc/systemd/system/x.service.d/50-spectune.conf on gpu-host",
    #: "command line".
    title: str
    #: The drop-in's text or the shell command line, exactly as deployed.
    text: str
    #: How one deploy applies it, in order.
    steps: tuple[str, ...]
    #: What runs once before the first trial.
    preflight: tuple[str, ...]
    #: How readiness is decided.
    readiness: str


class DeployFailed(SpectuneError):
    """The server did not become ready with this configuration — the configuration's fault.

    The study records it on the trial (COMPLETE + constraint, so samplers learn to avoid the region)
    and goes on. ``failure_class`` is one of ``FAILURE_CLASSES``; ``log_tail`` the last lines the
    server wrote. ``timings`` (``deploy_s``, ``ready_s``): how long the start ran until it failed,
    where the raiser knows better than the wall clock (a performance model's failed start costs
    modelled minutes, not the microseconds it took to say so); stored over the measured
    ``deploy_s``.
    """

    def __init__(self, failure_class: FailureClass, message: str, log_tail: str = "", *,
                 timings: Mapping[str, float] | None = None,
                 cause: FailureCause | None = None) -> None:
        self.failure_class = failure_class
        self.log_tail = log_tail
        #: The typed cause where the raiser knows it; None: tuner/targets/classify.py ``cause_of``
        #: decides.
        self.cause = cause
        self.timings: dict[str, float] = dict(timings or {})
        #: Where the failed server's log is (a file, a journalctl command); the measurer fills it in
        #: from ``Target.log_location`` so the stored trial points at it.
        self.log: str | None = None
        super().__init__(f"{failure_class}: {message}")


class RunFailed(SpectuneError):
    """A server that started failed while measured — the configuration's fault, as a failed start
    is: it crashed under load (``cause`` e.g. ``FailureCause.DECODE_OOM``), hung, or answered
    wrongly. A ``Measurer`` may raise it from ``measure`` (tuner/run/trial.py stores the trial
    run-failed: infeasible, never queued again)."""

    def __init__(self, failure_class: RunFailureClass, message: str, *,
                 cause: FailureCause | None = None, log_tail: str = "") -> None:
        if failure_class not in RUN_FAILURE_CLASSES:
            raise ValueError(
                f"RunFailed: failure_class {failure_class!r} is not one of {RUN_FAILURE_CLASSES}")
        self.failure_class = failure_class
        self.cause = cause
        self.log_tail = log_tail
        super().__init__(f"{failure_class}: {message}")
        self.message = message


class SGLangRefused(DeployFailed):
    """``Target.resolve``: the target's own SGLang refuses the command line (``invalid-flags``, with
    its own error line) — its verdict, told apart from a refusal by spectune's rules wherever a
    rejection is shown."""

    def __init__(self, message: str, log_tail: str = "") -> None:
        super().__init__("invalid-flags", message, log_tail)


class TargetUnavailable(SpectuneError):
    """The target itself cannot be used (host unreachable, SSH refused, host key mismatch) — not the
    config's fault. The study retries with backoff and then stops with this message; nothing is
    recorded as measured."""

    exit_code = 3


@dataclass(frozen=True)
class Deployment:
    """A server that answered its readiness check. ``base_url`` is where benchmarks connect."""

    config: ServerConfig
    launch: LaunchCommand
    base_url: str
    deploy_s: float  # writing/starting until the process or unit was started
    ready_s: float  # started until the readiness check answered 200
    log_location: str = ""
    #: What the target's own SGLang resolved for this command line (tuner/targets/resolver.py);
    #: None: not asked.
    effective: dict[str, Any] | None = None


class Target(ABC):
    """Apply configurations to one SGLang server.

    Contract:
    - ``deploy`` stops whatever this target started before, starts ``config``, and returns once
      ``/health_generate`` (else ``/health``) answers 200 — never on ``/v1/models``. If the server
      exits while we wait, it raises ``DeployFailed`` within 5 s of the exit, with the classified
      cause and the log tail; if it is not ready by the startup timeout,
      ``DeployFailed("startup-timeout")``.
    - ``TargetUnavailable`` means the target cannot be reached at all; nothing was changed that
      ``restore`` cannot undo.
    - ``restore`` puts back the server's original configuration (for systemd: removes our drop-in
      and restarts; for a local process: stops it). It is idempotent and safe after an interrupted
      run.
    - ``detect_leftover`` reports what an interrupted earlier run left behind; ``restore`` cleans it
      up even when this process never deployed anything.
    - ``close`` releases connections; it does not change what runs.
    """

    kind: str
    #: How much faster than real time the server runs (only the simulator runs faster): measured
    #: rates are divided by it and durations multiplied, so stored metrics read as the real
    #: server's.
    time_scale: float = 1.0
    #: The server's own options every deploy keeps, as its unit writes them (a systemd unit's with
    #: ``unit_flags = "carry"``); set by ``preflight``.
    carried: tuple[str, ...] = ()
    #: What ``preflight`` found that the operator should read (printed before the study starts).
    notes: tuple[str, ...] = ()

    @abstractmethod
    def preflight(self, flags: Iterable[str]) -> None:
        """Check that the installed server knows every option in ``flags`` (its own ``--help``).

        Raises ``TargetUnavailable`` when the target cannot be reached and
        ``DeployFailed("invalid-flags")`` naming the unknown options."""

    @abstractmethod
    def deploy(self, config: ServerConfig) -> Deployment: ...

    @abstractmethod
    def restore(self) -> None: ...

    @abstractmethod
    def log_tail(self, lines: int = 50) -> str: ...

    @property
    def log_location(self) -> str | None:
        """Where the server started last writes its log, where the kind keeps one per start (local
        and simulated: a file; None: ``log_tail`` is all there is)."""
        return None

    @abstractmethod
    def plan(self, config: ServerConfig) -> DeployPlan:
        """What ``deploy(config)`` would write or run, and the preflight and readiness check around
        it. Contacts nothing."""

    @abstractmethod
    def check_access(self) -> tuple[str, ...]:
        """Contact the target the way a study first does (with timeouts) and say what was found, one
        line each; ``TargetUnavailable`` when it cannot be used. Changes nothing."""

    def expected_rate(self, config: ServerConfig, workload: WorkloadSpec,
                      concurrency: int) -> float | None:
        """Output tokens per second (all requests together) ``config`` should produce at
        ``concurrency`` closed-loop clients, in real seconds of this target, where the target can
        know (the simulator models it); None: only a measurement can tell."""
        return None

    def expected_startup_s(self, config: ServerConfig) -> float | None:
        """How long deploying ``config`` should take until ready, where the target can know (the
        simulator models it); None: only a measurement can tell."""
        return None

    def installed_sglang(self) -> str | None:
        """The SGLang version the preflight found installed on the target (None: not asked or not
        importable)."""
        return None

    def sglang_table(self,
                     cached: Callable[[str, str],
                                      OptionTable | None] | None = None) -> OptionTable | None:
        """The option table of the target's own SGLang (its ``ServerArgs.add_cli_args``), from
        ``cached`` (version, build) when that holds it, else read there; None where SGLang cannot be
        asked. After ``preflight``."""
        return None

    def sglang_build(self) -> str | None:
        """What tells builds of the installed SGLang version apart (the option table cache's key);
        None: not asked."""
        return None

    def use_table(self, table: OptionTable) -> None:  # noqa: B027 - optional hook
        """Render launch commands with ``table`` (the target's own SGLang's) from now on."""

    def resolve(self, config: ServerConfig) -> dict[str, Any] | None:
        """What the target's own SGLang will run for ``config`` — its effective values
        (tuner/targets/resolver.py) — without starting anything; None when SGLang cannot be asked
        there (spectune's rules then judge). Raises ``DeployFailed("invalid-flags")`` with SGLang's
        own error when it refuses the command line."""
        return None

    def exit_info(self) -> Any:
        """How the server this target started last has ended (a
        ``tuner.targets.classify.ExitInfo``), or None while it runs or where the target cannot tell:
        asked after a phase whose requests failed."""
        return None

    def detect_leftover(self) -> str | None:
        """What an interrupted earlier run of spectune left running or written on this target (a
        drop-in of ours, a server process of ours), described in one line — or None. ``restore``
        removes it; ``deploy`` replaces it. Default: nothing can be left over."""
        return None

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections (default: nothing to release)."""

    def __enter__(self) -> Target:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
