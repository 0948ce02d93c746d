"""``[check]``: what every deployed configuration must get right besides speed
(tuner/run/outputs.py)."""

from __future__ import annotations

from collections.abc import Iterator

from pydantic import Field

from tuner.core.fields import FileModel
from tuner.study.spec import OutputCheckSpec


class CheckSection(FileModel):
    """``[check]``: what every deployed configuration must get right besides speed (docs/metrics.md)."""  # noqa: E501 - verbatim in the JSON Schema

    outputs: bool = Field(True, description=(
        "Generate a few short prompts of the workload at temperature 0 with every deployed "
        "configuration and fail one whose text departs from the baseline's beyond the noise floor "
        "(wrong-output)."))
    reason: str | None = Field(None, max_length=500, description=(
        "Why the output check is off (required with outputs = false; stored with the study)."))
    prompts: int = Field(OutputCheckSpec.prompts, ge=1, le=64,
                         description="Prompts per configuration.")
    max_tokens: int = Field(OutputCheckSpec.max_tokens, ge=4, le=1024,
                            description="Tokens generated per prompt.")

    def check(self) -> Iterator[tuple[str, str]]:
        if not self.outputs and not (self.reason or "").strip():
            yield "reason", "say why the output check is off (outputs = false needs a reason)"

    def to_spec(self) -> OutputCheckSpec:
        return OutputCheckSpec(self.outputs, (self.reason or "").strip() or None, self.prompts,
                               self.max_tokens)
