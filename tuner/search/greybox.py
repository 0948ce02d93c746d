"""The grey-box sampler: models of what every trial measures, not only of its score.

A trial's score is Σ w_c · speed_c / reference_c, and each phase's speed is the accept length
(tokens per verification step: set by the draft tree and the workload alone, measured with little
noise) times steps per second (decreasing smoothly with the tree, the batch and the graph size).
Their product is a needle — 2 % of the seed space is within 2 % of the optimum — while each factor
is smooth. So this sampler fits one small GP (tuner/search/gp.py) to the log accept length over the
speculative flags and tokens per level (tuner/search/tree_shape.py) — around a three-number formula
of a tree's acceptance fitted first (tuner/search/accept_prior.py) —, one per weighted phase to the
log speed per accepted token over all tuned flags, and one to feasibility (failed starts and
violated constraints), and picks the unmeasured configuration with the highest expected improvement
of the *composed* score × its probability of being feasible — among those near the best trial so far
(a trust region, tuner/search/trust_region.py; once a configuration in it has run out of memory or
crashed, one memory or scheduling flag at a time), and over the whole space only once that box is
measured out; never a tree too shallow for its steps. A trial whose C=64 phase was skipped still
teaches the accept-length and C=1 models; no value has to be invented for it.

It is an Optuna ``BaseSampler`` (relative sampling over every dimension of the space), so storage,
several workers and the dashboard work as with Optuna's own samplers. Candidates are the space's
distinct valid configurations (tuner/search/candidates.py). Needs NumPy and SciPy only. Before
``min_observations`` trials have ended, and for a multi-objective study, it samples at random (the
designed start, tuner/search/baseline.py, comes first anyway).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler, RandomSampler
from optuna.study import Study
from optuna.trial import FrozenTrial, TrialState
from scipy.stats import norm

from objectives.scoring import PhaseMetrics, figure, phase_value
from tuner.search.accept_prior import fit_prior
from tuner.search.branch_pool import (
    over_share,
    still_winnable,
    untried_own_flags,
    untried_twin,
)
from tuner.search.candidates import Candidates, candidates
from tuner.search.gp import GP, fit_gp
from tuner.search.oom_model import monotone_oom
from tuner.search.trust_region import one_flag_at_a_time, radius, within
from tuner.store.optuna_private import was_queued
from tuner.store.record import Outcome, TrialRecord
from tuner.store.score import stored_references
from tuner.study.space import SearchSpace

#: Monte-Carlo samples of the composed score per candidate, and how many candidates get them.
MC_SAMPLES = 128
MC_CANDIDATES = 2000
#: Candidates the models are evaluated on per proposal: a fresh random sample of this many, plus
#: every candidate close to one of the ``LEADERS`` best trials (within ``NEAR`` of it on every model
#: input).
PREDICT_LIMIT = 20_000
LEADERS = 3
NEAR = 0.2
#: A model is fitted to at most this many observations, the latest (an exact GP is cubic in them): a
#: study of hundreds of trials keeps proposals under a few seconds.
MAX_FIT = 150
#: The run-to-run spread of a phase's figure that the speed models assume at least (a relative
#: standard deviation, so 0.02 in their log units). Why (docs/benchmarks.md, "The measurement
#: noise as a floor"): fitted freely to 5–20 trials, a GP explains a benchmark's own 2–3 % noise
#: as effects of the flags — the lengthscales of flags that change nothing stay below 2 — and
#: expected improvement then spends trials moving them.
MEASUREMENT_NOISE = 0.02
#: What that leaves of the probability of being feasible.
DOMINATED_BY_OOM = 0.05
#: What a tree shape (steps, topk) that already crashed, hung or answered wrongly keeps of it, per
#: such failure.
SAME_SHAPE_AS_RUN_FAILURE = 0.2
#: What a tree at least as deep and as wide as one that failed so keeps of it, per such failure.
LARGER_TREE_THAN_RUN_FAILURE = 0.2


@dataclass(frozen=True)
class Observations:
    """What the finished trials say, as model inputs (rows of the candidate table) and outputs."""

    feasible_rows: list[int]
    feasible: list[float]  # 1.0 started and met every constraint, else 0.0
    feasible_started: list[bool]  # started (whatever the constraints)
    accept_rows: list[int]
    log_accept: list[float]
    phase_rows: dict[int, list[int]]
    # log(speed ÷ accept length), or log speed without accept lengths
    log_phase: dict[int, list[float]]
    pending_rows: list[int]
    known: set[int]  # measured, failed, running: never proposed again
    best_score: float | None
    leaders: list[int]  # rows of the best-scored candidates, best first
    oom_rows: list[int]  # out of memory outside the KV pool
    # the sampler's own trials since the best score last rose (queued ones do not count)
    stall: int = 0
    #: Started, then crashed, hung or answered wrongly, for a reason other than memory (run-failed).
    run_failed_rows: list[int] = field(default_factory=list)
    # every scored candidate (score, row), best first
    ranked: list[tuple[float, int]] = field(default_factory=list)


def observe(study: Study, table: Candidates, concurrencies: Sequence[int]) -> Observations:
    feasible_rows: list[int] = []
    feasible: list[float] = []
    started_flags: list[bool] = []
    benchmarked: list[tuple[int, PhaseMetrics]] = []
    pending: list[int] = []
    oom: list[int] = []
    run_failed: list[int] = []
    known: set[int] = set()
    best: float | None = None
    scored: list[tuple[float, int]] = []
    stall = 0
    for trial in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.RUNNING)):
        record = TrialRecord.from_stored(trial)
        row = table.index.get(record.config_key or "")
        if row is None:
            continue
        known.add(row)
        if record.state == TrialState.RUNNING:
            pending.append(row)
            continue
        if not record.is_measured:
            continue  # a reuse: its original is already here
        started = record.outcome is Outcome.MEASURED
        feasible_rows.append(row)
        feasible.append(1.0 if started and record.feasible else 0.0)
        started_flags.append(started)
        if started:
            benchmarked.append((row, record.metrics))
        if record.failure_cause is not None and record.failure_cause.needs_less_memory:
            # A typed cause (tuner/targets/classify.py): graph capture, decode or weights ran out of
            # memory. A too-small KV pool is not in it: a larger static fraction cures that one.
            oom.append(row)
        elif record.outcome is Outcome.RUN_FAILED:
            run_failed.append(row)
        if record.is_candidate and record.score is not None \
                and (best is None or record.score > best):
            stall = 0
        elif not was_queued(trial):  # the baseline and the design points were queued
            stall += 1
        if record.is_candidate and record.score is not None:
            best = record.score if best is None else max(best, record.score)
            scored.append((record.score, row))
    low = min(concurrencies)
    accepts = {row: _accept(metrics, low) for row, metrics in benchmarked}
    decompose = bool(accepts) and all(a is not None for a in accepts.values())
    accept_rows = [row for row, a in accepts.items() if a is not None] if decompose else []
    log_accept = [math.log(accepts[row] or 1.0) for row in accept_rows]
    phase_rows: dict[int, list[int]] = {c: [] for c in concurrencies}
    log_phase: dict[int, list[float]] = {c: [] for c in concurrencies}
    for row, metrics in benchmarked:
        for c in concurrencies:
            value = phase_value(metrics, c)
            if value is None or value <= 0:
                continue  # skipped (or a phase that produced nothing)
            phase_rows[c].append(row)
            log_phase[c].append(math.log(value)
                                - (math.log(accepts[row] or 1.0) if decompose else 0.0))
    ranked = sorted(scored, reverse=True)
    return Observations(feasible_rows, feasible, started_flags, accept_rows, log_accept, phase_rows,
                        log_phase, pending, known, best, [row for _, row in ranked[:LEADERS]], oom,
                        stall, run_failed, ranked)


def _accept(metrics: PhaseMetrics, concurrency: int) -> float | None:
    value = figure(metrics.get(concurrency), "accept_length")
    return value if value is not None and value > 0 else None


class GreyBoxSampler(BaseSampler):
    """Expected improvement of the composed score (accept length × speed per accepted token, per
    phase) times the probability of being feasible, over the space's unmeasured configurations."""

    def __init__(self, space: SearchSpace, weights: Mapping[int, float], *, seed: int | None = None,
                 min_observations: int = 4) -> None:
        self._space = space
        total = sum(w for w in weights.values() if w > 0)
        self._weights = {int(c): w / total for c, w in weights.items() if w > 0}
        self._seed = seed
        self._rng = np.random.default_rng(seed)
        self._random = RandomSampler(seed=seed)
        self._min_observations = min_observations
        self._warm: dict[str, np.ndarray] = {}

    def reseed_rng(self) -> None:
        self._rng = np.random.default_rng()
        self._random.reseed_rng()

    def infer_relative_search_space(self, study: Study,
                                    trial: FrozenTrial) -> dict[str, BaseDistribution]:
        if len(study.directions) > 1:
            return {}
        return self._space.distributions()

    def sample_relative(self, study: Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        if not search_space:
            return {}
        table = candidates(self._space, self._seed or 0)
        if not table.keys:
            return {}
        obs = observe(study, table, sorted(self._weights))
        if len(obs.feasible_rows) < self._min_observations or (
                not obs.accept_rows and not any(obs.phase_rows.values())):
            return {}
        row = self.choose(table, obs, stored_references(study))
        return dict(table.params[row]) if row is not None else {}

    def sample_independent(self, study: Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        return self._random.sample_independent(study, trial, param_name, param_distribution)

    # ----- the models -----------------------------------------------------------------------------
    def _fit(self, name: str, x: np.ndarray, y: Sequence[float] | np.ndarray, *,
             min_noise: float = 1e-4, noise_floor: float = 0.0) -> GP:
        gp = fit_gp(x[-MAX_FIT:], np.asarray(y, dtype=float)[-MAX_FIT:], warm=self._warm.get(name),
                    min_noise=min_noise, noise_floor=noise_floor)
        self._warm[name] = gp.theta
        return gp

    def predict(self, table: Candidates, obs: Observations, rows: np.ndarray
                ) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], np.ndarray]:
        """(log mean, log variance) of each factor at ``rows``, by model name, and P(feasible)."""
        x = table.x
        out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        if obs.accept_rows:
            out["accept"] = self._predict_accept(table, obs, rows)
        speed_x = table.speed_x  # graph sizes above the largest batch read as one
        for c, phase_rows in obs.phase_rows.items():
            if not phase_rows:
                continue
            fit_rows, values = list(phase_rows), list(obs.log_phase[c])
            gp = self._fit(f"c{c}", speed_x[fit_rows], values, noise_floor=MEASUREMENT_NOISE)
            # a pending trial counts as measured at the model's mean (kriging believer)
            if obs.pending_rows:
                believed, _ = gp.predict(speed_x[obs.pending_rows])
                gp = self._fit(f"c{c}", speed_x[fit_rows + obs.pending_rows],
                               values + list(believed), noise_floor=MEASUREMENT_NOISE)
            out[f"c{c}"] = gp.predict(speed_x[rows])
        # Out of memory: a logistic model that is monotone in the memory flags
        # (tuner/search/candidates.py MEMORY_GROWS), fitted to the starts and the OOM failures;
        # every other way of being infeasible (constraints, crashes, a KV pool too small): a GP on
        # the labels.
        oom = set(obs.oom_rows)
        p_feasible = np.ones(len(rows))
        if oom and table.memory_columns:
            started = [r for r, ok in zip(obs.feasible_rows, obs.feasible_started, strict=True)
                       if ok]
            p_feasible *= 1.0 - monotone_oom(table, started, list(oom), rows)
            p_feasible = np.where(self._dominates_oom(table, obs.oom_rows, rows),
                                  DOMINATED_BY_OOM * p_feasible, p_feasible)
        other = [(r, y) for r, y in zip(obs.feasible_rows, obs.feasible, strict=True)
                 if r not in oom]
        labels = np.asarray([y for _, y in other])
        if len(labels) and labels.min() < 1.0:
            gp = self._fit("feasible", x[[r for r, _ in other]], labels, min_noise=1e-2)
            mu, var = gp.predict(x[rows])
            p_feasible *= norm.cdf((mu - 0.5) / np.sqrt(var + 0.05))
        if obs.run_failed_rows:
            p_feasible = p_feasible * self._after_run_failures(table, obs.run_failed_rows, rows)
        return out, p_feasible

    def _predict_accept(self, table: Candidates, obs: Observations, rows: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]:
        """(log mean, log variance) of the accept length at ``rows``: the tree's formula fitted to
        the measured accept lengths (tuner/search/accept_prior.py: why), and a GP of what it
        misses; the GP alone where there is no formula yet."""
        measured = np.asarray(obs.log_accept, dtype=float)
        trees = table.tree_values
        prior = fit_prior(trees[obs.accept_rows], measured) if trees is not None else None
        if trees is not None and prior is not None:
            gp = self._fit("accept", table.accept_x[obs.accept_rows],
                           measured - prior.log_accept(trees[obs.accept_rows]))
            mu, var = gp.predict(table.accept_x[rows])
            return mu + prior.log_accept(trees[rows]), var
        return self._fit("accept", table.accept_x[obs.accept_rows], measured).predict(
            table.accept_x[rows])

    @staticmethod
    def _after_run_failures(table: Candidates, failed_rows: Sequence[int],
                            rows: np.ndarray) -> np.ndarray:
        """What each row keeps of its probability of being feasible after the run failures so far.

        A wrong answer, a crash or a hang that is not about memory follows the kernels the draft
        tree's shape selects (e.g. one attention backend with top-k > 1): the same shape is likely
        to fail again, whatever its draft-token count or memory flags. A tree at least as deep and
        as wide, on the same branch, runs those kernels harder (more levels, more branches per
        level verified at once), so it is likely to fail too. Each failure is evidence of its own:
        a tree above two failed shapes keeps the factor twice. The shape alone was not enough
        (docs/benchmarks.md, "Failures the search learns from"): a search drawn to a fast, failing
        corner probed it from above, one larger tree after another."""
        failed_rows = list(failed_rows)
        same = np.zeros((len(rows), len(failed_rows)), dtype=bool)
        if table.shape_columns:
            shape = list(table.shape_columns)
            same = (np.abs(table.x[rows][:, shape][:, None, :]
                           - table.x[failed_rows][:, shape][None, :, :]) <= 1e-9).all(2)
        larger = np.zeros_like(same)
        trees = table.tree_values
        if trees is not None:
            labels = table.labels if len(table.labels) == len(trees) else np.zeros(len(trees))
            # (steps, top-k) at least those of a run failure, on its branch
            larger = ((trees[rows][:, None, :2] >= trees[failed_rows][None, :, :2] - 1e-9).all(2)
                      & (labels[rows][:, None] == labels[failed_rows][None, :]))
        keep: np.ndarray = np.prod(np.where(same, SAME_SHAPE_AS_RUN_FAILURE,
                                            np.where(larger, LARGER_TREE_THAN_RUN_FAILURE, 1.0)),
                                   axis=1)
        return keep

    @staticmethod
    def _dominates_oom(table: Candidates, oom_rows: Sequence[int], rows: np.ndarray) -> np.ndarray:
        """Whether each row needs at least the memory of one that ran out
        (tuner/search/candidates.py MEMORY_GROWS)."""
        x = table.x[rows]
        grows = np.zeros(x.shape[1], dtype=bool)
        grows[list(table.memory_columns)] = True
        out = np.zeros(len(rows), dtype=bool)
        for row in oom_rows:
            failed = table.x[row]
            out |= np.all(np.where(grows, x >= failed - 1e-9, np.abs(x - failed) <= 1e-9), axis=1)
        return out

    def choose(self, table: Candidates, obs: Observations,
               references: Mapping[int, float]) -> int | None:
        """The candidate row to measure next, or None when every candidate is known."""
        unknown = np.ones(len(table.keys), dtype=bool)
        unknown[list(obs.known)] = False
        if not unknown.any():
            return None
        # a shallow tree is never the best (tree_shape.py: why)
        deep_enough = unknown & ~table.shallow
        if deep_enough.any():
            unknown = deep_enough
        # leaders alone: as ranked
        ranked = obs.ranked or [(obs.best_score or 0.0, row) for row in obs.leaders]
        held = over_share(table.labels, table.x, sorted(obs.known), ranked)
        if held is not None and (unknown & ~held).any():  # a trailing branch's share (why there)
            unknown = unknown & ~held
        # the best trial on a close branch, then a trailing branch's own flags (branch_pool.py: why)
        focus = untried_twin(table.labels, table.x, ranked, unknown)
        if focus is None:
            focus = untried_own_flags(table.labels, table.x, table.rungs, ranked, unknown)
        if focus is not None:
            unknown = focus
        elif ranked:
            # near the best trial while that box has anything left (trust_region.py: why)
            box = within(table.rungs, ranked[0][1], radius(obs.stall))
            near = unknown & box
            failed = [*obs.oom_rows, *obs.run_failed_rows]
            if failed and box[failed].any():
                # a memory cliff inside the box: one memory or scheduling flag at a time
                stepwise = near & one_flag_at_a_time(table.x, ranked[0][1], table.other_flags)
                if stepwise.any():
                    near = stepwise
            if near.any():
                unknown = near
        if unknown.sum() > PREDICT_LIMIT:
            chosen = np.zeros_like(unknown)
            chosen[self._rng.choice(np.flatnonzero(unknown), PREDICT_LIMIT, replace=False)] = True
            for row in obs.leaders:
                chosen |= np.all(np.abs(table.x - table.x[row]) <= NEAR, axis=1)
            unknown &= chosen
        open_rows = np.flatnonzero(unknown)
        factors, p_feasible = self.predict(table, obs, open_rows)
        coefficients = {c: w / references[c] for c, w in self._weights.items()
                        if references.get(c) and f"c{c}" in factors}
        if not coefficients:
            return int(open_rows[int(np.argmax(p_feasible))])
        accept = factors.get("accept", (np.zeros(len(open_rows)), np.zeros(len(open_rows))))
        # A phase never measured yet (every C=64 skipped) is left out of the score rather than
        # guessed.
        scale = sum(self._weights[c] for c in coefficients)
        upper = np.zeros(len(open_rows))
        for c, k in coefficients.items():
            mu, var = factors[f"c{c}"]
            upper += k / scale * np.exp(accept[0] + mu + 2.0 * np.sqrt(accept[1] + var))
        # A branch that cannot win anymore gets nothing (tuner/search/branch_pool.py: why).
        winnable = still_winnable(table.labels, open_rows, upper * p_feasible, ranked)
        shortlist = np.argsort(-(upper * p_feasible * winnable))[:MC_CANDIDATES]
        draws = np.zeros((len(shortlist), MC_SAMPLES))
        shared = self._rng.standard_normal((len(shortlist), MC_SAMPLES))
        log_accept = accept[0][shortlist, None] + np.sqrt(accept[1][shortlist, None]) * shared
        for c, k in coefficients.items():
            mu, var = factors[f"c{c}"]
            eps = self._rng.standard_normal((len(shortlist), MC_SAMPLES))
            draws += k / scale * np.exp(log_accept + mu[shortlist, None]
                                        + np.sqrt(var[shortlist, None]) * eps)
        best = obs.best_score if obs.best_score is not None else float(np.median(draws))
        improvement = (np.maximum(draws - best, 0.0).mean(axis=1) * p_feasible[shortlist]
                       * winnable[shortlist])
        return int(open_rows[shortlist[int(np.argmax(improvement))]])
