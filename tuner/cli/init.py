"""``spectune init`` — write a commented study file for a target kind and a model."""

from __future__ import annotations

from pathlib import Path

import click

from tuner.targets.registry import TARGET_KINDS


@click.command("init")
@click.option("--target", "kind", type=click.Choice(TARGET_KINDS), default="simulated", show_default=True,
              help="The target kind: where trials deploy the server.")
@click.option("--model", help="The served model (model-path), e.g. Qwen/Qwen3-8B; required except for the "
                              "simulator, which defaults to its profile's model.")
@click.option("--draft", help="The draft model (speculative-draft-model-path), e.g. an EAGLE-3 head.")
@click.option("--algorithm", default="EAGLE3", show_default=True, help="speculative-algorithm.")
@click.option("--template", type=click.Choice(["eagle3", "mtp", "ngram"]),
              help="A study over the whole speculative choice for this kind of model: eagle3 (an EAGLE-3 draft: "
                   "static tree vs SGLang's adaptive steps vs off), mtp (the model's own MTP head, NEXTN, no "
                   "draft model) or ngram (no draft model: n-gram vs off).")
@click.option("--tp-size", type=click.IntRange(min=1), help="GPUs per server (default: 1; the simulator: its "
                                                              "profile's).")
@click.option("--name", help="The study's name (default: the file's name).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=Path("study.toml"),
              show_default=True, help="Where to write the study file.")
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
def command(kind: str, model: str | None, draft: str | None, algorithm: str, template: str | None,
            tp_size: int | None, name: str | None, output: Path, force: bool) -> None:
    """Write a commented study file that validates as written.

    Every key is explained by a comment (the same text as docs/study-file.md); keys left at their default are
    written commented out. Remote hosts are placeholders (gpu-host.example): replace them, then run
    `spectune validate --plan FILE`.
    """
    from tuner.app.init import InitRequest, write_study_file

    path = write_study_file(InitRequest(kind=kind, model=model, draft=draft, algorithm=algorithm, name=name,
                                        tp_size=tp_size, template=template), output, force=force)
    click.echo(f"wrote {path}: edit the placeholders, then `spectune validate --plan {path}`")
