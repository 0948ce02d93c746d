"""Leaves every layer may use: errors with exit codes, interrupt handling, durations, small network
helpers.

Nothing here imports any other part of spectune."""
