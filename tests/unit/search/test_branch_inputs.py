"""The grey-box sampler's models in a space with branches (tuner/search/branch_inputs.py,
greybox.py): a branch's own flags are inputs of the accept-length model."""

from __future__ import annotations

import numpy as np

from tests.helpers import STUDIES
from tuner.search.candidates import candidates
from tuner.search.greybox import GreyBoxSampler, Observations
from tuner.sglang.options import load_option_table
from tuner.study.load import load_study_file
from tuner.study.space import DRAFT, SearchSpace

BREADTH = "--speculative-ngram-max-bfs-breadth"


def test_the_accept_model_tells_a_branchs_own_flag_apart() -> None:
    # NGRAM's acceptance is set by its BFS breadth (a flag of that branch alone): breadth 1 accepts
    # 6 tokens a step, breadth 4 two, whatever the draft tokens. A model that does not see the
    # breadth averages the two and proposes breadth 4 as readily as breadth 1 (docs/benchmarks.md,
    # "Spaces with branches").
    spec = load_study_file(STUDIES / "speculation-branches.toml")
    space = SearchSpace(spec, load_option_table(spec.study.sglang_version))
    table = candidates(space)
    configs = [space.decode(p).config for p in table.params]
    ngram = [r for r, c in enumerate(configs) if c is not None and c.get(BREADTH) in (1, 4)
             and c.get("--mem-fraction-static") == 0.85
             and c.get("--cuda-graph-max-bs-decode") == 64]
    draft = {r: configs[r].get(DRAFT) for r in ngram}  # type: ignore[union-attr]
    breadth = {r: configs[r].get(BREADTH) for r in ngram}  # type: ignore[union-attr]
    measured = [r for r in ngram if draft[r] in (4, 10, 16)]
    accept = {r: 6.0 if breadth[r] == 1 else 2.0 for r in measured}
    rows = sorted(measured)
    best = max(rows, key=lambda r: accept[r])
    obs = Observations(feasible_rows=rows, feasible=[1.0] * len(rows),
                       feasible_started=[True] * len(rows),
                       accept_rows=rows, log_accept=[float(np.log(accept[r])) for r in rows],
                       phase_rows={1: rows}, log_phase={1: [0.0] * len(rows)}, pending_rows=[],
                       known=set(rows), best_score=accept[best], leaders=[best], oom_rows=[],
                       ranked=sorted(((accept[r], r) for r in rows), reverse=True))
    sampler = GreyBoxSampler(space, {1: 1.0}, seed=0)
    open_rows = np.array([r for r in ngram if r not in measured])
    factors, _ = sampler.predict(table, obs, open_rows)
    log_mean = factors["accept"][0]
    wide = np.array([breadth[r] == 4 for r in open_rows])
    assert np.exp(log_mean[~wide].min()) > 4.0 and np.exp(log_mean[wide].max()) < 3.0
    chosen = sampler.choose(table, obs, {1: 1.0})
    assert chosen is not None and configs[chosen].get(BREADTH) == 1  # type: ignore[union-attr]
