"""The report's failures plot places out-of-memory over memory fraction × CUDA-graph size, whichever
name the study's SGLang release gives the graph size."""

from __future__ import annotations

from typing import cast

import pytest

from tuner.query.ranking import Ranking
from tuner.report.figures import failure_axes

NO_TRIALS = cast(Ranking, type("R", (), {"trials": ()})())


@pytest.mark.parametrize("graph", ["--cuda-graph-max-bs-decode", "--cuda-graph-max-bs"])
def test_memory_axes_under_either_name(graph: str) -> None:
    assert failure_axes(NO_TRIALS, ["--speculative-num-steps", graph, "--mem-fraction-static"]) == (
        "--mem-fraction-static", graph)


def test_without_the_graph_size_no_memory_axes() -> None:
    assert failure_axes(NO_TRIALS, ["--mem-fraction-static"]) is None
