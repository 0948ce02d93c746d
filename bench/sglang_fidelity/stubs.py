"""Stand-ins for packages SGLang imports but the argument checks never use (CUDA kernels,
torchvision).

``sgl_kernel`` only ships CUDA builds, and PyPI's torchvision does not load against a CPU torch;
SGLang's model-config modules import both at module level. Importing this module makes those imports
succeed with objects that accept any attribute or call. Only for the fidelity generator's throw-away
venv.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any, ClassVar

STUB_ROOTS = ("sgl_kernel", "torchvision")


class _Anything:
    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything(f"{self._name}.{name}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _Anything(f"{self._name}()")

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        return (object,)


class _Module(types.ModuleType):
    __path__: ClassVar[list[str]] = []
    __version__ = "0.0.0"  # transformers parses the version of every package it finds

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything(f"{self.__name__}.{name}")


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname: str, path: Any,
                  target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname.split(".")[0] in STUB_ROOTS:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _Module(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        pass


sys.meta_path.insert(0, _Finder())


def _skip_fake_kernels() -> None:
    """SGLang 0.5.6 registers fake (meta) implementations of ``sgl_kernel`` operators at import
    (``@torch.library.register_fake("sgl_kernel::…")``), which needs the real operator; for a
    stood-in package the registration is skipped (nothing here ever runs a kernel)."""
    try:
        import torch.library as library
    except ImportError:
        return
    for name in ("register_fake", "impl_abstract"):
        original = getattr(library, name, None)
        if original is None:
            continue

        def registration(qualname: Any, *args: Any, _original: Any = original,
                         **kwargs: Any) -> Any:
            if isinstance(qualname, str) and qualname.split("::")[0] in STUB_ROOTS:
                return args[0] if args else (lambda fn: fn)
            return _original(qualname, *args, **kwargs)

        setattr(library, name, registration)


_skip_fake_kernels()
