"""What a study file means: its validated values (``spec``), the file loader, and the search space
it defines.

Depends on ``tuner.sglang`` (flag tables and rules), ``objectives`` (benchmark and constraint
values) and the target kinds' settings models (``tuner.targets.registry``), which validate their own
``[target]`` tables."""
