"""SGLang releases and their option tables: which shipped table serves a release, which releases
have a flag, and what a renamed option is called in each.

Every fact here is read from the shipped tables (generated from the real wheels by
bench/sglang_versions/tables.py), never typed by hand: a renamed option is known because SGLang's
own parser marks the old spelling deprecated and names its successor (``replaced_by``); the releases
that have a flag are the shipped tables that list it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

from packaging.version import InvalidVersion, Version

from tuner.sglang.launch import ServerConfig
from tuner.sglang.options import OptionTable, available_versions, load_option_table, normalize_flag


def release_key(version: str) -> Version:
    """A sortable release (``0.5.10.post1`` after ``0.5.10``); ``LookupError`` for what is no
    version at all."""
    try:
        return Version(version)
    except InvalidVersion:
        raise LookupError(f"{version!r} is not an SGLang release number (e.g. 0.5.23)") from None


def base_release(version: str) -> str:
    """The release a post-release or local build belongs to: ``0.5.10.post1`` and ``0.5.23+cu129`` →
    base."""
    return release_key(version).base_version


@cache
def shipped() -> tuple[str, ...]:
    """The releases spectune ships a table for, oldest first."""
    return tuple(sorted(available_versions(), key=release_key))


def newest() -> str:
    return shipped()[-1]


def nearest_shipped(version: str) -> str:
    """The shipped table that best describes ``version``: its own; for a post-release or a local
    build its base's (a post-release matches its base unless a table of its own ships); else the
    newest shipped release older than it (flags added later cannot be in it); else the oldest
    shipped one."""
    releases = shipped()
    if version in releases:
        return version
    key = release_key(version)
    if key.base_version in releases:
        return key.base_version
    older = [r for r in releases if release_key(r) < key]
    return older[-1] if older else releases[0]


@dataclass(frozen=True)
class TableChoice:
    """The table a study is checked against when no target has been asked, and the line saying
    so."""

    table: OptionTable
    #: None when the table is the named release's own; else one line naming the table used and why.
    note: str | None


def table_for(version: str | None) -> TableChoice:
    """The shipped table for ``[study] sglang_version`` (None: not set — the newest shipped one)."""
    if version is None:
        chosen = newest()
        return TableChoice(load_option_table(chosen),
                           f"[study] sglang_version is not set: checking flags against "
                           f"SGLang {chosen}'s option table (the newest shipped); the target's own "
                           "SGLang is asked at preflight")
    chosen = nearest_shipped(version)
    if chosen == version:
        return TableChoice(load_option_table(chosen), None)
    if chosen == base_release(version):
        why = f"SGLang {version} is checked against {chosen}'s option table (its base release)"
    else:
        why = (f"no option table ships for SGLang {version}: checking flags against SGLang "
               f"{chosen}'s (the nearest shipped; shipped: {describe(shipped())})")
    return TableChoice(load_option_table(chosen), why)


def releases_with(flag: str) -> tuple[str, ...]:
    """The shipped releases whose parser has ``flag`` (an exact option string), oldest first."""
    flag = normalize_flag(flag)
    return tuple(r for r in shipped() if flag in _option_strings(r))


@cache
def _option_strings(version: str) -> frozenset[str]:
    return frozenset(load_option_table(version).option_strings)


@cache
def _renames() -> tuple[tuple[str, str], ...]:
    """(old, new) pairs: every deprecated spelling a shipped release's parser stores into its
    successor's setting. A successor named only in prose
    (``--cuda-graph-backend-{decode,prefill}=disabled``) or one that keeps a setting of its own is
    no rename: its meaning may differ, so nothing is mapped."""
    pairs: set[tuple[str, str]] = set()
    for version in shipped():
        table = load_option_table(version)
        for spec in table.options:
            successor = table.by_option(spec.replaced_by) if spec.replaced_by else None
            if successor is not None and successor.dest == spec.dest and successor is not spec:
                pairs.update((opt, successor.name) for opt in spec.opts)
    return tuple(sorted(pairs))


def same_setting(flag: str) -> tuple[str, ...]:
    """Every spelling, across the shipped releases, of the setting ``flag`` names (``flag`` first):
    the option SGLang renamed (``--cuda-graph-max-bs`` ↔ ``--cuda-graph-max-bs-decode``) and its
    deprecated aliases."""
    flag = normalize_flag(flag)
    group = {flag}
    changed = True
    while changed:  # the closure: a → b and b → c make one setting
        changed = False
        for old, new in _renames():
            if (old in group) != (new in group):
                group.update((old, new))
                changed = True
    return (flag, *sorted(group - {flag}))


def spelling_in(flag: str, table: OptionTable) -> str | None:
    """How ``table``'s release spells the setting ``flag`` names: ``flag`` itself when it is an
    exact option there, else the one other spelling of the same setting it has (the non-deprecated
    one first); None when the release has no spelling of it."""
    flag = normalize_flag(flag)
    names = set(table.option_strings)
    if flag in names:
        return flag
    candidates = [s for s in same_setting(flag)[1:] if s in names]
    current = [s for s in candidates if not table.is_deprecated(s)]
    return next(iter(current or candidates), None)


def describe(releases: Iterable[str]) -> str:
    """Releases as runs of consecutive shipped ones: ``0.5.14–0.5.23`` or ``0.5.6,
    0.5.14–0.5.17``."""
    order = {r: i for i, r in enumerate(shipped())}
    chosen = sorted({r for r in releases if r in order}, key=order.__getitem__)
    runs: list[list[str]] = []
    for r in chosen:
        if runs and order[runs[-1][-1]] + 1 == order[r]:
            runs[-1].append(r)
        else:
            runs.append([r])
    return ", ".join(run[0] if len(run) == 1 else f"{run[0]}–{run[-1]}"
                     for run in runs) or "none shipped"


def releases_accepting(flag: str, choice: str) -> tuple[str, ...]:
    """The shipped releases whose ``flag`` (or its renamed spelling) lists ``choice`` among its
    choices."""
    found = []
    for release in shipped():
        table = load_option_table(release)
        spelled = spelling_in(flag, table)
        spec = table.by_option(spelled) if spelled else None
        if spec is not None and (spec.choices is None or choice in spec.choices):
            found.append(release)
    return tuple(found)


def respelled(config: ServerConfig, table: OptionTable) -> ServerConfig:
    """``config`` with each flag as ``table``'s release spells its setting
    (``--cuda-graph-max-bs-decode`` is ``--cuda-graph-max-bs`` in 0.5.10): a study keeps its own
    flag names (its Optuna parameters are named after them), and the command a target runs is
    written in its own SGLang's names. A flag the release has no spelling of is kept (rendering it
    then fails, naming it)."""
    flags = {(spelling_in(flag, table) or flag): value for flag, value in config.flags}
    return ServerConfig.build(flags, dict(config.env))
