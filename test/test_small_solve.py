"""The written-out small solves (stepper, mass matrix, elimination): values, derivatives."""

import numpy as np

from mb_estimation.multibody.small_solve import (
    cholesky_lower,
    solve_lower,
    solve_positive_definite,
    solve_small,
)
from mb_estimation.numerics import jax, jit

jnp = jax.numpy


def _spook_like(rng, n=13, rank=12):
    """``D A + S``: ``A`` positive semi-definite of rank < n, D ≥ 0 and S ≥ 0 diagonal."""
    jacobian = rng.normal(size=(n, rank))
    scale = rng.uniform(0.0, 2.0, size=n)
    scale[3] = 0.0  # a row with zero scale (a viscous row with b = 0): only S holds it
    regularization = rng.uniform(1e-8, 1.0, size=n)
    return scale[:, None] * (jacobian @ jacobian.T) + np.diag(regularization)


def test_matches_lapack_for_vector_and_matrix_right_hand_sides():
    rng = np.random.default_rng(0)
    matrix = _spook_like(rng)
    rhs = rng.normal(size=(13, 3))
    expected = np.linalg.solve(matrix, rhs)
    np.testing.assert_allclose(solve_small(matrix, rhs), expected, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(solve_small(matrix, rhs[:, 0]), expected[:, 0], rtol=1e-9,
                               atol=1e-12)
    # an active-set matrix: some rows replaced by unit rows
    fixed = np.zeros(13, dtype=bool)
    fixed[[1, 7]] = True
    active = np.where(fixed[:, None], np.eye(13), matrix)
    np.testing.assert_allclose(solve_small(active, rhs), np.linalg.solve(active, rhs),
                               rtol=1e-9, atol=1e-12)


def test_forward_derivatives_match_finite_differences():
    rng = np.random.default_rng(1)
    matrix, rhs = _spook_like(rng, n=6, rank=5), rng.normal(size=6)
    d_matrix, d_rhs = rng.normal(size=(6, 6)), rng.normal(size=6)
    _, tangent = jax.jvp(solve_small, (jnp.asarray(matrix), jnp.asarray(rhs)),
                         (jnp.asarray(d_matrix), jnp.asarray(d_rhs)))
    step = 1e-6
    central = (np.linalg.solve(matrix + step * d_matrix, rhs + step * d_rhs)
               - np.linalg.solve(matrix - step * d_matrix, rhs - step * d_rhs)) / (2 * step)
    np.testing.assert_allclose(tangent, central, rtol=1e-6, atol=1e-8)
    # reverse mode transposes the same rule
    gradient = jax.grad(lambda m: jnp.sum(solve_small(m, jnp.asarray(rhs)) ** 2))(
        jnp.asarray(matrix))
    solution = np.linalg.solve(matrix, rhs)
    expected = -np.outer(np.linalg.solve(matrix.T, 2 * solution), solution)
    np.testing.assert_allclose(gradient, expected, rtol=1e-8, atol=1e-10)


def test_batches_under_jit_and_vmap():
    rng = np.random.default_rng(2)
    matrices = np.stack([_spook_like(rng, n=5, rank=4) for _ in range(4)])
    rhs = rng.normal(size=(4, 5))
    batched = jit(jax.vmap(solve_small))(matrices, rhs)
    np.testing.assert_allclose(batched, np.linalg.solve(matrices, rhs[..., None])[..., 0],
                               rtol=1e-9, atol=1e-12)


def test_positive_definite_solve_and_its_derivative():
    """The unrolled Cholesky and its written-out derivative: LAPACK, central differences."""
    rng = np.random.default_rng(5)
    factor = rng.normal(size=(3, 3))
    matrix, vector = factor @ factor.T + 3 * np.eye(3), rng.normal(size=3)
    matrix_direction, vector_direction = rng.normal(size=(3, 3)), rng.normal(size=3)
    matrix_direction = matrix_direction + matrix_direction.T

    def along(t):
        return solve_positive_definite(jnp.asarray(matrix + t * matrix_direction),
                           jnp.asarray(vector + t * vector_direction))

    np.testing.assert_allclose(along(0.0), np.linalg.solve(matrix, vector), rtol=1e-13)
    _, derivative = jax.jvp(along, (0.0,), (1.0,))
    step = 1e-6
    np.testing.assert_allclose(derivative, (along(step) - along(-step)) / (2 * step),
                               rtol=1e-7)


def test_cholesky_and_triangular_solves_match_lapack():
    rng = np.random.default_rng(3)
    for size in (1, 4, 8):
        root = rng.normal(size=(size, size))
        matrix = root @ root.T + 0.1 * np.eye(size)
        factor = np.asarray(cholesky_lower(jnp.asarray(matrix)))
        np.testing.assert_allclose(factor, np.linalg.cholesky(matrix), rtol=1e-12, atol=1e-14)
        for rhs in (rng.normal(size=size), rng.normal(size=(size, 3))):
            np.testing.assert_allclose(solve_lower(factor, rhs),
                                       np.linalg.solve(factor, rhs), rtol=1e-10, atol=1e-13)
            np.testing.assert_allclose(solve_lower(factor, rhs, transposed=True),
                                       np.linalg.solve(factor.T, rhs), rtol=1e-10, atol=1e-13)
    indefinite = np.diag([1.0, -1.0])
    assert np.isnan(np.asarray(cholesky_lower(jnp.asarray(indefinite)))[1, 1])


def test_a_scan_of_block_solves_compiles_into_one_function():
    """Neither LAPACK nor YNNPACK inside, and XLA's small-loop threshold raised: one function."""
    from mb_estimation.estimation.linear_algebra import NormalEquations, eliminate_states

    blocks, size = 16, 4
    identity = np.tile(np.eye(size), (blocks, 1, 1))
    normal = NormalEquations(identity, np.zeros_like(identity), np.zeros((blocks, size, 2)),
                             np.ones((blocks, size)), np.eye(2), np.zeros(2))
    program = jit(eliminate_states).lower(normal, 1.0, np.ones((blocks, size))).compile()
    assert "xla_cpu_small_call" in program.as_text()
    assert "custom_call_target" not in program.as_text()
    solved = program(normal, 1.0, np.ones((blocks, size)))
    np.testing.assert_allclose(solved.gradient_solve, np.full((blocks, size), 2.0**-0.5))
