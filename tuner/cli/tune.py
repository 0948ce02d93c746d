"""``spectune tune STUDY`` — run (or resume) a study."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from tuner.core.defaults import DEFAULT_REPEATS, DEFAULT_TOP

if TYPE_CHECKING:
    from tuner.app.tune import TuneOutcome
    from tuner.study.spec import StudySpec


@click.command("tune")
@click.argument("study", type=click.Path(dir_okay=False, path_type=str))
@click.option("--n-trials", type=click.IntRange(min=1),
              help="Measured trials to reach (default: the study file's).")
@click.option("--timeout", "timeout",
              help="Stop starting trials after this long, e.g. 8h (default: the study file's).")
@click.option("--confirm", type=click.IntRange(min=0), default=DEFAULT_TOP, show_default=True,
              help="Before naming a winner, re-measure the top K and the baseline on fresh "
                   "restarts, interleaved (0: off). The winner is the best lower 95 % bound, if "
                   "above the baseline's upper bound.")
@click.option("--repeats", type=click.IntRange(min=1), default=DEFAULT_REPEATS, show_default=True,
              help="Fresh restarts per confirmed configuration.")
@click.option("--report", "report", type=click.Path(file_okay=False, path_type=str), default=None,
              help="Write the report here at the end (default: <study file>-report/ beside it).")
@click.option("--no-report", is_flag=True, help="Do not write the report at the end.")
def command(study: str, n_trials: int | None, timeout: str | None, confirm: int, repeats: int,
            report: str | None, no_report: bool) -> None:
    """Run a study against its target; running it again resumes it.

    Each trial deploys one configuration, waits until the server is ready, benchmarks it and records
    the result. At the end the best configuration is printed as a launch command and the target is
    left as [finish] says; then the per-phase change against the baseline, what was done to the
    target, and where the database, the server logs and the report (written at the end) are. Exit
    codes: 0 done, 2 bad study file, 3 target unreachable, 4 storage failing, 5 study in use, 6
    the baseline interrupted on every retry, 7 nothing measured (the baseline or every
    configuration failed to start or run),
    130/143 interrupted (resume by running the same command).
    """
    from tuner.app.tune import run_study
    from tuner.core.console import make_console
    from tuner.core.durations import parse_duration
    from tuner.core.errors import UsageError
    from tuner.core.interrupts import interruptible
    from tuner.study.load import load_study_file

    spec = load_study_file(study)
    try:
        timeout_s = parse_duration(timeout) if timeout is not None else None
    except ValueError as exc:
        raise UsageError(f"--timeout: {exc}") from None
    # From here to the last line an interrupt ends in exit 130/143 and one line (before the study
    # opens, too; while the summary and the report are written, too: the study is whole then, and
    # resuming prints it again).
    with interruptible(then_exit=True):
        outcome = run_study(spec, n_trials=n_trials, timeout_s=timeout_s,
                            console=make_console(stderr=True), confirm=confirm, repeats=repeats)
        _report(spec, outcome, report, no_report)
    if (why := outcome.why_nothing_measured()) is not None:
        from tuner.core.errors import NothingMeasured

        raise NothingMeasured(f"nothing was measured: {why} (`spectune trials {spec.path}` lists "
                              "each trial's failure)")


def _report(spec: StudySpec, outcome: TuneOutcome, report: str | None, no_report: bool) -> None:
    from tuner.app.summary import Locations, summary_lines
    from tuner.core.console import make_console

    console = make_console()

    def say(line: str) -> None:
        console.print(line, markup=False)

    say(f"study {outcome.study_name}: {outcome.counts_text()} (stopped: {outcome.stopped_by})")
    if outcome.stopped_by == "baseline-failed":
        say("the baseline — what the server runs today, measured first — failed to start, so the "
            "study stopped instead of restarting other configurations: `spectune trial 0 "
            f"{spec.path}` shows why "
            "and its log. Fix the target or [baseline]; running the same command resumes (scoring "
            "against the first trial measured then), a new [study] name measures the baseline "
            "first again")
    written = None if no_report or outcome.measured == 0 else _write_report(spec, report)
    for line in summary_lines(spec, outcome.baseline, outcome.best,
                              Locations(spec.study.storage, outcome.logs,
                                        written),
                              outcome.verdict):
        say(line)
    if outcome.best is None:
        say("no feasible configuration yet")
        return
    say("launch command of the best configuration:")
    click.echo(outcome.best_command)


def _write_report(spec: StudySpec, directory: str | None) -> Path | None:
    """The report of the finished run; a failure to write it is a warning, never a failed study."""
    from tuner.core.errors import SpectuneError
    from tuner.report.build import write_report

    out = Path(directory) if directory else default_report_dir(spec)
    try:
        return write_report(spec.path, out).page
    except (SpectuneError, OSError) as exc:
        click.echo(f"warning: could not write the report to {out}: {exc}", err=True)
        return None


def default_report_dir(spec: StudySpec) -> Path:
    """``<study file>-report/`` beside the study file."""
    return spec.path.with_name(f"{spec.path.stem}-report")
