"""``FILE: KEY: PROBLEM`` lines, collected before anything is raised so a user fixes a broken file
in one round."""

from __future__ import annotations

from pathlib import Path


class Problems:
    """Collects ``FILE: KEY: PROBLEM`` lines."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines: list[str] = []

    def add(self, key: str, problem: str) -> None:
        self.lines.append(f"{self.path}: {key}: {problem}")

    def __bool__(self) -> bool:
        return bool(self.lines)


class Collect(Problems):
    """Problems without the file/key prefix, for text that did not come from a study file."""

    def add(self, key: str, problem: str) -> None:
        self.lines.append(problem)
