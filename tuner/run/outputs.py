"""The output check: does a configuration say what the reference configuration says, at temperature
0?

Speculative decoding is meant to be lossless: at temperature 0 a configuration must generate the
reference's text. SGLang is not bitwise deterministic across batch shapes and kernels, so exact
equality is too strict; the check measures how much the texts agree and judges that against a
measured noise floor.

- **The statistic**: the mean over the probe prompts (objectives/probe.py) of the *common-prefix
  fraction*: the length of the text a configuration shares with the reference from the start, over
  the reference's length (1.0 = identical; 0.1 = it departs after a tenth). The exact-match rate and
  each prompt's first divergence are stored beside it.
- **The reference**: the baseline's probe outputs (the first trial the study deploys when it has no
  baseline, or when the baseline failed to start).
- **The noise floor**: the reference against itself with only the batch shape changed — its prompts
  once all at once, once one at a time, on the same server. Nothing about the configuration differs,
  so whatever disagreement that shows is noise.
- **The threshold**: ``FLOOR_SHARE`` × the floor. A configuration whose statistic is below it fails
  as ``wrong-output``: infeasible, never the winner, never confirmed, shown with one example (the
  prompt, the position where the texts part, and both continuations).

At a workload temperature above 0 the probe still generates greedily (temperature 0): that is what
can be compared. Sampled outputs cannot be compared text for text — a lossless configuration samples
the same *distribution*, not the same tokens — so the workload's own sampled answers are not judged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from objectives.probe import ProbeOutput

#: A configuration fails when its mean common-prefix fraction is below this share of the noise
#: floor's.
FLOOR_SHARE: Final = 0.5
#: Characters of each continuation an example keeps.
EXAMPLE_CHARS: Final = 80


@dataclass(frozen=True)
class Agreement:
    """How far ``outputs`` agree with ``reference``, prompt by prompt."""

    prefix_fraction: float  # mean common-prefix fraction over the prompts both answered
    exact_rate: float  # share of those prompts answered identically
    compared: int  # prompts both answered
    # the prompt that parts earliest: prompt, position, both continuations
    example: dict[str, Any] | None

    def to_json(self) -> dict[str, Any]:
        return {"prefix_fraction": self.prefix_fraction, "exact_rate": self.exact_rate,
                "compared": self.compared, "example": self.example}


def agreement(reference: Sequence[ProbeOutput], outputs: Sequence[ProbeOutput]) -> Agreement | None:
    """None when no prompt was answered by both."""
    fractions: list[float] = []
    exact = 0
    earliest: tuple[float, dict[str, Any]] | None = None
    for ref, out in zip(reference, outputs, strict=False):
        if ref.text is None or out.text is None:
            continue
        common = common_prefix(ref.text, out.text)
        fraction = 1.0 if ref.text == out.text else common / max(len(ref.text), len(out.text), 1)
        fractions.append(fraction)
        exact += ref.text == out.text
        if ref.text != out.text and (earliest is None or fraction < earliest[0]):
            earliest = (fraction, {"prompt": ref.prompt[-200:], "position": common,
                                   "reference": ref.text[common:common + EXAMPLE_CHARS],
                                   "output": out.text[common:common + EXAMPLE_CHARS],
                                   "agreed": ref.text[max(0, common - 40):common]})
    if not fractions:
        return None
    return Agreement(sum(fractions) / len(fractions), exact / len(fractions), len(fractions),
                     earliest[1] if earliest else None)


def common_prefix(a: str, b: str) -> int:
    """How many characters ``a`` and ``b`` share from the start (where they first differ)."""
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                min(len(a), len(b)))


@dataclass(frozen=True)
class Reference:
    """The study's reference outputs and their noise floor (``StudyKey.OUTPUT_REFERENCE``)."""

    trial: int
    outputs: tuple[ProbeOutput, ...]
    floor: float  # the reference's own agreement across batch shapes (statistic of the noise)
    floor_exact_rate: float

    @property
    def threshold(self) -> float:
        return FLOOR_SHARE * self.floor

    def to_json(self) -> dict[str, Any]:
        return {"trial": self.trial, "outputs": [o.to_json() for o in self.outputs],
                "floor": self.floor,
                "floor_exact_rate": self.floor_exact_rate, "threshold": self.threshold,
                "statistic": "mean common-prefix fraction", "floor_share": FLOOR_SHARE}

    @classmethod
    def from_json(cls, stored: Any) -> Reference | None:
        if not isinstance(stored, Mapping) or not isinstance(stored.get("outputs"), list):
            return None
        return cls(int(stored.get("trial") or 0),
                   tuple(ProbeOutput.from_json(o) for o in stored["outputs"]),
                   float(stored.get("floor") or 0.0), float(stored.get("floor_exact_rate") or 0.0))


def make_reference(trial: int, batched: Sequence[ProbeOutput],
                   one_by_one: Sequence[ProbeOutput]) -> Reference | None:
    """The reference from the reference configuration's two probes (None: too few answers to stand
    on)."""
    floor = agreement(one_by_one, batched)
    if floor is None or floor.compared < max(1, len(batched) // 2):
        return None
    return Reference(trial, tuple(batched), floor.prefix_fraction, floor.exact_rate)


@dataclass(frozen=True)
class Verdict:
    passed: bool
    record: dict[str, object]  # what the trial stores (``Key.OUTPUT_CHECK``)
    message: str


def judge(reference: Reference, outputs: Sequence[ProbeOutput]) -> Verdict:
    """Whether ``outputs`` agree with ``reference`` beyond the noise floor."""
    found = agreement(reference.outputs, outputs)
    failed = sum(1 for o in outputs if o.text is None)
    base = {"statistic": "mean common-prefix fraction", "floor": reference.floor,
            "threshold": reference.threshold,
            "reference_trial": reference.trial, "probe_failed": failed}
    if found is None:
        return Verdict(True, {**base, "result": "unchecked", "why": "no probe prompt was answered"},
                       "output check: no probe prompt was answered (the phases will tell why)")
    record = {**base, **found.to_json(),
              "result": "ok" if found.prefix_fraction >= reference.threshold
              else "wrong-output"}
    if found.prefix_fraction >= reference.threshold:
        return Verdict(True, record,
                       f"outputs agree with trial {reference.trial}'s: {found.prefix_fraction:.2f}")
    example = found.example or {}
    message = (f"outputs differ from trial {reference.trial}'s at temperature 0: mean "
               f"common-prefix fraction {found.prefix_fraction:.2f} over {found.compared} prompts, "
               f"below {reference.threshold:.2f} ({FLOOR_SHARE:g} × the noise floor "
               f"{reference.floor:.2f}); e.g. at character {example.get('position')}: reference "
               f"{example.get('reference', '')!r} vs {example.get('output', '')!r}")
    return Verdict(False, record, message)
