"""``spectune dashboard STUDY`` — optuna-dashboard on the study's storage."""

from __future__ import annotations

import click


@click.command("dashboard")
@click.argument("study", type=click.Path(dir_okay=False, path_type=str))
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True,
              help="Port to listen on (0: any free port).")
def command(study: str, host: str, port: int) -> None:
    """Browse a study in optuna-dashboard (history, Pareto front, importances, every trial's attributes).

    Infeasible trials (rejected, failed to start, constraint violated) are shown as infeasible. Runs until
    Ctrl-C; the tuner may keep writing to the study meanwhile.
    """
    from tuner.query.dashboard import serve
    from tuner.query.load import open_stored_study

    stored = open_stored_study(study)
    for warning in stored.warnings:
        click.echo(f"warning: {warning}", err=True)
    try:
        serve(stored, host, port, on_ready=lambda url: click.echo(f"dashboard: {url}  (Ctrl-C stops it)"))
    except KeyboardInterrupt:
        pass
    except OSError as exc:  # e.g. the port is taken
        from tuner.core.errors import UsageError

        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
