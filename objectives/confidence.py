"""When has a phase measured its throughput precisely enough? Batch means over the measured window.

The window is cut into ``BATCHES`` equal slices of time; the output tokens that arrived in each slice give
one throughput sample per slice. Token arrivals in a closed loop are correlated over about one request's
lifetime, so single chunks or requests are not independent samples — but slices much longer than that
are nearly so, which is the classic batch-means argument. With a fixed number of batches, the slices grow
as the phase runs, and their correlation fades.

The 95 % confidence interval of the mean throughput is ``mean ± t · s / √B`` with Student's t for B − 1
degrees of freedom (a constant here, so no scipy at run time). The phase may stop once the half-width is
within ``ci_target`` of the mean.
"""

from __future__ import annotations

import numpy as np

BATCHES = 10
_T_975_9_DOF = 2.2622  # Student's t, 97.5th percentile, 9 degrees of freedom (BATCHES − 1)


def relative_half_width(arrivals: np.ndarray, tokens: np.ndarray, window_s: float) -> float | None:
    """Half-width of the 95 % CI of the mean throughput, as a fraction of the mean.

    ``arrivals`` are token-arrival times in seconds since the window started, ``tokens`` how many tokens
    each arrival carried. None when the window is empty or nothing arrived.
    """
    if window_s <= 0 or arrivals.size == 0:
        return None
    counts, _ = np.histogram(arrivals, bins=BATCHES, range=(0.0, window_s), weights=tokens)
    rates = counts / (window_s / BATCHES)
    mean = rates.mean()
    if mean <= 0:
        return None
    return float(_T_975_9_DOF * rates.std(ddof=1) / np.sqrt(BATCHES) / mean)
