"""What a study file means: its validated values (``spec``), the file loader, and the search space it defines.

Depends on ``tuner.sglang`` (flag tables and rules) and ``objectives`` (benchmark and constraint values) only."""
