"""``spectune deploy STUDY --trial N | --best | --original`` — apply a stored configuration on purpose."""

from __future__ import annotations

import click


@click.command("deploy")
@click.argument("study", type=click.Path(dir_okay=False, path_type=str))
@click.option("--trial", "trial", type=int, default=None, help="Deploy the configuration of trial N.")
@click.option("--best", is_flag=True, help="Deploy the best feasible configuration measured so far.")
@click.option("--original", is_flag=True,
              help="Return to the original configuration (systemd: remove spectune's drop-in).")
def command(study: str, trial: int | None, best: bool, original: bool) -> None:
    """Apply a configuration of a study to its target and wait until the server is ready.

    systemd-ssh targets keep serving after this command exits; local and simulated servers are children of
    this command and run until Ctrl-C (exit 130) or SIGTERM (exit 143). A study or trial that cannot answer
    exits 2 before the target is touched.
    """
    if sum((trial is not None, best, original)) != 1:
        raise click.UsageError("give exactly one of --trial N, --best, --original")
    from tuner.query.load import open_stored_study
    from tuner.query.stored import best_config, original_config, trial_config
    from tuner.study.file import load_study_file
    from tuner.targets import make_target

    spec = load_study_file(study)
    # The stored configuration first: a study that cannot answer (never run, no such trial) must fail before
    # anything touches the target.
    if original:
        what, config = "the original configuration", original_config(spec)
        # The baseline as trial 0 ran it: the study file's values after SGLang's rules (e.g. the
        # --max-running-requests a C=64 phase needs under speculation), not the raw [baseline] table.
    else:
        stored = open_stored_study(spec)
        for warning in stored.warnings:
            click.echo(f"warning: {warning}", err=True)
        if best:
            number, config = best_config(stored)
            what = f"the best configuration (trial {number})"
        else:
            assert trial is not None
            what, config = f"trial {trial}", trial_config(stored, trial)
    target = make_target(spec)
    with target:
        leftover = target.detect_leftover()
        if leftover:
            click.echo(f"found {leftover}; it is replaced now")
        if original and spec.target.kind == "systemd-ssh":
            target.restore()
            click.echo(f"removed spectune's drop-in and restarted {spec.target.settings['unit']} with its own "
                       f"configuration")
            return
        click.echo(f"deploying {what} to the {spec.target.kind} target …")
        deployment = target.deploy(config)
        click.echo(f"ready at {deployment.base_url} after {deployment.deploy_s + deployment.ready_s:.1f} s")
        click.echo(deployment.launch.shell(multiline=True))
        if spec.target.kind != "systemd-ssh":
            _serve_until_interrupted(target)


EXIT_SIGINT = 130
EXIT_SIGTERM = 143


def _serve_until_interrupted(target: object) -> None:
    import signal
    import sys
    import threading

    from tuner.targets.base import Target

    assert isinstance(target, Target)
    stop = threading.Event()
    # Handlers first, then the announcement: whoever reads "serving" may signal at once.
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    # The shell's convention (and tune's): 128 + the signal, so a script can tell "stopped" from "finished".
    code = EXIT_SIGTERM
    try:
        click.echo("serving; Ctrl-C stops the server")
        stop.wait()
    except KeyboardInterrupt:
        code = EXIT_SIGINT
    finally:
        signal.signal(signal.SIGTERM, previous)
        target.restore()
    click.echo("stopped the server", err=True)
    sys.exit(code)
