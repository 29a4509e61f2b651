"""Small dense linear solves written out in array operations (no LAPACK call).

The SPOOK step solves one small system per step (13 rows for the Furuta pendulum, (2.27)).
A LAPACK call per step costs as much as the rest of the step on the CPU, and a batch of them
(``vmap`` over simulated segments) must not be handed to LAPACK at all: batched LAPACK under
``jit`` has deadlocked jaxlib on this project's 2-core machines. Written out as ``n`` rank-one
updates, the solve is a handful of fused array operations that batch like any other. The LU
solve runs its updates as loops (one update in the program, the pivot read at the loop's
index): a compliant 512-step rollout compiles in 2.2 s instead of 3.5 s, runs as fast, and
gives the same numbers.

No pivoting: the step's matrices are ``D A + S`` with ``A`` positive semi-definite and ``D``,
``S`` non-negative diagonals whose sum is positive per row (SPOOK's multiplier system), or
such a matrix with some rows replaced by unit rows (the dry-friction active sets) — every
leading principal minor is positive, so Gaussian elimination in the given order is defined
and, as for Cholesky, stable. The rigid limit's joint-space mass matrices (symmetric positive
definite, a few joints) use an unrolled Cholesky instead (:func:`solve_positive_definite`).
"""

from __future__ import annotations

import functools

from mb_estimation.numerics import jax

jnp = jax.numpy


def lu_factor(matrix):
    """``L U`` of ``matrix [n, n]``, no pivoting, in one array (``L``'s unit diagonal implied).

    One elimination step per pass of a loop (the pivot's row and column read at the loop's
    index), so the program holds one step, not ``n``.
    """
    n = matrix.shape[0]
    below = jnp.arange(n)

    def eliminate(k, lu):
        pivot_column = jax.lax.dynamic_index_in_dim(lu, k, axis=1, keepdims=False)
        pivot_row = jax.lax.dynamic_index_in_dim(lu, k, axis=0, keepdims=False)
        multipliers = jnp.where(below > k, pivot_column / pivot_row[k], 0.0)
        lu = lu - multipliers[:, None] * jnp.where(below > k, pivot_row, 0.0)[None, :]
        column = jnp.where(below > k, multipliers, pivot_column)  # L below U
        return jax.lax.dynamic_update_index_in_dim(lu, column, k, axis=1)

    return jax.lax.fori_loop(0, n, eliminate, matrix)


def lu_solve(lu, rhs):
    """``x`` with ``L U x = rhs`` (``rhs [n]`` or ``[n, r]``), a row per pass of two loops."""
    n = lu.shape[0]
    index = jnp.arange(n)
    column = rhs if rhs.ndim == 2 else rhs[:, None]

    def forward(k, column):  # L y = rhs
        lower = jnp.where(index > k, jax.lax.dynamic_index_in_dim(lu, k, 1, False), 0.0)
        return column - lower[:, None] * jax.lax.dynamic_index_in_dim(column, k, 0, True)

    def backward(i, solution):  # U x = y, rows n-1 .. 0
        k = n - 1 - i
        row = jax.lax.dynamic_index_in_dim(lu, k, 0, False)
        upper = jnp.where(index > k, row, 0.0)
        value = (jax.lax.dynamic_index_in_dim(column, k, 0, False) - upper @ solution) / row[k]
        return jax.lax.dynamic_update_index_in_dim(solution, value, k, axis=0)

    column = jax.lax.fori_loop(0, n, forward, column)
    solution = jax.lax.fori_loop(0, n, backward, jnp.zeros_like(column))
    return solution if rhs.ndim == 2 else solution[:, 0]


def cholesky_lower(matrix):
    """Lower Cholesky factor ``L`` of a small symmetric positive definite ``matrix [n, n]``.

    Column by column: ``n`` rank-one updates of the array, as :func:`lu_factor` (no LAPACK call,
    so a loop around it compiles into one function: see
    :data:`~mb_estimation.numerics.XLA_FLAGS`). Not positive definite: NaN, as LAPACK's.
    """
    n = matrix.shape[0]
    index = jnp.arange(n)
    columns = []
    for k in range(n):
        column = jnp.where(index >= k, matrix[:, k] / jnp.sqrt(matrix[k, k]), 0.0)
        columns.append(column)
        matrix = matrix - column[:, None] * column[None, :]
    return jnp.stack(columns, axis=1)


def solve_lower(factor, rhs, transposed: bool = False):
    """``L⁻¹ rhs`` (``transposed``: ``L⁻ᵀ rhs``) for a lower triangular ``factor [n, n]``.

    ``rhs [n, ...]``. Substitution a row at a time in array operations (:func:`cholesky_lower`).
    """
    n = factor.shape[0]
    index = jnp.arange(n)
    solution = [None] * n
    for k in (reversed(range(n)) if transposed else range(n)):
        solution[k] = rhs[k] / factor[k, k]
        # what x_k contributes to the rows still to solve: column k of L below, row k of L
        # (column k of Lᵀ) above
        reach = (jnp.where(index < k, factor[k], 0.0) if transposed
                 else jnp.where(index > k, factor[:, k], 0.0))
        rhs = rhs - reach.reshape((n,) + (1,) * (rhs.ndim - 1)) * solution[k]
    return jnp.stack(solution)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1))
def _solve_with(factor, substitute, matrix, rhs):
    """``matrix⁻¹ rhs`` by ``substitute(factor(matrix), rhs)``, differentiated with the factor.

    Forward-mode derivatives reuse the factorisation rather than differentiate it:
    ``d x = matrix⁻¹ (d rhs − d matrix · x)``.
    """
    return substitute(factor(matrix), rhs)


@_solve_with.defjvp
def _solve_with_derivative(factor, substitute, primals, tangents):
    matrix, rhs = primals
    d_matrix, d_rhs = tangents
    factored = factor(matrix)
    solution = substitute(factored, rhs)
    return solution, substitute(factored, d_rhs - d_matrix @ solution)


def solve_small(matrix, rhs):
    """``matrix⁻¹ rhs`` for a small ``matrix [n, n]`` whose leading minors are positive.

    ``rhs [n]`` or ``[n, r]``. Forward-mode derivatives reuse the factorisation:
    ``d x = matrix⁻¹ (d rhs − d matrix · x)``.
    """
    return _solve_with(lu_factor, lu_solve, matrix, rhs)


def _cholesky(matrix):
    """Lower Cholesky factor of a small SPD ``matrix``, as nested lists of scalars (unrolled)."""
    size = matrix.shape[0]
    factor = [[None] * size for _ in range(size)]
    for i in range(size):
        for j in range(i + 1):
            value = matrix[i, j] - sum((factor[i][k] * factor[j][k] for k in range(j)), 0.0)
            factor[i][j] = jnp.sqrt(value) if i == j else value / factor[j][j]
    return factor


def _cholesky_solve(factor, vector):
    """``(L Lᵀ)⁻¹ vector`` by forward and back substitution with the factor ``L``."""
    size = len(factor)
    forward = []
    for i in range(size):
        forward.append((vector[i] - sum((factor[i][k] * forward[k] for k in range(i)), 0.0))
                       / factor[i][i])
    solution = [None] * size
    for i in reversed(range(size)):
        solution[i] = (forward[i] - sum((factor[k][i] * solution[k]
                                         for k in range(i + 1, size)), 0.0)) / factor[i][i]
    return jnp.stack(solution)


def solve_positive_definite(matrix, vector):
    """``matrix⁻¹ vector`` for a small symmetric positive definite ``matrix`` (a mass matrix).

    An unrolled Cholesky on scalars: for the rigid limit's few joints it compiles smaller than
    :func:`solve_small`'s row operations (the rigid-fit Jacobian program 9.8 against 10.4 s).
    Its derivative ``matrix⁻¹ (δvector - δmatrix x)`` reuses the factor rather than
    differentiating the factorisation (measured: 9.8 → 9.5 s to compile, 4.2 → 3.3 ms
    per chunk).
    """
    return _solve_with(_cholesky, _cholesky_solve, matrix, vector)
