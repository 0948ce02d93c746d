"""``spectune deploy STUDY --trial N | --best | --original`` — apply a stored configuration on
purpose."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from tuner.sglang.launch import ServerConfig
    from tuner.study.spec import StudySpec
    from tuner.targets.base import Target


@click.command("deploy")
@click.argument("study", type=click.Path(dir_okay=False, path_type=str))
@click.option("--trial", "trial", type=int, default=None,
              help="Deploy the configuration of trial N.")
@click.option("--best", is_flag=True,
              help="Deploy the best feasible configuration measured so far.")
@click.option("--original", is_flag=True,
              help="Return to the original configuration (systemd: remove spectune's drop-in).")
def command(study: str, trial: int | None, best: bool, original: bool) -> None:
    """Apply a configuration of a study to its target and wait until the server is ready.

    systemd-ssh targets keep serving after this command exits; local and simulated servers are
    children of this command and run until Ctrl-C (exit 130) or SIGTERM (exit 143). A study or trial
    that cannot answer exits 2 before the target is touched.
    """
    if sum((trial is not None, best, original)) != 1:
        raise click.UsageError("give exactly one of --trial N, --best, --original")
    from tuner.query.load import open_stored_study
    from tuner.query.stored import best_config, original_config, trial_config
    from tuner.study.load import load_study_file
    from tuner.study.target import make_target

    spec = load_study_file(study)
    # The stored configuration first: a study that cannot answer (never run, no such trial) must
    # fail before anything touches the target.
    if original:
        # The baseline as trial 0 ran it: the study file's values after SGLang's rules (e.g. the
        # --max-running-requests a C=64 phase needs under speculation), not the raw [baseline]
        # table.
        what, config = "the original configuration", original_config(spec)
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
    from tuner.core.errors import Interrupted
    from tuner.core.interrupts import deferred, interruptible

    # Signals are ours from here: one during the deploy stops what was started, one while serving is
    # the normal way to stop; both exit 128 + the signal (the shell's convention, and tune's), so a
    # script can tell "stopped" from "finished". A second one during either restore is remembered,
    # not obeyed.
    with interruptible(then_exit=True):
        target = make_target(spec)
        with target:
            try:
                _deploy(spec, target, what, config, original)
            except Interrupted:
                with deferred():
                    target.restore()
                raise


def _deploy(spec: StudySpec, target: Target, what: str, config: ServerConfig,
            original: bool) -> None:
    leftover = target.detect_leftover()
    if leftover:
        click.echo(f"found {leftover}; it is replaced now")
    if original and spec.target.settings.outlives_spectune:
        target.restore()
        click.echo(spec.target.settings.restored_message())
        return
    click.echo(f"deploying {what} to the {spec.target.kind} target …")
    deployment = target.deploy(config)
    click.echo(
        f"ready at {deployment.base_url} after {deployment.deploy_s + deployment.ready_s:.1f} s")
    click.echo(deployment.launch.shell(multiline=True))
    if not spec.target.settings.outlives_spectune:
        _serve_until_interrupted(target)


def _serve_until_interrupted(target: Target) -> None:
    import sys
    import threading

    from tuner.core.errors import Interrupted
    from tuner.core.faults import fault_point
    from tuner.core.interrupts import deferred

    # The handlers are already in place (interruptible() above): whoever reads "serving" may signal
    # at once.
    click.echo("serving; Ctrl-C stops the server")
    try:
        threading.Event().wait()
        code = 0  # not reached: only a signal ends the wait
    except Interrupted as exc:
        code = exc.exit_code
    with deferred():
        fault_point("deploy_restore")
        target.restore()
    click.echo("stopped the server", err=True)
    sys.exit(code)
