"""``python -m sglang.launch_server ARGS``: the simulator, as the stand-in's server."""

from __future__ import annotations

import sys

from tuner.cli import main

if __name__ == "__main__":
    sys.argv = ["spectune", "simulate", "--profile", "llama-3.1-8b-eagle3-1x-h100", "--time-scale", "50",
                "--seed", "1", "--", *sys.argv[1:]]
    main()
