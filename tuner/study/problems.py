"""``FILE: KEY: PROBLEM`` lines, collected before anything is raised so a user fixes a broken file
in one round."""

from __future__ import annotations

from pathlib import Path


class Problems:
    """Collects ``FILE: KEY: PROBLEM`` lines."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines: list[str] = []
        self.keys: list[str] = []  # the key of each line, as written

    def add(self, key: str, problem: str) -> None:
        self.keys.append(key)
        self.lines.append(f"{self.path}: {key}: {problem}")

    def about(self, prefix: str, *, mentioning: str = "") -> bool:
        """Whether a problem was found under ``prefix`` (a key naming ``mentioning``, if given)."""
        return any(k.startswith(prefix) and mentioning in k for k in self.keys)

    def __bool__(self) -> bool:
        return bool(self.lines)


class Collect(Problems):
    """Problems without the file/key prefix, for text that did not come from a study file."""

    def add(self, key: str, problem: str) -> None:
        self.keys.append(key)
        self.lines.append(problem)
