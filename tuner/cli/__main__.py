"""``python -m tuner.cli`` — the same command line as the ``spectune`` console script."""

from tuner.cli import main

main(prog_name="spectune")
