"""What spectune knows about SGLang: its option tables (one data file per version) and its validity
rules."""

from __future__ import annotations

from tuner.sglang.options import (
    AmbiguousOption,
    OptionSpec,
    OptionTable,
    UnknownOption,
    available_versions,
    load_option_table,
    newest_version,
)

__all__ = [
    "AmbiguousOption",
    "OptionSpec",
    "OptionTable",
    "UnknownOption",
    "available_versions",
    "load_option_table",
    "newest_version",
]
