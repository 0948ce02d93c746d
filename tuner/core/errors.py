"""The one root error type and its families.

The CLI turns any ``SpectuneError`` into a message and an exit code; anything else is a bug and
keeps its traceback. Each subclass says which exit code it maps to so the CLI needs no if-chain.
"""

from __future__ import annotations


class SpectuneError(Exception):
    """Root of every error spectune reports to a user as a message."""

    exit_code: int = 1


class Interrupted(KeyboardInterrupt):
    """SIGINT/SIGTERM while tuning: the current trial is recorded and re-run on resume; exit 128 +
    signal.

    A ``KeyboardInterrupt``, not a ``SpectuneError``, on purpose: the signal handler raises it
    wherever the main thread happens to be, often inside the benchmark's event loop, and asyncio
    (like any ``except Exception`` around a request) would swallow an ordinary exception there and
    carry on measuring."""

    def __init__(self, signum: int) -> None:
        import signal

        self.signum = signum
        self.exit_code = 128 + signum
        super().__init__(
            f"interrupted by {signal.Signals(signum).name}; the current trial will be re-run on "
            "resume")


class StudyFileError(SpectuneError):
    """A study file is missing, unreadable or invalid. Carries one line per problem."""

    exit_code = 2

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


class NothingMeasured(SpectuneError):
    """A study ended without measuring anything: the baseline failed to start or to run (the study
    stops rather than restart other configurations), or every configuration tried did. The summary
    says which; a script must not read it as a finished study."""

    exit_code = 7


class UsageError(SpectuneError):
    """A command-line argument is wrong in a way click cannot see (e.g. a bad --weights string)."""

    exit_code = 2


def chain_of(exc: BaseException) -> list[BaseException]:
    """``exc`` and what it was raised from or while handling (``__cause__``, else ``__context__``),
    in order; a cycle ends it."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain
