"""``spectune dashboard``: optuna-dashboard on the study's storage, with infeasible trials shown as
infeasible.

Optuna 5 stores each constraint as its own trial system attr, ``constraints:<name>``
(``trial.set_constraint``). optuna-dashboard 0.21 only reads the pre-5.0 form, a list under
``constraints`` (``_serializer.py``: ``trial_system_attrs.get("constraints", [])``), so out of the
box every trial of a spectune study looks feasible there — an out-of-memory trial's placeholder
value included. Writing the old list into the study as well would make Optuna count every constraint
twice (it merges both forms), so instead the dashboard reads the study through
``FeasibilityStorage``: a pass-through that adds the list to the trials it hands out, in memory
only, and answers "best trial" among feasible trials only. Nothing stored changes.

A trial whose C=64 phase was skipped stores its optimistic bound as its value (what the sampler is
told); the dashboard would plot that as a feasible point at the bound. So it is handed out as PRUNED
(stopped early — what it was), without a value, and with a ``spectune`` user attr saying "skipped
C=64 (could not beat the best)", as everywhere else spectune shows it.

The same view presents each trial's parameters as the flags it ran with: Optuna stores encodings (an
index into a choice list, a count of steps, a position inside the draft tree's range:
tuner/study/space.py), which would read ``speculative-eagle-topk.idx 0`` in the dashboard and make
its importances disagree with the report's. Trials come back with ``--speculative-eagle-topk =
4``-style parameters over distributions built from ``[search]``, and values rounded for reading, so
the Best Trial card, the tables and the importances all speak in flags.

The Best Trial card and the importances are spectune's own, through the code ``best``, ``trials``
and the report use (``Ranking.best``, tuner/query/importance.py), under the same ``--weights`` /
``--constraint``: each trial's value is its score under the ranking, a trial that breaks an extra
constraint is infeasible, the answer's and an unconfirmed leader's ``spectune`` attr say what they
are. Before any feasible trial (every study during its first trial, a study whose starts all failed)
the study answers with no best trial instead of an error.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from typing import Any

import optuna
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from tuner.core import interrupts
from tuner.query.importance import importance_values
from tuner.query.load import StoredStudy
from tuner.query.ranking import Ranking, rank
from tuner.store.keys import Key
from tuner.store.optuna_private import storage_of, study_id_of, with_system_attrs
from tuner.store.record import TrialRecord, skipped_text
from tuner.study.spec import ConstraintSpec, ParamSpec

#: Digits of a trial's value shown (a score of 1.6135222156490205 reads as 1.614).
VALUE_DIGITS = 3

LEGACY_CONSTRAINTS_KEY = "constraints"
#: The user attr that tells a dashboard reader what spectune calls the trial.
STATUS_ATTR = "spectune"


def _delegate(name: str) -> Callable[..., Any]:
    def method(self: FeasibilityStorage, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.inner, name)(*args, **kwargs)

    method.__name__ = name
    return method


def as_shown(trial: FrozenTrial) -> FrozenTrial:
    """``trial`` as the dashboard shows it: legacy constraints added, a skipped trial without its
    bound."""
    shown = with_legacy_constraints(trial)
    skipped = trial.user_attrs.get(Key.SKIPPED_PHASES)
    if trial.state != TrialState.COMPLETE or not skipped:
        return shown
    shown = copy.copy(shown)
    shown.state = TrialState.PRUNED
    shown._values = None
    shown._user_attrs = {**trial.user_attrs, STATUS_ATTR: skipped_text(int(c) for c in skipped)}
    return shown


def with_legacy_constraints(trial: FrozenTrial) -> FrozenTrial:
    """A copy of ``trial`` whose system attrs also carry its constraints as the list
    optuna-dashboard reads."""
    constraints = trial.constraints
    if not constraints:
        return trial
    attrs = {k: v for k, v in trial.system_attrs.items()
             if not k.startswith(LEGACY_CONSTRAINTS_KEY + ":")}
    attrs[LEGACY_CONSTRAINTS_KEY] = [float(constraints[k]) for k in sorted(constraints)]
    return with_system_attrs(trial, attrs)


def flag_distribution(p: ParamSpec) -> BaseDistribution:
    """The flag's own range, as the dashboard should show it (not the encoding Optuna samples)."""
    if p.choices is not None:
        return CategoricalDistribution([c if isinstance(c, int | float | str) else str(c)
                                        for c in p.choices])
    assert p.low is not None and p.high is not None
    if isinstance(p.low, int) and isinstance(p.high, int) and isinstance(p.step or 1, int):
        return IntDistribution(p.low, p.high, step=int(p.step or 1))
    return FloatDistribution(float(p.low), float(p.high), step=float(p.step) if p.step else None)


def with_flags(trial: FrozenTrial, distributions: dict[str, BaseDistribution]) -> FrozenTrial:
    """A copy of ``trial`` whose parameters are its flag values (deployed, else proposed) and whose
    values are rounded. Flags the trial did not set (speculation off) or values outside the range
    are left out."""
    if not distributions:
        return trial
    record = TrialRecord.from_stored(trial)
    deployed = record.config.flag_dict if record.config is not None else {}
    params, dists = {}, {}
    for flag, dist in distributions.items():
        value = deployed.get(flag, record.params_decoded.get(flag))
        if value is None:
            continue
        try:
            dist.to_internal_repr(value)
        except ValueError:
            continue
        if isinstance(dist, CategoricalDistribution) and value not in dist.choices:
            continue
        params[flag], dists[flag] = value, dist
    shown = copy.copy(trial)
    shown._params = params
    shown._distributions = dists
    if trial.values is not None:
        shown._values = [round(v, VALUE_DIGITS) for v in trial.values]
    return shown


class FeasibilityStorage(optuna.storages.BaseStorage):
    """Every storage call goes to ``inner``; trials come back with the legacy constraint list added
    and, given the study's ``[search]`` distributions, with flags as parameters."""

    def __init__(self, inner: optuna.storages.BaseStorage,
                 distributions: dict[str, BaseDistribution] | None = None,
                 ranking: Callable[[], Ranking] | None = None) -> None:
        self.inner = inner
        self.distributions = distributions or {}
        self.ranking = ranking  # the ranking now (the study grows while the dashboard runs)
        #: While the study's detail is built with no answer yet: ``get_best_trial`` hands out a
        #: stand-in that ``make_app`` removes from the reply (optuna-dashboard asks whenever a trial
        #: is COMPLETE).
        self.stand_in = False

    def _present(self, trial: FrozenTrial, ranking: Ranking | None = None) -> FrozenTrial:
        """A stored trial as the dashboard shows it: constraints it can read, no bound as a score,
        flags, and under a ranking its score and feasibility there."""
        shown = with_flags(as_shown(trial), self.distributions)
        return ranked(shown, ranking) if ranking is not None else shown

    # Plain forwarding for everything else (the class body's namespace is where methods are
    # defined).
    for _name in ("create_new_study", "delete_study", "set_study_user_attr",
                  "set_study_system_attr",
                  "get_study_id_from_name", "get_study_name_from_id", "get_study_directions",
                  "get_study_user_attrs", "get_study_system_attrs", "get_all_studies",
                  "create_new_trial",
                  "set_trial_param", "set_trial_state_values", "set_trial_intermediate_value",
                  "set_trial_user_attr", "set_trial_system_attr",
                  "get_trial_id_from_study_id_trial_number", "get_n_trials", "remove_session"):
        locals()[_name] = _delegate(_name)
    del _name

    def _ranking(self) -> Ranking | None:
        return self.ranking() if self.ranking is not None else None

    def get_trial(self, trial_id: int) -> FrozenTrial:
        return self._present(self.inner.get_trial(trial_id), self._ranking())

    def get_all_trials(self, study_id: int, deepcopy: bool = True,
                       states: Container[TrialState] | None = None) -> list[FrozenTrial]:
        # Filtered as shown: a skipped trial is COMPLETE in storage but PRUNED in the dashboard.
        ranking = self._ranking()
        shown = [self._present(t, ranking)
                 for t in self.inner.get_all_trials(study_id, deepcopy=deepcopy)]
        return [t for t in shown if states is None or t.state in states]

    def _by_number(self, study_id: int, number: int) -> FrozenTrial:
        return self.inner.get_trial(self.inner.get_trial_id_from_study_id_trial_number(study_id,
                                                                                       number))

    def get_best_trial(self, study_id: int) -> FrozenTrial:
        """The answer under the ranking (``Ranking.best``: what ``best`` names); without a ranking,
        the best *feasible* complete trial (Optuna's RDB storage ranks by value alone).
        ``NoBestTrial`` when there is none yet: ``make_app`` answers that study with no best
        trial."""
        ranking = self._ranking()
        if ranking is not None:
            answer = ranking.best
            if answer is None and self.stand_in:
                complete = [t for t in ranking.trials if t.state == "COMPLETE"]
                if complete:
                    return self._present(self._by_number(study_id, complete[0].number), ranking)
            if answer is None:
                raise NoBestTrial("no feasible trial is completed yet")
            return self._present(self._by_number(study_id, answer.number), ranking)
        direction = self.inner.get_study_directions(study_id)[0]
        trials = [t for t in self.inner.get_all_trials(study_id, deepcopy=False,
                                                       states=(TrialState.COMPLETE,))
                  if t.value is not None and TrialRecord.from_stored(t).feasible
                  and not t.user_attrs.get(Key.SKIPPED_PHASES)]
        if not trials:
            raise NoBestTrial("no feasible trial is completed yet")
        pick = max if direction == StudyDirection.MAXIMIZE else min
        return self._present(pick(trials, key=lambda t: (t.value, -t.number)))


class NoBestTrial(ValueError):
    """No trial can be the answer yet (every study during its first trial)."""


def ranked(shown: FrozenTrial, ranking: Ranking) -> FrozenTrial:
    """``shown`` under ``ranking``: its value is its score there, an extra constraint it breaks
    makes it infeasible, and the answer / an unconfirmed leader say so in the ``spectune`` attr."""
    view = next((t for t in ranking.trials if t.number == shown.number), None)
    if view is None:
        return shown
    out = copy.copy(shown)
    if out.state == TrialState.COMPLETE and view.score is not None and out.values is not None:
        out._values = [round(view.score, VALUE_DIGITS)]
    extra = {c.text for c in ranking.constraints}
    broken = [v for k, v in view.violations.items() if k in extra]
    if broken and out.state == TrialState.COMPLETE:
        attrs = dict(out.system_attrs)
        attrs[LEGACY_CONSTRAINTS_KEY] = [*attrs.get(LEGACY_CONSTRAINTS_KEY, []),
                                         *(min(v, 1e12) for v in broken)]  # JSON has no inf
        out = with_system_attrs(out, attrs)
    best, leader = ranking.best, ranking.unconfirmed_leader
    role = ("the answer" + (" (confirmed)" if ranking.verdict is not None else "")
            if best is not None and best.number == view.number else
            "leads under these weights, never confirmed"
            if leader is not None and leader.number == view.number
            else None)
    if role is not None:
        out._user_attrs = {**out.user_attrs, STATUS_ATTR: role}
    return out


def make_app(stored: StoredStudy, weights: Mapping[int, float] | None = None,
             constraints: Sequence[ConstraintSpec] = ()) -> Any:
    """The dashboard as a WSGI app (for tests and for serving), ranked under ``weights`` (default:
    the study file's) and the extra ``constraints``."""
    from optuna_dashboard import wsgi

    def ranking() -> Ranking:
        return rank(stored.study, stored.spec, weights, constraints)

    # mypy cannot see the forwarding methods the class body defines in a loop.
    distributions = {p.flag: flag_distribution(p) for p in stored.spec.search}
    storage = FeasibilityStorage(storage_of(stored.study), distributions,
                                 ranking)  # type: ignore[abstract]
    inner = wsgi(storage)
    flags = [p.flag for p in stored.spec.search]
    detail = re.compile(r"/api/studies/\d+")
    importances = re.compile(r"/api/studies/\d+/param_importances")

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if importances.fullmatch(path):
            return _json(start_response, {"param_importances": [importance_json(ranking(), flags)]})
        if detail.fullmatch(path):
            return _study_detail(inner, storage, environ, start_response)
        return inner(environ, start_response)

    return app


def importance_json(ranking: Ranking, flags: Sequence[str]) -> list[dict[str, Any]]:
    """The report's importances (tuner/query/importance.py) in optuna-dashboard's form, largest
    first."""
    found = importance_values(ranking, flags)
    if found is None:
        return []
    values = found[0]
    return [{"name": name, "importance": values[name],
             "distribution": _distribution_name(ranking, name)}
            for name in sorted(values, key=lambda n: -values[n])]


def _distribution_name(ranking: Ranking, flag: str) -> str:
    numeric = all(isinstance(t.tuned.get(flag), int | float)
                  and not isinstance(t.tuned.get(flag), bool)
                  for t in ranking.trials if t.rankable)
    return "FloatDistribution" if numeric else "CategoricalDistribution"


def _json(start_response: Callable[..., Any], payload: Any) -> list[bytes]:
    body = json.dumps(payload).encode()
    start_response("200 OK",
                   [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


def _study_detail(inner: Any, storage: FeasibilityStorage, environ: dict[str, Any],
                  start_response: Callable[..., Any]) -> Iterable[bytes]:
    """The study's detail; when no trial can be the answer yet, with no best trial (optuna-dashboard
    would answer HTTP 500 from ``get_best_trial``): the study is served at every moment."""
    ranking = storage._ranking()
    if ranking is None or ranking.best is not None:
        return inner(environ, start_response)
    storage.stand_in = True
    try:
        captured: list[Any] = []
        body = b"".join(inner(environ, lambda status, headers,
                              exc_info=None: captured.append((status, headers))))
    finally:
        storage.stand_in = False
    status, headers = captured[0]
    if status.startswith("200"):
        payload = json.loads(body)
        payload["best_trials"] = []
        body = json.dumps(payload).encode()
        headers = [(k, v) for k, v in headers if k.lower() != "content-length"]
        headers.append(("Content-Length", str(len(body))))
    start_response(status, headers)
    return [body]


def serve(stored: StoredStudy, host: str, port: int, *,
          on_ready: Callable[[str], None] | None = None, weights: Mapping[int, float] | None = None,
          constraints: Sequence[ConstraintSpec] = ()) -> None:
    """Serve the dashboard until interrupted (wsgiref, like ``optuna-dashboard`` itself)."""
    from wsgiref.simple_server import WSGIRequestHandler, make_server

    class QuietHandler(WSGIRequestHandler):
        # one line per request would drown the URL
        def log_message(self, format: str, *args: Any) -> None:
            pass

    app = make_app(stored, weights, constraints)
    with make_server(host, port, app, handler_class=QuietHandler) as server:
        url_host = f"[{host}]" if ":" in host else host
        study_id = study_id_of(stored.study)
        if on_ready is not None:
            on_ready(f"http://{url_host}:{server.server_port}/dashboard/studies/{study_id}")
        while True:
            server.handle_request()
            # wsgiref's handler turns any exception while it answers a request into a 500 and serves
            # on: a signal that landed then (its handler raises only once) is raised here instead.
            interrupts.check()
