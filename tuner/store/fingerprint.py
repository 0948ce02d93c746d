"""Noticing a study file that changed after its study began.

Trials of one study are only comparable while the search space, the servers' fixed flags and
environment, the objective and the benchmark stay the same: a new phase size, another max_tokens,
another chunked-prefill size or other weights make old and new numbers different quantities. The
study stores one short hash per section in its user attrs when it is created (``record_or_check``);
``tune`` refuses to resume a study whose [search], [benchmark], [server.flags] or [server.env]
changed, and the read-only commands (``best``, ``trials``, ``report``) warn, because re-ranking
stored raw metrics is still meaningful. A change to [objective] alone does not block ``tune``: the
stored trials are re-ranked under the new weights and constraints.

The hash is taken over the *validated* values (``StudySpec``), not the file text, so comments,
formatting and key order never count as a change.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

import optuna

from tuner.core.errors import SpectuneError
from tuner.study.spec import StudySpec

#: The study user attr that holds ``{section: hash}``.
FINGERPRINT_ATTR = "study_file_fingerprint"
#: What a trial's numbers depend on: the tuned flags, the fixed flags and environment every server
#: gets (another model, another chunked-prefill size, another CUDA setting is another server), the
#: benchmark, and how the numbers are weighed.
SECTIONS = ("search", "objective", "benchmark", "server.flags", "server.env")


class StudyFileChanged(SpectuneError):
    exit_code = 2


def section_fingerprints(spec: StudySpec) -> dict[str, str]:
    """A short, stable hash of each comparability-relevant section of the study file."""
    values: dict[str, Any] = {"search": spec.search, "objective": spec.objective,
                              "benchmark": spec.benchmark,
                              "server.flags": spec.server_flags, "server.env": spec.server_env}
    return {name: _digest(values[name]) for name in SECTIONS}


def _digest(value: Any) -> str:
    plain = _plain(value)
    text = json.dumps(plain, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def changed_sections(study: optuna.Study, spec: StudySpec) -> list[str] | None:
    """Sections that differ from the stored fingerprint; None when the study has none (made before
    we kept one)."""
    stored = study.user_attrs.get(FINGERPRINT_ATTR)
    if not isinstance(stored, dict):
        return None
    current = section_fingerprints(spec)
    return [name for name in SECTIONS if name in stored and stored[name] != current[name]]


def describe_change(spec: StudySpec, sections: list[str]) -> str:
    names = " and ".join(f"[{s}]" for s in sections)
    verb = "has" if len(sections) == 1 else "have"
    return f"{spec.path}: {names} {verb} changed since study {spec.study.name!r} began"


#: Sections whose change leaves stored trials comparable: the objective only weighs and bounds the
#: raw metrics each trial stored, so the stored trials are re-ranked under the new one at no cost.
RERANKABLE = frozenset({"objective"})


def record_or_check(study: optuna.Study, spec: StudySpec) -> str | None:
    """For ``tune``: store the fingerprint on a new study, refuse to resume one whose file changed
    in what was measured ([search], [benchmark], [server.flags], [server.env]). A change to
    [objective] alone is accepted and recorded; the returned note says so (None when nothing
    changed).

    A study made before fingerprints existed gets the current one (nothing to compare against), and
    one made before a section was fingerprinted gets that section's."""
    changed = changed_sections(study, spec)
    if changed is None:
        study.set_user_attr(FINGERPRINT_ATTR, section_fingerprints(spec))
        return None
    if not changed and set(SECTIONS) - set(study.user_attrs[FINGERPRINT_ATTR]):
        # Kept from before a section was fingerprinted: what it has now is all there is to compare
        # against.
        study.set_user_attr(FINGERPRINT_ATTR,
                            {**section_fingerprints(spec), **study.user_attrs[FINGERPRINT_ATTR]})
    if changed and set(changed) <= RERANKABLE:
        study.set_user_attr(FINGERPRINT_ATTR, section_fingerprints(spec))
        return (f"{describe_change(spec, changed)}: resuming, and the stored trials are re-ranked "
                "under the new objective (their raw metrics are kept; nothing is re-measured)")
    if changed:
        raise StudyFileChanged(
            f"{describe_change(spec, changed)}; its trials would not be comparable with new "
            "ones. Restore the file, or give the study a new [study] name to "
            "start afresh (`spectune best --weights …` re-ranks the old study "
            "without re-running)")
    return None
