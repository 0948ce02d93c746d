"""The one root error type and its families.

The CLI turns any ``SpectuneError`` into a message and an exit code; anything else is a bug and keeps its
traceback. Each subclass says which exit code it maps to so the CLI needs no if-chain.
"""

from __future__ import annotations


class SpectuneError(Exception):
    """Root of every error spectune reports to a user as a message."""

    exit_code: int = 1


class StudyFileError(SpectuneError):
    """A study file is missing, unreadable or invalid. Carries one line per problem."""

    exit_code = 2

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


class UsageError(SpectuneError):
    """A command-line argument is wrong in a way click cannot see (e.g. a bad --weights string)."""

    exit_code = 2
