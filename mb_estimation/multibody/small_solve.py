"""Small dense linear solves written out in array operations (no LAPACK call).

The SPOOK step solves one small system per step (13 rows for the Furuta pendulum, (2.27)).
A LAPACK call per step costs as much as the rest of the step on the CPU, and a batch of them
(``vmap`` over simulated segments) must not be handed to LAPACK at all: batched LAPACK under
``jit`` has deadlocked jaxlib on this project's 2-core machines. Written out as ``n`` rank-one
updates, the solve is a handful of fused array operations that batch like any other.

No pivoting: the step's matrices are ``D A + S`` with ``A`` positive semi-definite and ``D``,
``S`` non-negative diagonals whose sum is positive per row (SPOOK's multiplier system), or
such a matrix with some rows replaced by unit rows (the dry-friction active sets) — every
leading principal minor is positive, so Gaussian elimination in the given order is defined
and, as for Cholesky, stable.
"""

from __future__ import annotations

from mb_estimation.numerics import jax

jnp = jax.numpy


def _factor(matrix):
    """``L U`` of ``matrix [n, n]``, no pivoting, in one array (``L``'s unit diagonal implied)."""
    n = matrix.shape[0]
    below = jnp.arange(n)
    lu = matrix
    for k in range(n):
        multipliers = jnp.where(below > k, lu[:, k] / lu[k, k], 0.0)
        lu = lu - multipliers[:, None] * jnp.where(below > k, lu[k], 0.0)[None, :]
        lu = lu.at[:, k].set(jnp.where(below > k, multipliers, lu[:, k]))  # L below U
    return lu


def _substitute(lu, rhs):
    """``x`` with ``L U x = rhs`` (``rhs [n]`` or ``[n, r]``)."""
    n = lu.shape[0]
    index = jnp.arange(n)
    column = rhs if rhs.ndim == 2 else rhs[:, None]
    for k in range(n):  # forward: L y = rhs
        lower = jnp.where(index > k, lu[:, k], 0.0)
        column = column - lower[:, None] * column[k][None, :]
    solution = jnp.zeros_like(column)
    for k in reversed(range(n)):  # backward: U x = y
        upper = jnp.where(index > k, lu[k], 0.0)
        solution = solution.at[k].set((column[k] - upper @ solution) / lu[k, k])
    return solution if rhs.ndim == 2 else solution[:, 0]


@jax.custom_jvp
def solve_small(matrix, rhs):
    """``matrix⁻¹ rhs`` for a small ``matrix [n, n]`` whose leading minors are positive.

    ``rhs [n]`` or ``[n, r]``. Forward-mode derivatives reuse the factorisation:
    ``d x = matrix⁻¹ (d rhs − d matrix · x)``.
    """
    return _substitute(_factor(matrix), rhs)


@solve_small.defjvp
def _solve_small_jvp(primals, tangents):
    matrix, rhs = primals
    d_matrix, d_rhs = tangents
    lu = _factor(matrix)
    solution = _substitute(lu, rhs)
    return solution, _substitute(lu, d_rhs - d_matrix @ solution)
