"""The confirmation stage's defaults, in a module that imports nothing: the CLI shows them in
``--help`` without loading the engine, and the engine (tuner/run/confirm.py) uses the same
numbers."""

from __future__ import annotations

from typing import Final

#: Configurations the confirmation stage re-measures besides the baseline (``spectune tune
#: --confirm``).
DEFAULT_TOP: Final = 3
#: Fresh restarts per configuration. Two keep the demo (12 trials, 3 + baseline confirmed) near two
#: minutes and already pool twice the study's requests per configuration; a real study may well
#: afford more.
DEFAULT_REPEATS: Final = 2
