"""Finite-difference checks shared by the estimator's Jacobian tests."""

from __future__ import annotations

import numpy as np

from mb_estimation.estimation.parameters import parameters_boxplus
from mb_estimation.numerics import jax

jnp = jax.numpy


def assert_parameter_columns(residuals, states, free, free_values, jacobian, eps: float = 1e-6):
    """Parameter columns of ``jacobian [n, m, p]`` against central differences.

    Of ``residuals(states, values)`` along each tangent direction of the free parameters;
    absolute tolerance 1e-6 of the column's largest entry, at least 1e-6.
    """
    for j in range(free.size):
        delta = np.zeros(free.size)
        delta[j] = eps
        plus = residuals(states, parameters_boxplus(free, free_values, jnp.asarray(delta)))
        minus = residuals(states, parameters_boxplus(free, free_values, jnp.asarray(-delta)))
        column = (plus - minus) / (2 * eps)
        np.testing.assert_allclose(column, jacobian[:, :, j],
                                   atol=1e-6 * max(np.abs(column).max(), 1.0))
