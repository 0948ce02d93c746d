"""The validated contents of a study file, as frozen values.

``tuner.study.load`` builds these from TOML through the models of ``tuner.study.models`` (the one
description of the file format); everything else (search space, targets, the study loop) reads
these.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from objectives.spec import BenchmarkSpec, ConstraintSpec
from tuner.sglang import versions
from tuner.sglang.hardware import UNKNOWN, Hardware
from tuner.sglang.launch import FlagValue
from tuner.sglang.options import OptionTable

if TYPE_CHECKING:
    # Only for annotations: tuner.targets imports this module.
    from tuner.targets.settings import TargetSettings

SamplerName = Literal["auto", "gp", "tpe", "random", "greybox"]
FinishAction = Literal["original", "best", "leave"]

#: The choice in ``speculative-algorithm`` choices that means "no speculation at all".
SPECULATION_OFF = "off"


@dataclass(frozen=True)
class StudySettings:
    name: str
    storage: str
    n_trials: int
    timeout_s: float | None
    sampler: SamplerName
    seed: int | None
    #: ``[study] sglang_version``: the release the study was written for, or None (whatever the
    #: target runs).
    sglang_version: str | None
    #: Optuna's RDB heartbeat (server databases only): a worker silent for ``heartbeat_grace_s`` is
    #: dead — its trial is re-run by another worker and its host lease can be taken over.
    heartbeat_interval_s: int = 60
    heartbeat_grace_s: int = 300
    #: ``[study] compare``: SGLang's own choices measured once beside the tuning
    #: (tuner/search/references.py).
    compare: tuple[str, ...] = ("adaptive", "off")


@dataclass(frozen=True)
class TargetSpec:
    """Which deployment target: its kind's validated, frozen settings model
    (tuner/targets/registry.py)."""

    settings: TargetSettings

    @property
    def kind(self) -> str:
        return self.settings.kind

    @property
    def startup_timeout_s(self) -> float:
        return self.settings.startup_timeout

    @property
    def hosts(self) -> tuple[str, ...]:
        """Identical machines one study uses at once, one worker each (``[target] hosts``); empty:
        the one ``host`` (systemd-ssh) or this machine. See tuner/study/hosts.py."""
        return self.settings.listed_hosts()


@dataclass(frozen=True)
class ParamSpec:
    """One tuned flag. Exactly one of (``low``/``high``) or ``choices`` is set.

    ``step`` is the grid of a numeric range (1 for ints unless given; required for floats, so that
    Optuna sees an integer and never proposes 0.7999999999999999).
    """

    flag: str
    value_kind: str
    low: int | float | None = None
    high: int | float | None = None
    step: int | float | None = None
    choices: tuple[FlagValue, ...] | None = None


@dataclass(frozen=True)
class ObjectiveSpec:
    """Weights keyed by phase concurrency: C=1 scores per-request tok/s, larger C aggregate
    tok/s."""

    weights: dict[int, float]
    constraints: tuple[ConstraintSpec, ...] = ()
    mode: Literal["weighted", "pareto"] = "weighted"


@dataclass(frozen=True)
class OutputCheckSpec:
    """``[check]``: the output check (tuner/run/outputs.py). ``reason``: why it is off, when it
    is."""

    outputs: bool = True
    reason: str | None = None
    prompts: int = 4
    max_tokens: int = 32


@dataclass(frozen=True)
class StudySpec:
    path: Path
    study: StudySettings
    target: TargetSpec
    server_flags: dict[str, FlagValue]
    server_env: dict[str, str]
    search: tuple[ParamSpec, ...]
    baseline: dict[str, FlagValue]
    benchmark: BenchmarkSpec
    objective: ObjectiveSpec
    finish: FinishAction
    #: What SGLang reads besides the command line (``[server] model_architecture``, ``[target] gpu``
    #: / ``compute_capability``, or the simulator's profile); unknown parts are left to SGLang,
    #: never guessed.
    hardware: Hardware = UNKNOWN
    #: The option table the flags were checked against (names, values): the shipped table nearest
    #: ``sglang_version`` when loaded, the target's own once preflight has read it
    #: (tuner.study.compat).
    table: OptionTable | None = None
    #: One line on which table that is when it is not the named release's own (``spectune validate``
    #: says it).
    table_note: str | None = None
    check: OutputCheckSpec = OutputCheckSpec()

    @property
    def option_table(self) -> OptionTable:
        """The table to check and render this study's flags with (``table``, else the nearest
        shipped one)."""
        return (self.table if self.table is not None
                else versions.table_for(self.study.sglang_version).table)

    @property
    def max_concurrency(self) -> int:
        return max(p.concurrency for p in self.benchmark.phases)
