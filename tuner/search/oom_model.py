"""The grey-box sampler's monotone out-of-memory model (tuner/search/greybox.py): more of any memory
flag never needs less memory, so P(out of memory) is a logistic in the memory columns with
non-negative weights."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
from scipy.optimize import minimize


class MemoryTable(Protocol):
    """What the model reads of the grey-box sampler's candidate table (named here, not imported, so
    the sampler can import this module without a circle)."""

    @property
    def x(self) -> np.ndarray: ...

    @property
    def memory_columns(self) -> tuple[int, ...]: ...


#: Priors of the monotone out-of-memory model: log weight per memory input (mean, sd), and the
#: bias's sd.
OOM_LOG_WEIGHT = (np.log(4.0), 1.5)
OOM_BIAS_SD = 10.0


def monotone_oom(table: MemoryTable, started: Sequence[int], failed: Sequence[int],
                 rows: np.ndarray) -> np.ndarray:
    """P(out of memory) at ``rows``: logistic in the memory columns with non-negative weights (more
    of any of them never needs less memory), MAP with weak priors, fitted to the rows that
    ``started`` and ``failed``."""
    columns = list(table.memory_columns)
    x = table.x[list(started) + list(failed)][:, columns]
    y = np.array([0.0] * len(started) + [1.0] * len(failed))

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        w = np.exp(theta[1:])
        z = theta[0] + x @ w
        p = 1.0 / (1.0 + np.exp(-z))
        value = float(np.sum(np.logaddexp(0.0, z) - y * z))
        value += 0.5 * float((((theta[1:] - OOM_LOG_WEIGHT[0]) / OOM_LOG_WEIGHT[1]) ** 2).sum()) \
            + 0.5 * float(theta[0] / OOM_BIAS_SD) ** 2
        grad = np.empty_like(theta)
        grad[0] = float((p - y).sum()) + theta[0] / OOM_BIAS_SD ** 2
        grad[1:] = (x
                    * (p - y)[:, None]).sum(0) * w + (theta[1:]
                                                      - OOM_LOG_WEIGHT[0]) / OOM_LOG_WEIGHT[1] ** 2
        return value, grad

    start = np.array([0.0] + [OOM_LOG_WEIGHT[0]] * len(columns))
    theta = minimize(loss, start, method="L-BFGS-B", jac=True,
                     bounds=[(-50.0, 50.0)] + [(-10.0, 6.0)] * len(columns)).x
    z = theta[0] + table.x[rows][:, columns] @ np.exp(theta[1:])
    return 1.0 / (1.0 + np.exp(-z))
