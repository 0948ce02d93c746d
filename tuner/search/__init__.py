"""What to try next: the samplers (the grey-box sampler and its models, Optuna's), the designed
start and exploration after a repeat."""
