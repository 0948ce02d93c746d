"""A small Gaussian process in NumPy/SciPy: what the grey-box sampler (tuner/search/greybox.py) fits
its models with.

Why not Optuna's GPSampler or BoTorch: both need PyTorch (~700 MB), and the grey-box sampler fits
three or four models of its own outputs (accept length, per-phase speed per accepted token,
feasibility) rather than one of the score. A study has tens of trials, so an exact GP costs
microseconds per fit step.

Matérn-5/2 kernel with one lengthscale per input (inputs are in [0, 1]) plus a linear kernel, a
constant mean, and hyperparameters
chosen by maximising the marginal likelihood plus weak log-normal priors (MAP): with five or ten
points the priors keep the lengthscales sensible.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_factor, cho_solve, solve_triangular
from scipy.optimize import minimize

#: Prior on log lengthscales (inputs in [0, 1]): centred on 0.4, wide enough for irrelevant inputs
#: to grow.
LOG_LS_PRIOR = (np.log(0.4), 1.0)
#: Prior on log noise variance of the standardised outputs: a few per cent of the spread.
LOG_NOISE_PRIOR = (np.log(1e-2), 1.5)
BOUNDS_LOG_LS = (np.log(0.03), np.log(30.0))
BOUNDS_LOG_SIGNAL = (np.log(0.05), np.log(20.0))
BOUNDS_LOG_NOISE = (np.log(1e-5), np.log(1.0))
#: The linear part of the kernel, (x − ½)·(x' − ½) × its variance: lets a model extrapolate a trend
#: (fewer draft tokens → a faster step) to where no trial went yet, where a constant mean would
#: predict the average.
LOG_LINEAR_PRIOR = (np.log(0.2), 1.5)
BOUNDS_LOG_LINEAR = (np.log(1e-4), np.log(20.0))
JITTER = 1e-8
#: The most of the standardised outputs' variance a ``noise_floor`` may claim as noise (outputs
#: that spread less than the floor are still modelled, mostly as noise).
MAX_NOISE_FLOOR = 0.5


def matern52(a: np.ndarray, b: np.ndarray, lengthscales: np.ndarray) -> np.ndarray:
    """k(a, b) for unit signal variance; (len(a), len(b))."""
    sa, sb = a / lengthscales, b / lengthscales
    sq = (sa * sa).sum(1)[:, None] + (sb * sb).sum(1)[None, :] - 2.0 * sa @ sb.T
    r = np.sqrt(np.maximum(sq, 0.0))
    s5 = np.sqrt(5.0) * r
    return (1.0 + s5 + 5.0 / 3.0 * r * r) * np.exp(-s5)


@dataclass(frozen=True)
class GP:
    """A fitted GP: ``predict`` gives the posterior mean and variance (of the latent function) in
    output units."""

    x: np.ndarray
    lengthscales: np.ndarray
    signal: float
    noise: float
    mean: float
    scale: float
    alpha: np.ndarray
    factor: tuple[np.ndarray, bool]
    linear: float
    theta: np.ndarray  # the fitted log-hyperparameters (a warm start for the next fit)

    def predict(self, xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        centred = xs - 0.5
        k = self.signal * matern52(xs, self.x,
                                   self.lengthscales) + self.linear * centred @ (self.x - 0.5).T
        mu = k @ self.alpha
        v = solve_triangular(self.factor[0], k.T, lower=True)
        prior = self.signal + self.linear * (centred * centred).sum(1)
        var = np.maximum(prior - (v * v).sum(0), 1e-12)
        return self.mean + self.scale * mu, self.scale ** 2 * var


def _unpack(theta: np.ndarray, d: int) -> tuple[np.ndarray, float, float, float]:
    return np.exp(theta[:d]), float(np.exp(theta[d])), float(np.exp(theta[d + 1])), float(
        np.exp(theta[d + 2]))


def _objective(theta: np.ndarray, x: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """Negative log marginal likelihood plus the negative log priors (up to constants), and its
    gradient."""
    n, d = x.shape
    ls, signal, noise, linear = _unpack(theta, d)
    centred = x - 0.5
    gram = centred @ centred.T
    diff2 = ((x[:, None, :] - x[None, :, :]) / ls) ** 2  # (n, n, d)
    r = np.sqrt(diff2.sum(-1))
    s5 = np.sqrt(5.0) * r
    e = np.exp(-s5)
    base = (1.0 + s5 + 5.0 / 3.0 * r * r) * e
    k = signal * base + linear * gram + (noise + JITTER) * np.eye(n)
    try:
        factor = cho_factor(k, lower=True)
    except np.linalg.LinAlgError:
        return 1e10, np.zeros_like(theta)
    alpha = cho_solve(factor, y)
    value = 0.5 * float(y @ alpha) + float(np.log(np.diag(factor[0])).sum())
    # d NLL / d θ = ½ tr((K⁻¹ − ααᵀ) dK/dθ); for Matérn-5/2, dk/d log ℓ_j = 5/3 (1 + √5 r) e^(−√5 r)
    # Δ_j²/ℓ_j².
    w = cho_solve(factor, np.eye(n)) - np.outer(alpha, alpha)
    common = signal * 5.0 / 3.0 * (1.0 + s5) * e
    grad = np.empty_like(theta)
    grad[:d] = 0.5 * np.einsum("ij,ijk->k", w * common, diff2)
    grad[d] = 0.5 * float((w * signal * base).sum())
    grad[d + 1] = 0.5 * float(np.trace(w)) * noise
    grad[d + 2] = 0.5 * float((w * linear * gram).sum())
    m, s = LOG_LS_PRIOR
    value += 0.5 * float((((theta[:d] - m) / s) ** 2).sum()) + 0.5 * float(theta[d] ** 2)
    grad[:d] += (theta[:d] - m) / s ** 2
    grad[d] += theta[d]
    mn, sn = LOG_NOISE_PRIOR
    value += 0.5 * float(((theta[d + 1] - mn) / sn) ** 2)
    grad[d + 1] += (theta[d + 1] - mn) / sn ** 2
    ml, sl = LOG_LINEAR_PRIOR
    value += 0.5 * float(((theta[d + 2] - ml) / sl) ** 2)
    grad[d + 2] += (theta[d + 2] - ml) / sl ** 2
    return value, grad


def fit_gp(x: np.ndarray, y: np.ndarray, *, warm: np.ndarray | None = None, min_noise: float = 1e-5,
           noise_floor: float = 0.0, max_iter: int = 60) -> GP:
    """Fit a GP to ``y`` at ``x`` (n × d, inputs in [0, 1]). ``warm``: log-hyperparameters to start
    from (a previous fit's ``theta``); ``min_noise``: a floor on the noise variance of the
    standardised outputs; ``noise_floor``: a floor on the noise's standard deviation in ``y``'s own
    units (what is known of the measurement: a benchmark's run-to-run spread)."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    n, d = x.shape
    mean = float(y.mean()) if n else 0.0
    scale = float(y.std()) if n > 1 and y.std() > 1e-9 else 1.0
    ys = (y - mean) / scale
    if noise_floor > 0:
        # below the upper bound of the noise, whatever the outputs' spread
        min_noise = min(MAX_NOISE_FLOOR, max(min_noise, (noise_floor / scale) ** 2))
    bounds = [BOUNDS_LOG_LS] * d + [BOUNDS_LOG_SIGNAL, (max(BOUNDS_LOG_NOISE[0], np.log(min_noise)),
                                                      BOUNDS_LOG_NOISE[1]), BOUNDS_LOG_LINEAR]
    default = np.array([LOG_LS_PRIOR[0]] * d + [0.0, max(LOG_NOISE_PRIOR[0], bounds[d + 1][0]),
                                                LOG_LINEAR_PRIOR[0]])
    low, high = np.array([b[0] for b in bounds]), np.array([b[1] for b in bounds])
    starts = ([default] if warm is None or len(warm) != d + 3
              else [np.clip(warm, low, high), default])
    best_theta, best_value = default, np.inf
    for start in starts:
        result = minimize(_objective, start, args=(x, ys), method="L-BFGS-B", jac=True,
                          bounds=bounds, options={"maxiter": max_iter})
        if result.fun < best_value:
            best_theta, best_value = np.asarray(result.x), float(result.fun)
    ls, signal, noise, linear = _unpack(best_theta, d)
    centred = x - 0.5
    k = signal * matern52(x, x, ls) + linear * centred @ centred.T + (noise + JITTER) * np.eye(n)
    factor = cho_factor(k, lower=True)
    return GP(x, ls, signal, noise, mean, scale, cho_solve(factor, ys), factor, linear, best_theta)
