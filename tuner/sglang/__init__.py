"""What spectune knows about SGLang: its option tables (one data file per version) and its validity rules."""

from __future__ import annotations

from tuner.sglang.options import (
    DEFAULT_SGLANG_VERSION,
    AmbiguousOption,
    OptionSpec,
    OptionTable,
    UnknownOption,
    available_versions,
    load_option_table,
)

__all__ = [
    "DEFAULT_SGLANG_VERSION",
    "AmbiguousOption",
    "OptionSpec",
    "OptionTable",
    "UnknownOption",
    "available_versions",
    "load_option_table",
]
