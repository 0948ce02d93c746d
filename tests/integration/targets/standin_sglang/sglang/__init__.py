"""A stand-in for the real ``sglang`` package on the test host: ``python -m sglang.launch_server``
runs the simulator, and ``sglang.srt.server_args.prepare_server_args`` judges with spectune's rules
(the fixture test is what ties those to the real SGLang). Only for tests of the resolver's
plumbing."""

from __future__ import annotations

import os
import sys

__version__ = os.environ.get("STANDIN_SGLANG_VERSION", "0.5.23")

#: Each import appends a line here: ``-c`` for a resolver process (the tests count them), ``-m`` for
#: a server.
IMPORTS_ENV = "STANDIN_SGLANG_IMPORTS"
if os.environ.get(IMPORTS_ENV):
    with open(os.environ[IMPORTS_ENV], "a", encoding="utf-8") as _out:
        _out.write(f"imported {sys.argv[0]} {os.getpid()}\n")
