"""One tuned flag as an Optuna parameter: its encoding (int, scaled float, ladder index,
categorical, draft position) and the rule that turns a value into the flag's value
(tuner/study/space.py explains the encodings)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution

from tuner.sglang import rules
from tuner.sglang.launch import FlagValue
from tuner.study.spec import ParamSpec

Encoding = Literal["int", "scaled", "ladder", "categorical", "draft-fraction"]
DRAFT = "--speculative-num-draft-tokens"


@dataclass(frozen=True)
class Dimension:
    """One Optuna parameter and the rule that turns its value into a flag value."""

    param: ParamSpec
    name: str
    encoding: Encoding
    low: int = 0
    high: int = 0
    step: int = 1
    choices: tuple[Any, ...] = ()

    @property
    def flag(self) -> str:
        return self.param.flag

    def distribution(self) -> BaseDistribution:
        if self.encoding == "categorical":
            return CategoricalDistribution(self.choices)
        return IntDistribution(self.low, self.high, step=self.step)

    def encoded_values(self) -> list[Any]:
        if self.encoding == "categorical":
            return list(self.choices)
        return list(range(self.low, self.high + 1, self.step))

    def size(self) -> int:
        return len(self.encoded_values())

    def decode(self, value: Any) -> FlagValue:
        """The flag value for an encoded value (draft-fraction is decoded by the space, which knows
        the tree)."""
        if self.encoding == "scaled":
            step = float(self.param.step or 1)
            return round(value * step, _decimals(step))
        if self.encoding == "ladder":
            return self.choices[value]
        return value

    def encode(self, flag_value: Any) -> Any:
        if self.encoding == "scaled":
            return round(flag_value / float(self.param.step or 1))
        if self.encoding == "ladder":
            return self.choices.index(flag_value)
        if self.encoding == "draft-fraction":
            return min(max(int(flag_value) - int(self.param.low or 0), self.low), self.high)
        return flag_value

    def describe(self) -> str:
        p = self.param
        if self.encoding == "int":
            return f"int {p.low}..{p.high}" + (f" step {p.step}" if p.step not in (None, 1) else "")
        if self.encoding == "scaled":
            return f"{p.low}..{p.high} step {p.step} (int {self.low}..{self.high} × {p.step})"
        if self.encoding == "ladder":
            return f"ladder {list(self.choices)} (index 0..{self.high})"
        if self.encoding == "draft-fraction":
            return (f"{p.low}..{p.high}, clipped to the tree's limit (position 0..{self.high} "
                    "in [min, min(max, topk+(steps−1)·topk²+1)])")
        return f"one of {list(self.choices)}"



def dimension_of(p: ParamSpec) -> Dimension:
    name = p.flag.removeprefix("--")
    if p.choices is not None:
        numbers = [c for c in p.choices if isinstance(c, int | float) and not isinstance(c, bool)]
        if len(numbers) == len(p.choices) > 1:
            ladder = tuple(sorted(numbers))
            return Dimension(p, f"{name}.idx", "ladder", 0, len(ladder) - 1, 1, ladder)
        return Dimension(p, name, "categorical", choices=tuple(p.choices))
    assert p.low is not None and p.high is not None
    if p.flag == DRAFT:
        return Dimension(p, f"{name}.pos", "draft-fraction", 0, int(p.high - p.low), 1)
    if p.value_kind == "float" or (p.step is not None and not float(p.step).is_integer()):
        step = float(p.step or 1)
        return Dimension(p, f"{name}.k", "scaled", round(p.low / step), round(p.high / step), 1)
    return Dimension(p, name, "int", int(p.low), int(p.high), int(p.step or 1))


def draft_from_fraction(d: Dimension, position: int, steps: int, topk: int) -> int:
    """Map a position in 0..(max−min) onto [min, cap] where cap is the largest draft the tree can
    verify."""
    low, high = int(d.param.low or 2), int(d.param.high or 2)
    cap = min(high, rules.max_draft_tokens(steps, topk))
    low = min(low, cap)
    if d.high == 0:
        return low
    return low + round(position * (cap - low) / d.high)


def fraction_for_draft(d: Dimension, draft: int, steps: int, topk: int) -> int:
    """The position that decodes to ``draft`` draft tokens under this tree
    (``draft_from_fraction``'s inverse; the middle of the positions that give it). A count the tree
    cannot give (more than it verifies, or outside the search range) takes the last position of the
    nearest count it can: for too many, its cap — what the rule that refuses it names — at the top
    of the range, where a deeper tree verifies more."""
    decoded = {p: draft_from_fraction(d, p, steps, topk) for p in range(d.low, d.high + 1)}
    exact = [p for p, v in decoded.items() if v == draft]
    if exact:
        return exact[len(exact) // 2]
    return max(decoded, key=lambda p: (-abs(decoded[p] - draft), p))


def _decimals(step: float) -> int:
    text = repr(step)
    return len(text.split(".")[1]) if "." in text and "e" not in text else 6
