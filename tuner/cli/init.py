"""``spectune init`` — write a commented study file for a target kind and a model."""

from __future__ import annotations

from pathlib import Path

import click

from tuner.targets.registry import TARGET_KINDS


@click.command("init")
@click.option("--target", "kind", type=click.Choice(TARGET_KINDS), default="simulated",
              show_default=True, help="The target kind: where trials deploy the server.")
@click.option("--model",
              help="The served model (model-path), e.g. Qwen/Qwen3-8B; required except for the "
                   "simulator, which defaults to its profile's model.")
@click.option("--draft",
              help="The draft model (speculative-draft-model-path), e.g. an EAGLE-3 head.")
@click.option("--algorithm", default="EAGLE3", show_default=True, help="speculative-algorithm.")
@click.option("--template", type=click.Choice(["eagle3", "mtp", "ngram"]),
              help="A study over the whole speculative choice for this kind of model: eagle3 (an "
                   "EAGLE-3 draft: static tree vs SGLang's adaptive steps vs off), mtp (the "
                   "model's own MTP head, NEXTN, no draft model) or ngram (no draft model: n-gram "
                   "vs off).")
@click.option("--tp-size", type=click.IntRange(min=1),
              help="GPUs per server (default: 1; the simulator: its "
                     "profile's).")
@click.option("--name", help="The study's name (default: the file's name).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              default=Path("study.toml"), show_default=True, help="Where to write the study file.")
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
@click.option("--from-unit", "from_unit", nargs=2, metavar="HOST UNIT",
              help="Write a systemd-ssh study from the command a running unit runs (read over SSH "
                   "with `systemctl show -p ExecStart`): its options become [server.flags], the "
                   "tuned flags it sets [baseline]. HOST may be user@host.")
@click.option("--ssh-port", type=click.IntRange(1, 65535),
              help="With --from-unit: the SSH port (default 22).")
@click.option("--key-file",
              help="With --from-unit: the SSH private key (default: the agent and ~/.ssh keys).")
@click.option("--known-hosts",
              help="With --from-unit: the known_hosts file (default: ~/.ssh/known_hosts).")
def command(kind: str, model: str | None, draft: str | None, algorithm: str, template: str | None,
            tp_size: int | None, name: str | None, output: Path, force: bool,
            from_unit: tuple[str, str] | None,
            ssh_port: int | None, key_file: str | None, known_hosts: str | None) -> None:
    """Write a commented study file that validates as written.

    Every key is explained by a comment (the same text as docs/study-file.md); keys left at their
    default are written commented out. Remote hosts are placeholders (gpu-host.example): replace
    them, then run `spectune validate --plan FILE`.
    """
    from tuner.app.init import InitRequest, write_study_file

    unit = None
    if from_unit is not None:
        from tuner.app.init_from_unit import read_unit, unit_start
        from tuner.targets.ssh import SSHSettings

        where, unit_name = from_unit
        user, _, host = where.rpartition("@")
        ssh = {"user": user or None, "ssh_port": ssh_port, "key_file": key_file,
               "known_hosts": known_hosts}
        settings = SSHSettings(host=host, port=ssh_port or SSHSettings.port, user=user
                               or SSHSettings.user, key_file=key_file, known_hosts=known_hosts)
        unit = unit_start(read_unit(settings, unit_name), host, unit_name, ssh)
        kind = "systemd-ssh"
        model = model or unit.flags.get("model-path")
    path = write_study_file(InitRequest(kind=kind, model=model, draft=draft, algorithm=algorithm,
                                        name=name,
                                        tp_size=tp_size, template=template, unit=unit), output,
                            force=force)
    click.echo(f"wrote {path}: edit the placeholders, then `spectune validate --plan {path}`")
