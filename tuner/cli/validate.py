"""``spectune validate STUDY`` — check a study file and show the search space it defines."""

from __future__ import annotations

import click


@click.command("validate")
@click.argument("study", type=click.Path(dir_okay=False, path_type=str))
@click.option("--plan", is_flag=True,
              help="Also show the exact drop-in or command the first trial deploys, the "
                   "preflight, and the expected time per trial and for the "
                   "study.")
@click.option("--check-target", is_flag=True,
              help="Also contact the target (SSH login and systemctl, or the "
                   "server command and port), with timeouts; exit "
                   "3 if unusable.")
def command(study: str, plan: bool, check_target: bool) -> None:
    """Check a study file and show the search space it defines.

    Prints every problem (one line each, exit code 2), or the tuned flags with their encoding, the
    size of the space and an example launch command; then, if the study's storage cannot be used now
    (a database server that does not answer, a folder that takes no file), one error line and the
    exit code `tune` would stop with. Nothing is deployed, and nothing but the study's storage is
    contacted unless --check-target is given.
    """
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from tuner.app.validate import validate_study
    from tuner.store.storage import redact
    from tuner.study import branches

    report = validate_study(study)
    console = Console(highlight=False, width=120)
    spec = report.spec
    console.print(f"[bold]{spec.study.name}[/bold]  ({spec.path}) — target {spec.target.kind}, "
                  f"{spec.study.n_trials} trials, sampler {spec.study.sampler}, "
                  f"storage {escape(redact(spec.study.storage))}")
    console.print(f"Stored: {escape(report.stored)}")
    for warning in report.stored_warnings:
        console.print(f"  warning: {escape(warning)}")
    # Which SGLang's flags the file was checked against: without a target, a shipped table
    # (docs/targets.md).
    console.print(f"Option table: SGLang {spec.option_table.version} — "
                  f"{escape(spec.table_note or '[study] sglang_version')}")
    table = Table(title="Search space")
    table.add_column("flag", no_wrap=True)
    table.add_column("Optuna parameter", no_wrap=True)
    table.add_column("values")
    algorithm = next((d for d in report.dimensions if d.flag == branches.ALGORITHM and d.choices),
                     None)
    kinds = [branches.branch_of(c) for c in algorithm.choices] if algorithm is not None else []
    if kinds:  # a space with branches: which kinds of speculation propose each flag
        table.add_column("on branches")
    for d in report.dimensions:
        on = [] if d is algorithm else [b.choice for b in kinds if branches.applies(d.flag, b)]
        table.add_row(d.flag, d.name, escape(d.describe()),
                      *([("all" if len(on) == len(kinds) else ", ".join(on)) if d is not algorithm
                         else "–"]
                        if kinds else []))
    console.print(table)
    s = report.summary
    if s.complete:
        console.print(
            f"Size: {s.total_points:,} parameter points → {s.distinct_valid:,} distinct valid "
            f"configurations ({s.valid:,} valid points, {s.examined - s.valid:,} "
            f"rejected; all points decoded)")
    else:
        console.print(f"Size: {s.total_points:,} parameter points → at least {s.distinct_valid:,} "
                      f"distinct valid configurations (a random {s.examined:,} of the points "
                      f"decoded: {s.valid:,} valid, {s.examined - s.valid:,} rejected)")
    for reason, n in s.top_rejections(5):
        console.print(f"  rejected {n:,}×: {escape(reason)}")
    phases = ", ".join(f"C={p.concurrency}" for p in spec.benchmark.phases)
    weights = ", ".join(f"c{c}={w:g}" for c, w in sorted(spec.objective.weights.items()))
    counted = f": {report.prompts:,}" if report.prompts is not None else ""
    console.print(f"Benchmark: {phases} ({spec.benchmark.workload.api} API, "
                  f"{spec.benchmark.workload.dataset} prompts{counted}); objective "
                  f"{spec.objective.mode}: {weights}")
    label = "Baseline launch command" if spec.baseline else "Example launch command"
    console.print(f"{label}:")
    click.echo(report.example.shell(multiline=True))
    for repair in report.example_repairs:
        console.print(f"  adjusted: {escape(repair)}")
    if plan:
        from tuner.app.plan import plan_study
        from tuner.cli.plan_view import print_plan

        print_plan(plan_study(report))
    if check_target:
        from tuner.app.plan import check_target as contact

        console.print(f"Target check ({spec.target.kind}):")
        for line in contact(spec):
            console.print(f"  {escape(line)}")
    # the file is valid, but `tune` would stop at once: say it first
    if report.storage_failure is not None:
        raise report.storage_failure
