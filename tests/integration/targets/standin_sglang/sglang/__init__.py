"""A stand-in for the real ``sglang`` package on the test host: ``python -m sglang.launch_server`` runs the
simulator, and ``sglang.srt.server_args.prepare_server_args`` judges with spectune's rules (the fixture test is
what ties those to the real SGLang). Only for tests of the resolver's plumbing."""

from __future__ import annotations

import os

__version__ = os.environ.get("STANDIN_SGLANG_VERSION", "0.5.23")
