"""The winner of a ranking, ready to use: a launch command to paste, a systemd drop-in, or JSON.

The command is built the way the study's target builds it (``Target.launch``) for local and
systemd-ssh targets, so what you paste is exactly what spectune deployed; a simulated study prints
the SGLang command the simulated server stands in for. The drop-in is rendered by the same code that
writes spectune's own drop-in (``tuner.targets.unit_file``), quoting included. Where SGLang runs
other values than the command gives (a forced page size, an auto-chosen draft tree), ``best`` says
so on stderr, the drop-in in comment lines, the JSON as ``effective`` and ``sglang_changes``.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from tuner.query.effective import changes, comment_lines
from tuner.query.ranking import Ranking, TrialView
from tuner.query.winner import answer_json
from tuner.run.confirm import RULE
from tuner.sglang.launch import LaunchCommand, ServerConfig, launch_command
from tuner.study.spec import StudySpec
from tuner.targets.unit_file import render_dropin

Format = Literal["command", "dropin", "json"]
SGLANG_LAUNCH = ("python3", "-m", "sglang.launch_server")


def launch_for(spec: StudySpec, config: ServerConfig,
               carried: tuple[str, ...] = ()) -> LaunchCommand:
    """The command the study's target runs for ``config``; ``carried``: the unit's own options its
    deploys keep (``[target] unit_flags = "carry"``, stored by the preflight)."""
    if spec.target.settings.launch_is_exact:
        from tuner.study.target import make_target

        target: Any = make_target(spec)  # constructing a target contacts nothing
        if carried and hasattr(target, "carried"):
            target.carried = carried
        return target.launch(config)
    return launch_command(SGLANG_LAUNCH, config, spec.option_table)


def export(spec: StudySpec, ranking: Ranking, trial: TrialView, fmt: Format,
           carried: tuple[str, ...] = ()) -> str:
    """The winner as ``fmt``. The command is the one that was proposed and deployed (what SGLang was
    given), and nothing else: it is piped and parsed (``best`` says on stderr where SGLang runs
    other values). A drop-in carries those as comment lines above its text, so the note stays with
    the file on the host."""
    assert trial.config is not None
    launch = launch_for(spec, trial.config, carried)
    if fmt == "command":
        return launch.shell(multiline=True)
    if fmt == "dropin":
        notes = "".join(f"{line}\n"
                        for line in comment_lines(changes(trial.config, trial.record.effective)))
        return notes + render_dropin(launch, spec.study.name)
    return json.dumps(as_json(spec, ranking, trial, launch), indent=2) + "\n"


def as_json(spec: StudySpec, ranking: Ranking, trial: TrialView,
            launch: LaunchCommand) -> dict[str, Any]:
    assert trial.config is not None
    return {
        "study": spec.study.name,
        "trial": trial.number,
        "score": trial.score,
        "score_ci": trial.interval.to_list() if trial.interval else None,
        "confirmed": _confirmed(ranking, trial),
        **{k: v for k, v in answer_json(ranking).items() if k != "best"},
        "weights": {f"c{c}": w for c, w in ranking.weights.items()},
        "references": {f"c{c}": v for c, v in ranking.references.items()},
        "constraints": [c.text for c in spec.objective.constraints]
        + [c.text for c in ranking.constraints], "flags": {k: v for k, v in trial.config.flags},
        "env": {k: v for k, v in trial.config.env},
        "effective": dict(trial.record.effective) if trial.record.effective else None,
        "sglang_changes": [c.to_json() for c in changes(trial.config, trial.record.effective)],
        "argv": launch.argv,
        "command": launch.shell(),
        "metrics": {f"c{c}": dict(m) for c, m in sorted(trial.metrics.items())},
    }


def _confirmed(ranking: Ranking, trial: TrialView) -> dict[str, Any] | None:
    """The confirmed figures and the winner rule's verdict (None: the study was not confirmed)."""
    from tuner.query.table import rows

    row = next((r for r in rows(ranking, []) if r.number == trial.number), None)
    if row is None or row.confirmed is None:
        return None
    return {**row.confirmed.to_json(), "verdict": verdict_json(ranking)}


def verdict_json(ranking: Ranking) -> dict[str, object] | None:
    """The winner rule's conclusion for ``--json`` (None: the study was not confirmed)."""
    verdict = ranking.verdict
    if verdict is None:
        return None
    return {"rule": RULE, "winner": verdict.winner, "best_lower_bound": verdict.best,
            "significant": verdict.significant, "baseline": verdict.baseline,
            "ties": list(verdict.ties), "explanation": verdict.explain()}
