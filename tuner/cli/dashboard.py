"""``spectune dashboard STUDY`` — optuna-dashboard on the study's storage."""

from __future__ import annotations

import click


@click.command("dashboard")
@click.argument("study", type=click.Path(dir_okay=False, path_type=str))
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True,
              help="Port to listen on (0: any free port).")
@click.option("--weights",
              help="Rank under these weights, e.g. c1=0.7,c64=0.3 (default: the study file's).")
@click.option("--constraint", "constraints", multiple=True,
              help="An extra constraint every candidate must meet, e.g. 'c64.ttft_p99_ms<2000'. "
                   "Repeatable.")
def command(study: str, host: str, port: int, weights: str | None,
            constraints: tuple[str, ...]) -> None:
    """Browse a study in optuna-dashboard (history, Pareto front, importances, every trial's
    attributes).

    Infeasible trials (rejected, failed to start, constraint violated) are shown as infeasible; the
    Best Trial card and the importances are the ones `spectune best` and the report give under the
    same weights and constraints. Runs until Ctrl-C; the tuner may keep writing to the study
    meanwhile.
    """
    from tuner.query.answers import ranking_for
    from tuner.query.dashboard import serve
    from tuner.query.load import open_stored_study

    stored = open_stored_study(study)
    # bad options fail here, before anything listens
    parsed = ranking_for(stored, weights, constraints)
    for warning in stored.warnings:
        click.echo(f"warning: {warning}", err=True)
    try:
        serve(stored, host, port,
              on_ready=lambda url: click.echo(f"dashboard: {url}  (Ctrl-C stops it)"),
              weights=parsed.weights if weights is not None else None,
              constraints=parsed.constraints)
    except KeyboardInterrupt:
        pass
    except OSError as exc:  # e.g. the port is taken
        from tuner.core.errors import UsageError

        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
