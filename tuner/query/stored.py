"""Configurations a study stored, for ``spectune deploy``: a trial's, the best one's, or the
original.

Each trial records its launch configuration (``Key.CONFIG``, tuner/store/record.py).
"""

from __future__ import annotations

from tuner.query.load import StoredStudy
from tuner.sglang.launch import ServerConfig
from tuner.store.opening import StudyNotFound
from tuner.store.record import TrialRecord, best_record, records
from tuner.study.spec import StudySpec


def original_config(spec: StudySpec) -> ServerConfig:
    """The study's fixed flags plus its baseline, as the baseline trial ran them: decoded through
    the search space, so the flags SGLang's rules add (``--max-running-requests`` above SGLang's
    cap, the draft tokens topk=1 implies) are there too. A baseline the rules reject (``validate``
    reports it) is given as written."""
    from tuner.study.space import SearchSpace

    plain = ServerConfig.build({**spec.server_flags, **spec.baseline}, spec.server_env)
    if not spec.search or not spec.baseline:
        return plain
    space = SearchSpace(spec, spec.option_table)
    try:
        proposal = space.baseline()
    except (KeyError, ValueError):  # a baseline value outside the search range: nothing to decode
        return plain
    return proposal.config if proposal.config is not None else plain


def _config_of(record: TrialRecord) -> ServerConfig:
    if record.config is None:
        # An answer the study cannot give, like a trial it does not have: exit 2, before the target
        # is touched.
        raise StudyNotFound(
            f"trial {record.number} has no stored configuration (it was never deployed: "
            f"{record.outcome or record.state.name.lower()})")
    return record.config


def trial_config(stored: StoredStudy, number: int) -> ServerConfig:
    for record in records(stored.study):
        if record.number == number:
            return _config_of(record)
    raise StudyNotFound(f"study {stored.spec.study.name!r} has no trial {number}")


def best_config(stored: StoredStudy) -> tuple[int, ServerConfig]:
    """The best feasible measured trial's configuration (the study loop's own definition of
    best)."""
    best = best_record(stored.study)
    if best is None:
        raise StudyNotFound(f"study {stored.spec.study.name!r} has no feasible measured trial yet")
    return best.number, _config_of(best)
