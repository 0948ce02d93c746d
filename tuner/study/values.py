"""Value types of study-file keys that pydantic's own types do not say: seeds, counts, weights,
environment values and flag values (tuner/study/models.py declares the keys with them).
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import Field, PlainValidator, WithJsonSchema

#: Seeds go to NumPy and Optuna, whose generators take unsigned 32-bit seeds.
Seed = Annotated[int, Field(ge=0, lt=2**32)]
PositiveInt = Annotated[int, Field(gt=0)]
#: The most requests or tokens one key may ask for: beyond the longest context of any served model,
#: and more requests than a phase could send overnight.
MAX_COUNT = 10_000_000


def _env_value(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"must be a string or number, not {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"must be a finite number, not {value!r}")
    return str(value)


#: The largest weight: only the weights' ratios count, and past this their sum, or a score under
#: them, could overflow a float (the grey-box sampler divides by both).
MAX_WEIGHT = 1e6


def _weight(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ValueError(f"must be a number ≥ 0, not {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"must be a finite number, not {value!r}")
    if value > MAX_WEIGHT:
        raise ValueError(
            f"must be at most {MAX_WEIGHT:g}, not {value!r} (only the ratios count: c1 = 0.7, "
            "c64 = 0.3)")
    return float(value)


Weight = Annotated[float, PlainValidator(_weight),
                   WithJsonSchema({"type": "number", "minimum": 0, "maximum": MAX_WEIGHT})]
EnvValue = Annotated[str, PlainValidator(_env_value),
                     WithJsonSchema({"type": ["string", "number"]})]
#: Any TOML value: SGLang's option table, not the schema, knows what each flag takes
#: (tuner.study.flags).
FlagValueField = Annotated[Any, WithJsonSchema({})]
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
