"""How ``spectune validate --plan`` prints a ``StudyPlan``."""

from __future__ import annotations

import click

from tuner.app.plan import StudyPlan
from tuner.core.durations import format_duration


def print_plan(plan: StudyPlan) -> None:
    """Plain lines (no Rich markup: drop-ins and commands hold brackets), never wrapped
    mid-phrase."""
    say = click.echo
    d = plan.deploy
    say(f"\nPlan — the first trial deploys this {d.title}:")
    click.echo(d.text.rstrip("\n"))
    say("Each deploy:")
    for step in d.steps:
        say(f"  - {step}")
    say("Preflight, once before the first trial:")
    for step in d.preflight:
        say(f"  - {step}")
    say(f"Readiness: {d.readiness}")
    say("Expected time per trial:")
    say(f"  deploy + ready  {format_duration(plan.startup_s):>8}  ({plan.startup_basis})")
    for p in plan.phases:
        say(f"  {p.label:<15} {format_duration(p.seconds):>8}  ({p.basis})")
    if plan.measured_trial_s is not None:
        say(f"  measured        {format_duration(plan.measured_trial_s):>8}  (median of the "
            "study's "
                      f"{plan.measured_count} measured trials; used below)")
    say(f"  one trial       {format_duration(plan.trial_s):>8}")
    study = f"Study: {plan.n_trials} trials ≈ {format_duration(plan.trials_s)}"
    if plan.hosts > 1:
        study += f" ({plan.hosts} hosts side by side)"
    if plan.confirm_runs:
        study += (
            f", then confirmation ({plan.confirm_runs} fresh deploys, `tune --confirm/--repeats`) "
            f"≈ {format_duration(plan.confirm_s)}")
    say(study)
    fitting = plan.fitting_trials()
    if plan.timeout_s is None:
        say("Timeout: none ([study] timeout): the trials run to n_trials")
    elif fitting is not None and fitting >= plan.n_trials:
        say(f"Timeout {format_duration(plan.timeout_s)}: the {plan.n_trials} trials fit "
                      f"(confirmation runs after it)")
    else:
        say(f"Timeout {format_duration(plan.timeout_s)}: stops new trials after about {fitting} of "
                      f"{plan.n_trials} (raise [study] timeout or lower n_trials; confirmation "
                      "runs after it)")
