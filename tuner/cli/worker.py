"""``spectune worker STUDY [--host H]`` — one of several processes sharing a study, one per host."""

from __future__ import annotations

import click


@click.command("worker")
@click.argument("study", type=click.Path(dir_okay=False, path_type=str))
@click.option("--host", help="The host of [target] hosts to work on (default: the first one no "
                             "worker holds).")
@click.option("--n-trials", type=click.IntRange(min=1),
              help="Measured trials the study should reach, all workers "
              "together (default: the study file's).")
@click.option("--timeout", "timeout",
              help="This worker stops starting trials after this long, e.g. 8h.")
def command(study: str, host: str | None, n_trials: int | None, timeout: str | None) -> None:
    """Run trials of a shared study (PostgreSQL/MySQL storage) on one host.

    Start one worker per host, on any machines that reach the database. Each leases its host, so no
    two workers ever deploy to the same one; a dead worker's trial is re-run by another and its host
    can be taken over after the heartbeat grace period. Exit codes: 0 the study is done, 2 bad study
    file or SQLite storage, 3 host unreachable, 4 storage failing, 5 no free host (or the lease was
    lost), 130/143 interrupted (its trial is re-run by the others).
    """
    from tuner.app.worker import run_worker
    from tuner.core.console import make_console
    from tuner.core.durations import parse_duration
    from tuner.core.errors import UsageError
    from tuner.study.load import load_study_file

    spec = load_study_file(study)
    try:
        timeout_s = parse_duration(timeout) if timeout is not None else None
    except ValueError as exc:
        raise UsageError(f"--timeout: {exc}") from None
    from tuner.core.interrupts import interruptible

    # an interrupt at any moment: exit 130/143, one line, the host restored
    with interruptible(then_exit=True):
        outcome = run_worker(spec, host, n_trials=n_trials, timeout_s=timeout_s,
                             console=make_console(stderr=True))
    console = make_console()
    console.print(
        f"study {outcome.study_name}: {outcome.counts_text()} (stopped: {outcome.stopped_by})")
    best = outcome.best
    if best is not None:
        score = best.score if best.score is not None else float("nan")
        console.print(f"best so far: trial {best.number}, score {score:.3f} (1.0 = the baseline)")
