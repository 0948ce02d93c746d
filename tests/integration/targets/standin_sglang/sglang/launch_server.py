"""``python -m sglang.launch_server ARGS``: the simulator, as the stand-in's server. With
``STANDIN_SGLANG_TABLE`` set, ``--help`` is that release's (spectune's shipped table of it), as the
real release's server prints it."""

from __future__ import annotations

import os
import sys

from tuner.cli import main

if __name__ == "__main__":
    release = os.environ.get("STANDIN_SGLANG_TABLE")
    if release and "--help" in sys.argv[1:]:
        from tuner.sglang.options import load_option_table

        print(load_option_table(release).build_parser(allow_abbrev=False).format_help())
        raise SystemExit(0)
    sys.argv = ["spectune", "simulate", "--profile", "llama-3.1-8b-eagle3-1x-h100", "--time-scale",
                "50", "--seed", "1", "--", *sys.argv[1:]]
    main()
