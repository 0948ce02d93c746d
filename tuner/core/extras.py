"""Which optional extras are installed (``pip install 'spectune[gp]'``), asked without importing
them."""

from __future__ import annotations

import importlib.util


def gp_available() -> bool:
    """Whether Optuna's GPSampler can run here: it needs PyTorch and SciPy."""
    return (importlib.util.find_spec("torch") is not None
            and importlib.util.find_spec("scipy") is not None)
