"""The architecture as a test: each layer imports only the layers below it (docs/architecture.md).

Every import in the product's modules — at the top or inside a function, since a lazy import is
still a dependency — is read with ``ast`` and checked against the order of the layers. A module that
needs a higher layer is a design change: move the code, or change the order here and in
docs/architecture.md together.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: Lowest first. A layer may import itself and anything before it.
LAYERS = (
    "tuner.core",
    "tuner.sglang",
    "objectives",
    "tuner.simulator",
    "tuner.targets",
    "tuner.study",
    "tuner.store",
    "tuner.search",
    "tuner.run",
    "tuner.evaluation",
    "tuner.workers",
    "tuner.query",
    "tuner.report",
    "tuner.app",
    "tuner.cli",
)
#: Modules outside every layer that any layer may import (the package's version only).
ANYONE = ("tuner",)
MAX_LINES = 410


def layer_of(module: str) -> int | None:
    for index, layer in enumerate(LAYERS):
        if module == layer or module.startswith(layer + "."):
            return index
    return None


def product_modules() -> list[tuple[str, Path]]:
    found = []
    for package in ("tuner", "objectives"):
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found.append((name, path))
    return found


def imports_of(path: Path, module: str) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            found.append((node.lineno, target))
            # `from tuner.store import record` imports tuner.store.record
            found += [(node.lineno, f"{target}.{alias.name}") for alias in node.names
                      if layer_of(f"{target}.{alias.name}") is not None
                      and layer_of(target) is None]
    return found


MODULES = product_modules()


def test_every_module_is_in_a_layer() -> None:
    loose = [name for name, _ in MODULES if layer_of(name) is None and name not in ANYONE]
    assert not loose, f"modules outside every layer (add them to a package): {loose}"


@pytest.mark.parametrize(("module", "path"), MODULES, ids=[m for m, _ in MODULES])
def test_no_module_imports_a_higher_layer(module: str, path: Path) -> None:
    own = layer_of(module)
    if own is None:
        return
    upward = [
        f"{path.relative_to(ROOT)}:{line} imports {target} ({LAYERS[layer]} is above {LAYERS[own]})"
        for line, target in imports_of(path, module)
        if (layer := layer_of(target)) is not None and layer > own]
    assert not upward, "\n".join(upward)


def test_modules_stay_small() -> None:
    large = {str(p.relative_to(ROOT)): n for _, p in MODULES
             if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not large, f"modules over {MAX_LINES} lines (split them by concern): {large}"


def test_the_checker_sees_an_upward_import(tmp_path: Path) -> None:
    """The check itself can fail: a module of the engine importing the CLI is caught, lazily or
    not."""
    sample = tmp_path / "sample.py"
    sample.write_text("def f():\n    from tuner.cli import main\n    from . import loop\n")
    found = imports_of(sample, "tuner.run.sample")
    assert (2, "tuner.cli") in found and (3, "tuner.run") in found
    assert layer_of("tuner.cli") > layer_of("tuner.run")  # type: ignore[operator]
