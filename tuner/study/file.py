"""The study file's public entry points, kept where callers have always imported them from.

The format is described once, by the models of ``tuner.study.models``; ``tuner.study.load`` validates a file
against them and ``tuner.study.flags`` checks its SGLang flags.
"""

from __future__ import annotations

from tuner.study.load import load_study_file
from tuner.study.objective import CONSTRAINT_METRICS, parse_constraint

__all__ = ["CONSTRAINT_METRICS", "load_study_file", "parse_constraint"]
