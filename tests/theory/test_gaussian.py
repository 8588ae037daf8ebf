"""Quadrature of Gaussian activation moments against closed forms and scipy.integrate.quad."""

import math

import numpy as np
import pytest
from scipy.integrate import quad

from theory.meanfield.gaussian import (
    activation, activation_derivative, derivative_moment, dual_kernel, many_moments, second_moment,
    swiglu_jvp_gain,
)

QS = np.array([1e-4, 0.1, 1.0, 2.0, 5.0, 50.0, 1e4])


def _quad(func, q):
    """E[func(z)], z ~ N(0, q), by adaptive quadrature split at 0."""
    scale = math.sqrt(q)
    density = lambda x: func(scale * x) * math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
    return sum(quad(density, a, b, epsabs=0, epsrel=1e-13, limit=400)[0] for a, b in ((-np.inf, 0), (0, np.inf)))


def test_relu_closed_forms():
    assert np.array_equal(second_moment("relu", QS), QS / 2)
    assert np.array_equal(derivative_moment("relu", QS), np.full_like(QS, 0.5))


@pytest.mark.parametrize("name", ["gelu", "silu"])
def test_second_and_derivative_moments_match_quad(name):
    phi, dphi = activation(name), activation_derivative(name)
    ref_m = np.array([_quad(lambda z: float(phi(np.array(z))) ** 2, q) for q in QS])
    ref_d = np.array([_quad(lambda z: float(dphi(np.array(z))) ** 2, q) for q in QS])
    np.testing.assert_allclose(second_moment(name, QS), ref_m, rtol=1e-10)
    np.testing.assert_allclose(derivative_moment(name, QS), ref_d, rtol=1e-10)


def test_swiglu_is_product_of_silu_and_linear():
    np.testing.assert_allclose(second_moment("swiglu", QS), second_moment("silu", QS) * QS, rtol=1e-14)
    np.testing.assert_allclose(swiglu_jvp_gain(QS), QS * derivative_moment("silu", QS) + second_moment("silu", QS))


def test_smooth_activations_below_relu_moment():
    """P2 Theorem 2's ffn gain alpha*d_ff/(2d) bounds GELU/SiLU: E[phi(z)^2] <= q/2."""
    q = np.geomspace(1e-6, 1e6, 200)
    for name in ("gelu", "silu"):
        assert np.all(second_moment(name, q) <= q / 2)


@pytest.mark.parametrize("name", ["gelu", "silu", "swiglu"])
def test_dual_kernel_diagonal_is_second_moment(name):
    q = np.array([0.01, 0.5, 2.0])
    np.testing.assert_allclose(dual_kernel(name, q, 1.0), second_moment(name, q), rtol=1e-9)


@pytest.mark.parametrize("name", ["relu", "gelu"])
def test_dual_kernel_against_monte_carlo(name):
    rng = np.random.default_rng(1)
    q, r, n = 1.5, 0.6, 400_000
    z1 = rng.standard_normal(n) * math.sqrt(q)
    z2 = (r * z1 / math.sqrt(q) + math.sqrt(1 - r * r) * rng.standard_normal(n)) * math.sqrt(q)
    prod = activation(name)(z1) * activation(name)(z2)
    sem = prod.std() / math.sqrt(n)
    assert abs(prod.mean() - float(dual_kernel(name, q, r))) < 4 * sem


def test_many_moments_spline_is_accurate():
    q = np.geomspace(1e-9, 1e3, 50_001)
    for func in (lambda x: second_moment("gelu", x), lambda x: derivative_moment("silu", x), swiglu_jvp_gain):
        np.testing.assert_allclose(many_moments(func, q, max_direct=10)[::499], func(q[::499]), rtol=5e-9)


@pytest.mark.parametrize("knots", [4, 5, 41, 641])
def testnot_a_knot_spline_is_scipys(knots):
    """many_moments' own spline is scipy's CubicSpline (not-a-knot) to rounding, in range and extrapolated."""
    from scipy.interpolate import CubicSpline

    from theory.meanfield.gaussian import not_a_knot_spline
    rng = np.random.default_rng(knots)
    x = np.linspace(-9.0, 3.0, knots)
    y = np.log(second_moment("silu", 10.0**x)) if knots > 5 else rng.standard_normal(knots)
    at = np.concatenate([x, rng.uniform(-10.0, 4.0, 1000)])
    np.testing.assert_allclose(not_a_knot_spline(x, y, at), CubicSpline(x, y)(at), rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("name", ["relu", "gelu", "silu"])
def test_derivative_kernel_against_monte_carlo(name):
    from theory.meanfield.gaussian import derivative_kernel
    rng = np.random.default_rng(2)
    q, r, n = 1.5, 0.6, 400_000
    z1 = rng.standard_normal(n) * math.sqrt(q)
    z2 = (r * z1 / math.sqrt(q) + math.sqrt(1 - r * r) * rng.standard_normal(n)) * math.sqrt(q)
    prod = activation_derivative(name)(z1) * activation_derivative(name)(z2)
    assert abs(prod.mean() - float(derivative_kernel(name, q, r))) < 4 * prod.std() / math.sqrt(n)
    np.testing.assert_allclose(derivative_kernel(name, np.array([0.3, 2.0]), 1.0),
                               derivative_moment(name, np.array([0.3, 2.0])), rtol=1e-9)


def test_the_numpy_logistic_and_gauss_laguerre_rules_are_scipys():
    """The predict path is scipy-free (docs/design.md#speed-of-the-theory): its logistic and its generalised
    Gauss-Laguerre rule (Golub-Welsch) against scipy's, to rounding, at every head width the key-norm average uses."""
    from scipy.special import expit, roots_genlaguerre

    from theory.meanfield.gaussian import logistic
    from theory.meanfield.softmax_rows import gauss_laguerre

    z = np.linspace(-700.0, 700.0, 20001)  # (z,) past where e^-z overflows
    np.testing.assert_allclose(logistic(z), expit(z), rtol=1e-13, atol=0)
    for head_dim in (2, 8, 16, 64, 128, 200):
        nodes, weights = roots_genlaguerre(8, head_dim / 2 - 1)  # (8,) each, weights summing to Gamma(hd/2)
        ours = gauss_laguerre(8, head_dim / 2 - 1)
        np.testing.assert_allclose(ours[0], nodes, rtol=1e-12, err_msg=f"nodes, hd = {head_dim}")
        np.testing.assert_allclose(ours[1], weights / weights.sum(), rtol=1e-11, err_msg=f"weights, hd = {head_dim}")
