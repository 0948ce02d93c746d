"""What every target kind's ``[target]`` settings can do; each kind subclasses this next to its
target class.

A kind's settings model parses and validates its own ``[target]`` table (keys, types, defaults,
ranges) and carries the kind's behaviour the rest of spectune asks for — which hosts it covers, the
one-host view a worker deploys to, the launch command prefix, how to build the target — so no caller
needs a ``kind ==`` chain. The kinds are listed once, in ``tuner.targets.registry``.
"""

from __future__ import annotations

import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field, field_validator

from tuner.core.fields import FileModel, PositiveDuration
from tuner.sglang.hardware import Hardware, capability_of_gpu, memory_of_gpu, parse_capability

if TYPE_CHECKING:
    from tuner.sglang.options import OptionTable
    from tuner.targets.base import Target

@dataclass(frozen=True)
class Placement:
    """Where a study keeps what a target writes: the study's name (marks its processes and units)
    and the folder of its study file (relative paths such as ``log_dir`` start there)."""

    study: str
    base_dir: Path


#: How long a deploy may take until /health_generate answers (model loading, CUDA-graph capture).
DEFAULT_STARTUP_TIMEOUT_S = 900.0


class TargetSettings(FileModel):
    """The keys every kind has. Subclasses narrow ``kind`` to their own ``Literal`` name."""

    kind: str = Field(description="Which deployment target runs the server.")
    startup_timeout: PositiveDuration = Field(
        DEFAULT_STARTUP_TIMEOUT_S,
        description="How long one deploy may take until the server answers /health_generate (model "
                    "loading, CUDA-graph capture); a slower start is a failed trial.")

    gpu: str | None = Field(None, description=(
        "The target's GPU, as nvidia-smi names it or short (\"H100\", \"B200\", \"RTX PRO 6000\"): "
        "SGLang's default attention backend, forced page sizes and hardware gates depend on it. "
        "Default: the simulator's profile, else unknown — values that depend on it are recorded as "
        "unknown and configurations whose verdict depends on it are refused."))
    compute_capability: str | None = Field(None, description=(
        "The GPU's compute capability (e.g. \"9.0\"), for a GPU spectune does not know by name; "
        "wins over gpu."),
        json_schema_extra={"pattern": r"^\d{1,2}\.\d$"})
    when_sglang_cannot_judge: Literal["stop", "rules"] = Field("stop", description=(
        "When the target's own SGLang cannot judge configurations (not importable, no GPU visible "
        "to it, a missing module such as sgl_kernel, a resolver that crashes or does not answer): "
        "\"stop\" ends the preflight with exit 3 and one line naming the cause and the fix; "
        "\"rules\" says so in one line and lets spectune's own rules judge instead. Never a "
        "rejected trial either way."))

    #: Whether the target's own launch command is the command a user would run (``spectune best
    #: --export``).
    launch_is_exact: ClassVar[bool] = True
    #: Whether the server keeps serving after spectune exits (``spectune deploy`` then returns at
    #: once).
    outlives_spectune: ClassVar[bool] = False

    @field_validator("gpu")
    @classmethod
    def _known_gpu(cls, value: str | None) -> str | None:
        if value is not None and capability_of_gpu(value) is None:
            raise ValueError(
                f"unknown GPU {value!r}: set compute_capability (e.g. \"9.0\") instead")
        return value

    @field_validator("compute_capability")
    @classmethod
    def _capability(cls, value: str | None) -> str | None:
        if value is not None:
            parse_capability(value)
        return value

    @classmethod
    def starter(cls, model: str | None) -> dict[str, Any]:
        """The keys ``spectune init`` writes for this kind (placeholders where only the user knows),
        so the file validates as written; every other key is written commented out."""
        return {}

    @classmethod
    def starter_flags(cls, model: str | None) -> dict[str, Any]:
        """Server flags ``spectune init`` writes unless told otherwise (e.g. the simulator's model
        and draft); without model-path here the user must name the model."""
        return {}

    @classmethod
    def starter_examples(cls) -> dict[str, Any]:
        """Example values of keys without a default, shown commented out by ``spectune init``."""
        return {"gpu": "H100", "compute_capability": "9.0"}

    def resolver_gpu(self) -> str | None:
        """``[target] gpu`` as the resolver reads it where nvidia-smi cannot be asked
        (``SPECTUNE_GPU``: ``name|major.minor|memory_mb|count``); None when unnamed or its memory is
        not known."""
        if self.gpu is None:
            return None
        capability = parse_capability(self.compute_capability) if self.compute_capability else \
            capability_of_gpu(self.gpu)
        memory = memory_of_gpu(self.gpu)
        if capability is None or memory is None:
            return None
        return f"{self.gpu}|{capability[0]}.{capability[1]}|{memory}|1"

    def hardware(self) -> Hardware:
        """What this target tells about the GPU (and, for the simulator, the model); None parts
        unknown."""
        if self.compute_capability is not None:
            return Hardware(None, parse_capability(self.compute_capability))
        return Hardware(None, capability_of_gpu(self.gpu) if self.gpu else None)

    @classmethod
    def kind_name(cls) -> str:
        """The ``kind`` this model accepts, read from its ``Literal`` annotation."""
        (name,) = typing.get_args(cls.model_fields["kind"].annotation)
        return str(name)

    def listed_hosts(self) -> tuple[str, ...]:
        """``[target] hosts``: identical machines one study uses at once; empty when the kind has
        none."""
        return ()

    def covered_hosts(self, study: str) -> tuple[str, ...]:
        """Every host a worker of this study may lease (tuner/study/hosts.py)."""
        return self.listed_hosts()

    def for_host(self, host: str, study: str) -> TargetSettings:
        """These settings as the worker on ``host`` sees them."""
        return self

    def launch_prefix(self) -> tuple[str, ...] | None:
        """The server command the flags are appended to, when the study file names one."""
        return None

    def restored_message(self) -> str:
        """What ``spectune deploy --original`` prints after ``restore()``."""
        return "restored the original configuration"

    def check(self) -> Iterator[tuple[str, str]]:
        """Problems between keys (``(key, problem)``) once every key is valid on its own."""
        return iter(())

    def make_target(self, placement: Placement, table: OptionTable) -> Target:
        """The target these settings describe. Nothing is contacted until the first call on it."""
        raise NotImplementedError


def log_dir_of(placement: Placement, given: str | None) -> Path:
    """``log_dir`` relative to the study file; default ``.spectune/<study>/logs`` beside it."""
    base = placement.base_dir
    return ((base / Path(given).expanduser()) if given
            else base / ".spectune" / placement.study / "logs")
