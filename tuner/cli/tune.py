"""``spectune tune STUDY`` — run (or resume) a study."""

from __future__ import annotations

import click


@click.command("tune")
@click.argument("study", type=click.Path(dir_okay=False, path_type=str))
@click.option("--n-trials", type=click.IntRange(min=1), help="Measured trials to reach (default: the study file's).")
@click.option("--timeout", "timeout", help="Stop starting trials after this long, e.g. 8h (default: the study file's).")
@click.option("--confirm", type=click.IntRange(min=0), default=0, show_default=True,
              help="Re-measure the top K configurations on fresh restarts at the end.")
@click.option("--repeats", type=click.IntRange(min=1), default=3, show_default=True,
              help="Fresh restarts per confirmed configuration.")
def command(study: str, n_trials: int | None, timeout: str | None, confirm: int, repeats: int) -> None:
    """Run a study against its target; running it again resumes it.

    Each trial deploys one configuration, waits until the server is ready, benchmarks it and records the
    result. At the end the best configuration is printed as a launch command and the target is left as
    [finish] says. Exit codes: 0 done, 2 bad study file, 3 target unreachable, 4 storage failing,
    5 study in use, 130/143 interrupted (resume by running the same command).
    """
    from tuner.app.tune import run_study
    from tuner.core.console import make_console
    from tuner.core.durations import parse_duration
    from tuner.core.errors import UsageError
    from tuner.study.file import load_study_file

    spec = load_study_file(study)
    try:
        timeout_s = parse_duration(timeout) if timeout is not None else None
    except ValueError as exc:
        raise UsageError(f"--timeout: {exc}") from None
    outcome = run_study(spec, n_trials=n_trials, timeout_s=timeout_s, console=make_console(stderr=True),
                        confirm=confirm, repeats=repeats)
    console = make_console()
    console.print(f"study {outcome.study_name}: {outcome.measured} measured trials (stopped: {outcome.stopped_by})")
    if outcome.best is None:
        console.print("no feasible configuration yet")
        return
    best = outcome.best
    score = best.score if best.score is not None else float("nan")
    console.print(f"best: trial {best.number}, score {score:.3f} (1.0 = the baseline)")
    click.echo(outcome.best_command)
