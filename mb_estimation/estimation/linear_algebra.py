"""Sparse linear algebra of one Levenberg–Marquardt step (§3.6, appendix C).

The Gauss–Newton matrix ``H = JᵀJ`` of a recording is block tridiagonal in its states (block
``k`` of ``J`` touches ``x_{k-1}`` and ``x_k`` only) with a dense border in the parameters χ.
Each step

1. factors the damped state block ``H_xx + αI = L Lᵀ`` with a block-tridiagonal Cholesky (a scan
   over the steps, ``O(n s³)``) and forward-solves for the gradient and the border;
2. forms the Schur complement in χ, ``S = H_χχ + αI - Σ_rec Eᵀ (H_xx + αI)⁻¹ E``, summed over
   recordings, and solves the box-constrained quadratic problem in ``δχ`` exactly;
3. back-substitutes the states, ``δx = -(H_xx + αI)⁻¹ (g_x + E δχ)``.

Time and memory are linear in the number of steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.optimize

from mb_estimation.estimation.residuals import Linearization
from mb_estimation.multibody import small_solve
from mb_estimation.numerics import jax, pytree_dataclass

jnp = jax.numpy

#: State blocks up to this size are factored and solved in array operations
#: (:func:`~mb_estimation.multibody.small_solve.cholesky_lower`), larger ones by LAPACK. A scan
#: without a library call compiles into one function (:data:`~mb_estimation.numerics.XLA_FLAGS`):
#: the elimination of 8 001 blocks of 4 states 25.0 → 2.5 ms, of 8 states 39.7 → 11.9 ms, for
#: 0.2 and 0.6 s more compiling; 12 states compiled 2.6 s longer to save a quarter (measured).
ARRAY_BLOCK_LIMIT = 8


def _cholesky(matrix):
    if matrix.shape[-1] <= ARRAY_BLOCK_LIMIT:
        return small_solve.cholesky_lower(matrix)
    return jnp.linalg.cholesky(matrix)


def _solve_lower(factor, rhs, transposed: bool = False):
    """``L⁻¹ rhs`` or ``L⁻ᵀ rhs`` for a block's lower triangular factor."""
    if factor.shape[-1] <= ARRAY_BLOCK_LIMIT:
        return small_solve.solve_lower(factor, rhs, transposed)
    return jax.scipy.linalg.solve_triangular(factor, rhs, lower=True,
                                             trans="T" if transposed else 0)



@pytree_dataclass
@dataclass(frozen=True)
class NormalEquations:
    """``JᵀJ`` and ``Jᵀr`` of one recording in blocks (``s`` state, ``p`` parameter dims).

    ``diagonal [n, s, s]`` (``H_kk``), ``lower [n, s, s]`` (``H_{k,k-1}``, ``lower[0] = 0``),
    ``coupling [n, s, p]`` (``H_{x_k χ}``), ``state_gradient [n, s]``, ``parameter_matrix [p, p]``,
    ``parameter_gradient [p]``.
    """

    diagonal: jax.Array
    lower: jax.Array
    coupling: jax.Array
    state_gradient: jax.Array
    parameter_matrix: jax.Array
    parameter_gradient: jax.Array


@pytree_dataclass
@dataclass(frozen=True)
class Elimination:
    """The states eliminated at one damping α.

    ``diagonal_factors [n, s, s]`` and ``lower_factors [n, s, s]`` are the blocks of the
    Cholesky factor ``L``; ``gradient_solve [n, s] = L⁻¹ g_x``; ``coupling_solve [n, s, p] =
    L⁻¹ E``; ``schur [p, p] = -Σ (L⁻¹E)ᵀ(L⁻¹E)`` and ``schur_gradient [p] = -Σ (L⁻¹E)ᵀ L⁻¹ g_x``
    are this recording's contributions to the reduced problem in χ.
    """

    diagonal_factors: jax.Array
    lower_factors: jax.Array
    gradient_solve: jax.Array
    coupling_solve: jax.Array
    schur: jax.Array
    schur_gradient: jax.Array


def _shift_up(blocks):
    """``out[k] = blocks[k + 1]``, zero past the end."""
    return jnp.concatenate([blocks[1:], jnp.zeros_like(blocks[:1])])


def normal_equations(lin: Linearization) -> NormalEquations:
    """Blocks of ``JᵀJ`` and ``Jᵀr`` from the Jacobian blocks of a recording.

    Block ``k+1``'s ``previous`` part adds to state ``k``'s rows: its products are formed at
    ``k+1`` and shifted up (shifting the products, not the blocks, copies less). The products
    are batched matrix products of the transposed blocks: XLA's CPU code ran them in 9.1 ms
    for the 1 024 steps of the swing-up, against 11.9 ms as one contraction over the rows
    (measured).
    """
    r, a, b, c = lin.residuals, lin.previous, lin.current, lin.parameters

    def products(x, y):
        return jnp.matmul(jnp.swapaxes(x, 1, 2), y)

    def gradient(x):
        return jnp.einsum("kmi,km->ki", x, r)

    return NormalEquations(
        diagonal=products(b, b) + _shift_up(products(a, a)),
        lower=products(b, a),
        coupling=products(b, c) + _shift_up(products(a, c)),
        state_gradient=gradient(b) + _shift_up(gradient(a)),
        parameter_matrix=jnp.einsum("kmi,kmj->ij", c, c),
        parameter_gradient=jnp.einsum("kmi,km->i", c, r),
    )


def damping_scale(normal: NormalEquations, floor):
    """Marquardt's damping weights ``[n, s]``: the diagonal of ``H_xx``, at least ``floor``."""
    return jnp.maximum(jnp.diagonal(normal.diagonal, axis1=1, axis2=2), floor)


def eliminate_states(normal: NormalEquations, damping, scale) -> Elimination:
    """Block Cholesky of ``H_xx + α diag(scale)`` and forward solves for ``g_x`` and ``E``."""
    size = normal.diagonal.shape[-1]
    identity = jnp.eye(size)

    def step(carry, block):
        previous_factor, previous_gradient, previous_coupling = carry
        diagonal, lower, gradient, coupling, scale = block
        # W = H_{k,k-1} L_{k-1}⁻ᵀ, then L_k L_kᵀ = H_kk + αI - W Wᵀ
        factor_lower = _solve_lower(previous_factor, lower.T).T
        damped = diagonal + jnp.diag(damping * scale)
        factor = _cholesky(damped - factor_lower @ factor_lower.T)
        gradient_solve = _solve_lower(factor, gradient - factor_lower @ previous_gradient)
        coupling_solve = _solve_lower(factor, coupling - factor_lower @ previous_coupling)
        return (factor, gradient_solve, coupling_solve), (factor, factor_lower, gradient_solve,
                                                          coupling_solve)

    start = (identity, jnp.zeros(size), jnp.zeros(normal.coupling.shape[1:]))
    _, (factors, lowers, gradient_solve, coupling_solve) = jax.lax.scan(
        step, start,
        (normal.diagonal, normal.lower, normal.state_gradient, normal.coupling, scale))
    return Elimination(
        diagonal_factors=factors,
        lower_factors=lowers,
        gradient_solve=gradient_solve,
        coupling_solve=coupling_solve,
        schur=-jnp.einsum("kip,kiq->pq", coupling_solve, coupling_solve),
        schur_gradient=-jnp.einsum("kip,ki->p", coupling_solve, gradient_solve),
    )


def backward_solve(elimination: Elimination, rhs):
    """Solve ``Lᵀ X = rhs`` for ``rhs [n, s, ...]`` (the backward half of the block solve)."""
    next_lower = _shift_up(elimination.lower_factors)

    def step(next_solution, block):
        factor, lower, value = block
        solution = _solve_lower(factor, value - jnp.tensordot(lower.T, next_solution, 1),
                                transposed=True)
        return solution, solution

    _, solution = jax.lax.scan(step, jnp.zeros(rhs.shape[1:]),
                               (elimination.diagonal_factors, next_lower, rhs), reverse=True)
    return solution


def state_step(elimination: Elimination, parameter_step):
    """``δx = -(H_xx + αI)⁻¹ (g_x + E δχ)`` ``[n, s]``."""
    rhs = -(elimination.gradient_solve + elimination.coupling_solve @ parameter_step)
    return backward_solve(elimination, rhs)


def linearized_change(lin: Linearization, state_step, parameter_step):
    """``J δ`` block by block ``[n, m]``: ``A_k δx_{k-1} + B_k δx_k + C_k δχ``."""
    previous_step = jnp.concatenate([jnp.zeros_like(state_step[:1]), state_step[:-1]])
    return (jnp.einsum("kms,ks->km", lin.previous, previous_step)
            + jnp.einsum("kms,ks->km", lin.current, state_step)
            + jnp.einsum("kmp,p->km", lin.parameters, parameter_step))


def solve_box_qp(matrix: np.ndarray, gradient: np.ndarray, lower: np.ndarray,
                 upper: np.ndarray) -> np.ndarray:
    """``argmin ½ δᵀ S δ + bᵀ δ`` subject to ``lower ≤ δ ≤ upper``, ``S`` positive definite.

    Exact: the unconstrained minimiser when it is feasible, otherwise the bounded least-squares
    form ``min ‖R δ + R⁻ᵀ b‖`` (``S = RᵀR``) solved by the active-set BVLS method.
    """
    if len(gradient) == 0:
        return np.zeros(0)
    factor = scipy.linalg.cholesky(matrix, lower=False)
    unconstrained = -scipy.linalg.cho_solve((factor, False), gradient)
    if np.all(unconstrained >= lower) and np.all(unconstrained <= upper):
        return unconstrained
    target = -scipy.linalg.solve_triangular(factor, gradient, trans="T")
    result = scipy.optimize.lsq_linear(factor, target, bounds=(lower, upper), method="bvls",
                                       tol=1e-14)
    return np.clip(result.x, lower, upper)
