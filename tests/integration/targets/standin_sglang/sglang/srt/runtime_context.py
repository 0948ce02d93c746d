"""SGLang's ``override_platform`` as the resolver calls it: the platform it is told is what the
stand-in's checks read (``PRESENTED``)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

PRESENTED: dict[str, Any] = {}


def override_platform(**platform: Any) -> Any:
    return SimpleNamespace(install=lambda: PRESENTED.update(platform))
