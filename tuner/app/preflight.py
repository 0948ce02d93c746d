"""The preflight ``tune`` runs before its first trial — and ``validate --check-target`` runs the
same, so every problem ``tune`` would meet there is reported before a study starts.

1. The target's own check (``Target.preflight``): its server's ``--help`` is read and, where its
   SGLang can be imported, the resolver starts (tuner/targets/resolver.py). The study is checked
   against that SGLang's own option table (cached in the study's storage per version and build;
   tuner/study/compat.py): a flag or value the release lacks stops the study with one line naming
   it, its other spelling and the releases that have it; a release other than ``[study]
   sglang_version`` is said in one line; a setting the release spells otherwise is written in its
   spelling. Then ``--help`` must list every option the study can emit.
2. SGLang is asked about the configuration ``tune`` deploys first (the baseline, else the first
   valid point). An answer that is no verdict — SGLang sees no GPU, a module is missing, the
   resolver crashed — stops here, once, with one line and exit 3 (``SGLangCannotJudge``), instead of
   coming back as a rejected trial for every proposal. A refusal of that configuration is reported
   (it will be a rejected trial, the sampler learns from it) but does not stop the study.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

from tuner.sglang.options import OptionTable
from tuner.sglang.versions import spelling_in
from tuner.store.keys import StudyKey
from tuner.store.tables import StudyAttrs, cached_table, store_table
from tuner.study.compat import check_study
from tuner.study.proposal import effective_key
from tuner.study.space import SearchSpace
from tuner.study.spec import StudySpec
from tuner.targets.base import DeployFailed, SGLangRefused, Target

#: At most this many distinct configurations are put to the target's SGLang to count them by its
#: effective values (``count_by_sglang``); a question costs milliseconds.
COUNT_LIMIT = 2_000


@dataclass(frozen=True)
class PreflightResult:
    """What the preflight found, one line each (``validate --check-target`` prints them; ``tune``
    says the notes)."""

    # the SGLang version the target runs (None: not asked — e.g. the simulator)
    installed: str | None
    lines: tuple[str, ...]
    #: The target's own SGLang's option table (None: not asked).
    table: OptionTable | None


def run_preflight(target: Target, spec: StudySpec, space: SearchSpace,
                  say: Callable[[str], None] = lambda _line: None,
                  study: StudyAttrs | None = None) -> PreflightResult:
    """The preflight of ``tune`` (module docstring). Raises ``TargetUnavailable``
    (``SGLangCannotJudge``: exit 3) when SGLang cannot judge there,
    ``DeployFailed("invalid-flags")`` for an option the target does not have — by its own option
    table (cached in ``study``'s storage per version and build) and its ``--help``."""
    target.preflight(())  # its --help is read, and its SGLang's resolver started
    installed = target.installed_sglang()
    lines: list[str] = []
    table = None
    if installed is not None:
        lines.append(f"the target runs SGLang {installed}; it judges every configuration before it "
                     "is deployed")
        table = _own_table(target, study)
        if table is None:
            lines.append(f"SGLang {installed} could not list its options; the study's flags are "
                         f"checked against its --help and {spec.option_table.version}'s table")
            say(lines[-1])
    if table is not None:
        _checked(spec, table, target, lines, say)
    proposed, reference_only = space.emittable_flags()
    target.preflight(_spelled(proposed, table))
    if reference_only:
        try:
            target.preflight(_spelled(reference_only, table))
        except DeployFailed:
            # An older release (SGLang's adaptive steps came in 0.5.14): the tuning runs; the
            # comparison cannot.
            release = f"SGLang {installed}" if installed else "SGLang"
            lines.append(f"the target's {release} has no {', '.join(reference_only)}: its adaptive "
                         "steps are not measured beside the tuning (that reference trial is "
                         "refused by SGLang)")
            say(lines[-1])
    # what the target's own checks found (a unit's carried options)
    for note in target.notes:
        lines.append(note)
        say(note)
    carried = target.carried
    if study is not None and carried and study.user_attrs.get(StudyKey.UNIT_OPTIONS) != list(
        carried):
        study.set_user_attr(StudyKey.UNIT_OPTIONS, list(carried))
    if installed is not None:
        lines.append(_first_verdict(target, spec, space, installed, say))
    return PreflightResult(installed, tuple(lines), table)


def _spelled(flags: list[str], table: OptionTable | None) -> list[str]:
    """The flags as the target's release spells them (the study's names where it has no table)."""
    return sorted({(spelling_in(f, table) or f) if table else f for f in flags})


def _own_table(target: Target, study: StudyAttrs | None) -> OptionTable | None:
    table = target.sglang_table((lambda v, b: cached_table(study, v, b)) if study is not None
                                else None)
    if table is not None and study is not None:
        store_table(study, table, target.sglang_build())
    return table


def _checked(spec: StudySpec, table: OptionTable, target: Target, lines: list[str],
             say: Callable[[str], None]) -> str | None:
    """The study checked against the target's own table: a flag or value it lacks stops the study
    (one line each, naming the other spelling and the releases that have it). A setting the release
    spells otherwise (``--cuda-graph-max-bs`` ↔ ``--cuda-graph-max-bs-decode``) keeps the study's
    name — its Optuna parameters are named after it — and is written in the release's spelling on
    the command line."""
    check = check_study(spec, table)
    if check.note:
        lines.append(check.note)
        say(check.note)
    if check.problems:
        raise DeployFailed("invalid-flags",
                           f"the study cannot run on the target's SGLang {table.version}: "
                           + "; ".join(check.problems))
    # its launch commands in the release's own spellings (versions.respelled)
    target.use_table(table)
    return check.note


def _first_verdict(target: Target, spec: StudySpec, space: SearchSpace, installed: str,
                   say: Callable[[str], None]) -> str:
    config = space.first_proposal(spec.baseline).config
    assert config is not None
    try:
        target.resolve(config)
    except SGLangRefused as exc:
        line = f"SGLang {installed} refuses the first configuration (it will be a rejected " \
               f"trial): {str(exc).removeprefix('invalid-flags: ')}"
        say(line)
        return line
    # an option this table lacks: the trial says so, as any rules refusal
    except DeployFailed as exc:
        return f"the first configuration cannot be written for SGLang {installed}: {exc}"
    return f"SGLang {installed} accepts the first configuration"


def count_by_sglang(target: Target, space: SearchSpace,
                    limit: int = COUNT_LIMIT) -> tuple[int, int, int] | None:
    """``(distinct, refused, asked)``: the valid configurations of ``space`` (up to ``limit``
    distinct ones by spectune's rules) counted by what the target's SGLang runs — two that SGLang
    runs as one server are one — and how many of them it refuses; None when the target cannot ask
    SGLang."""
    if target.installed_sglang() is None:
        return None
    keys: set[str] = set()
    refused = asked = 0
    # 20 points a configuration: the same valid configuration decodes from many points
    for _params, proposal in itertools.islice(space.distinct_valid(20 * limit), limit):
        config = proposal.config
        assert config is not None
        asked += 1
        try:
            effective = target.resolve(config)
        except DeployFailed:
            refused += 1
            continue
        keys.add(effective_key(config, dict(effective)) if effective is not None else config.key())
    return len(keys), refused, asked

