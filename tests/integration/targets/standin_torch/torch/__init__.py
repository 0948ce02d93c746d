"""A stand-in ``torch`` with a CUDA build's probes and no visible device (the resolver hides them
all)."""

from __future__ import annotations

from types import SimpleNamespace


def _no_device(*args: object, **kwargs: object) -> object:
    raise RuntimeError("No CUDA GPUs are available")


cuda = SimpleNamespace(is_available=lambda: False, device_count=lambda: 0,
                       get_device_capability=_no_device, get_device_name=_no_device)
version = SimpleNamespace(cuda="12.9")
