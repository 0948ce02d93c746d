"""The NumPy Gaussian process the grey-box sampler fits (tuner/search/gp.py)."""

from __future__ import annotations

import numpy as np
from scipy.optimize import approx_fprime

from tuner.search.gp import _objective, fit_gp, matern52


def test_the_analytic_gradient_matches_finite_differences() -> None:
    rng = np.random.default_rng(0)
    x = rng.random((12, 3))
    y = np.sin(3 * x[:, 0]) + x[:, 1] + 0.01 * rng.standard_normal(12)
    theta = np.array([-1.0, 0.2, 0.5, 0.3, -3.0, -1.0])
    _, grad = _objective(theta, x, y)
    numeric = approx_fprime(theta, lambda t: _objective(t, x, y)[0], 1e-6)
    assert np.allclose(grad, numeric, rtol=1e-4, atol=1e-5)


def test_the_kernel_is_one_at_zero_distance_and_decays() -> None:
    a = np.array([[0.0, 0.0], [0.5, 0.0], [1.0, 0.0]])
    k = matern52(a[:1], a, np.array([0.4, 0.4]))[0]
    assert abs(k[0] - 1.0) < 1e-12 and 1.0 > k[1] > k[2] > 0.0


def test_a_fit_interpolates_its_data_and_learns_which_input_matters() -> None:
    rng = np.random.default_rng(1)
    x = rng.random((25, 2))
    y = np.sin(4 * x[:, 0])  # the second input is irrelevant
    gp = fit_gp(x, y)
    mu, var = gp.predict(x)
    assert np.max(np.abs(mu - y)) < 0.02 and np.all(var < 1e-2)
    assert gp.lengthscales[1] > 3 * gp.lengthscales[0]
    far_mu, far_var = gp.predict(np.array([[0.5, 0.5]]))
    assert abs(far_mu[0] - np.sin(2.0)) < 0.1 and far_var[0] < gp.scale ** 2 * gp.signal


def test_a_warm_start_gives_the_same_fit() -> None:
    rng = np.random.default_rng(2)
    x = rng.random((15, 3))
    y = x @ np.array([1.0, -2.0, 0.0])
    cold = fit_gp(x, y)
    warm = fit_gp(x, y, warm=cold.theta)
    assert np.allclose(cold.predict(x[:4])[0], warm.predict(x[:4])[0], atol=1e-3)


def test_a_noise_floor_keeps_a_benchmarks_own_spread_from_being_read_as_an_effect() -> None:
    """Ten trials of one trend plus 2 % noise: fitted freely, the noise the GP admits can fall below
    the real one (it bends through the points); with the floor it is at least the floor, in the
    outputs' own units, and the fit stays a trend."""
    rng = np.random.default_rng(3)
    x = rng.random((10, 4))
    trend = 0.1 * x[:, 0]  # only the first input matters
    y = trend + 0.02 * rng.standard_normal(10)
    free = fit_gp(x, y)
    floored = fit_gp(x, y, noise_floor=0.02)
    assert floored.noise * floored.scale ** 2 >= 0.02 ** 2 * (1 - 1e-6)
    assert floored.noise > free.noise
    fitted = floored.predict(x)[0]
    assert np.sqrt(np.mean((fitted - trend) ** 2)) < np.sqrt(np.mean((y - trend) ** 2))
    # outputs that spread less than the floor: capped below the noise's upper bound, still a fit
    tiny = fit_gp(x, 1e-3 * x[:, 0], noise_floor=0.02)
    assert tiny.noise <= 0.5 + 1e-9 and np.all(np.isfinite(tiny.predict(x)[0]))
