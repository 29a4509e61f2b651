"""Property-based tests of mb_estimation.lie and the ⊞/⊟ operators of multibody.state.

Every function under test is wrapped in a module-level ``jit`` (with the package's XLA options)
so that each one is compiled once per input shape; hypothesis then feeds it many examples
cheaply. Tolerances are a small multiple of what float64 rounding allows, except the
finite-difference checks (central differences, step 1e-6, relative tolerance 1e-8).
"""

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from mb_estimation import lie
from mb_estimation.multibody import state as mbstate
from mb_estimation.numerics import jax, jit

jnp = jax.numpy

PROPERTY = settings(max_examples=40, deadline=None)
CHEAP = settings(max_examples=60, deadline=None)

IDENTITY_QUAT = np.array([1.0, 0.0, 0.0, 0.0])

# The Taylor branches switch at θ² = 1e-4 for quat_exp, i.e. |ψ| = 1e-2, and at |e_v|² = 1e-4 for
# quat_log, i.e. sin(θ/2) = 1e-2.
EXP_SWITCH = math.sqrt(1e-4)
LOG_SWITCH = 2.0 * math.asin(math.sqrt(1e-4))
MAX_ANGLE = math.pi - 1e-6  # keep away from π where the shortest rotation vector flips sign

# --- jitted functions under test (compiled once per input shape) ------------------------------

quat_multiply = jit(lie.quat_multiply)
quat_conjugate = jit(lie.quat_conjugate)
quat_to_matrix = jit(lie.quat_to_matrix)
quat_rotate = jit(lie.quat_rotate)
matrix_times = jit(lie.matrix_times)
matrix_transpose_times = jit(lie.matrix_transpose_times)
matrix_product = jit(lie.matrix_product)
quat_exp = jit(lie.quat_exp)
quat_log = jit(lie.quat_log)
quat_from_matrix = jit(lie.quat_from_matrix)
boxplus = jit(lie.boxplus)
boxminus = jit(lie.boxminus)
boxminus_small_angle = jit(lie.boxminus_small_angle)

jac_exp_fwd = jit(jax.jacfwd(lie.quat_exp))
jac_exp_rev = jit(jax.jacrev(lie.quat_exp))
jac_log_fwd = jit(jax.jacfwd(lie.quat_log))
jac_log_rev = jit(jax.jacrev(lie.quat_log))
jac_small_boxminus = jit(
    jax.jacfwd(lambda psi, e: lie.boxminus_small_angle(lie.boxplus(e, psi), e))
)
jac_exact_boxminus = jit(jax.jacfwd(lambda psi, e: lie.boxminus(lie.boxplus(e, psi), e)))

configuration_boxplus = jit(mbstate.configuration_boxplus)
configuration_boxminus = jit(mbstate.configuration_boxminus, static_argnames="exact")
state_boxplus = jit(mbstate.state_boxplus)
state_boxminus = jit(mbstate.state_boxminus, static_argnames="exact")

# --- strategies ---------------------------------------------------------------------------------


def _floats(low, high):
    return st.floats(low, high, allow_nan=False, allow_infinity=False, allow_subnormal=False)


def _directions(size):
    """Unit vectors of length ``size`` from normalised bounded floats (norms < 1e-3 rejected).

    Components below 1e-100 are zeroed: XLA on CPU flushes subnormal results to zero, which is
    not what these tests are about.
    """
    return (
        st.lists(_floats(-2.0, 2.0), min_size=size, max_size=size)
        .map(lambda values: np.array(values, dtype=np.float64))
        .map(lambda values: np.where(np.abs(values) < 1e-100, 0.0, values))
        .filter(lambda values: np.linalg.norm(values) >= 1e-3)
        .map(lambda values: values / np.linalg.norm(values))
    )


unit_quaternions = _directions(4)
unit_axes = _directions(3)
vectors = st.lists(_floats(-10.0, 10.0), min_size=3, max_size=3).map(np.array)

# Angles in [0, π): uniform, log-uniform down to 1e-12, and the special values (0, tiny, both
# sides of each Taylor switch, next to π).
SPECIAL_ANGLES = [
    0.0,
    1e-200,
    1e-12,
    1e-9,
    1e-6,
    EXP_SWITCH * (1.0 - 1e-9),
    EXP_SWITCH,
    EXP_SWITCH * (1.0 + 1e-9),
    LOG_SWITCH * (1.0 - 1e-9),
    LOG_SWITCH,
    LOG_SWITCH * (1.0 + 1e-9),
    math.pi / 2,
    MAX_ANGLE,
]
angles = st.one_of(
    st.sampled_from(SPECIAL_ANGLES),
    _floats(0.0, MAX_ANGLE),
    _floats(-12.0, math.log10(MAX_ANGLE)).map(lambda exponent: 10.0**exponent),
)


@st.composite
def rotation_vectors(draw, angle=angles):
    """World rotation vectors with |ψ| < π (axis times angle)."""
    return draw(unit_axes) * draw(angle)


def body_states(num_bodies=2):
    """BodyStates of ``num_bodies`` bodies with bounded positions and velocities."""
    def component(size):
        return st.lists(_floats(-10.0, 10.0), min_size=num_bodies * size,
                        max_size=num_bodies * size).map(
            lambda values: np.array(values).reshape(num_bodies, size))

    return st.builds(
        mbstate.BodyStates,
        position=component(3),
        orientation=st.lists(unit_quaternions, min_size=num_bodies, max_size=num_bodies).map(
            np.stack),
        linear_velocity=component(3),
        angular_velocity=component(3),
    )


def state_deltas(num_bodies=2):
    """Tangent vectors ``[δr, δψ, δv, δω]`` per body, ``[nb, 12]``, with |δψ| < π."""
    return st.tuples(
        st.lists(vectors, min_size=num_bodies, max_size=num_bodies),
        st.lists(rotation_vectors(), min_size=num_bodies, max_size=num_bodies),
        st.lists(vectors, min_size=num_bodies, max_size=num_bodies),
        st.lists(vectors, min_size=num_bodies, max_size=num_bodies),
    ).map(lambda parts: np.concatenate([np.stack(part) for part in parts], axis=-1))


# --- helpers ------------------------------------------------------------------------------------


def same_rotation_error(a, b):
    """Distance between quaternions up to sign: min(|a − b|, |a + b|)."""
    a = np.asarray(a)
    b = np.asarray(b)
    return min(np.max(np.abs(a - b)), np.max(np.abs(a + b)))


def central_difference(function, x, step=1e-6):
    """Jacobian ``[m, n]`` of ``function`` at ``x [n]``, all 2n points evaluated in one batch."""
    x = np.asarray(x, dtype=np.float64)
    n = x.size
    offsets = step * np.eye(n)
    values = np.asarray(function(np.concatenate([x + offsets, x - offsets])))
    return ((values[:n] - values[n:]) / (2.0 * step)).T


def assert_jacobian_close(analytic, numeric, rtol=1e-8):
    analytic = np.asarray(analytic)
    assert np.all(np.isfinite(analytic))
    scale = max(1.0, float(np.max(np.abs(analytic))))
    np.testing.assert_allclose(analytic, numeric, rtol=0.0, atol=rtol * scale)


def assert_states_close(a, b, atol):
    for name in ("position", "orientation", "linear_velocity", "angular_velocity"):
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=0.0, atol=atol,
                                   err_msg=name)


# --- quaternion algebra -------------------------------------------------------------------------


@CHEAP
@given(unit_quaternions, unit_quaternions, unit_quaternions)
def test_quat_multiply_associative(a, b, c):
    left = quat_multiply(quat_multiply(a, b), c)
    right = quat_multiply(a, quat_multiply(b, c))
    np.testing.assert_allclose(left, right, rtol=0.0, atol=1e-15)


@CHEAP
@given(unit_quaternions)
def test_quat_multiply_identity_and_conjugate_inverse(e):
    np.testing.assert_array_equal(quat_multiply(IDENTITY_QUAT, e), e)
    np.testing.assert_array_equal(quat_multiply(e, IDENTITY_QUAT), e)
    conjugate = quat_conjugate(e)
    np.testing.assert_allclose(quat_multiply(e, conjugate), IDENTITY_QUAT, rtol=0.0, atol=1e-15)
    np.testing.assert_allclose(quat_multiply(conjugate, e), IDENTITY_QUAT, rtol=0.0, atol=1e-15)


@CHEAP
@given(unit_quaternions, vectors)
def test_quat_rotate_matches_matrix(e, v):
    np.testing.assert_allclose(quat_rotate(e, v), np.asarray(quat_to_matrix(e)) @ v, rtol=0.0,
                               atol=1e-13)


@CHEAP
@given(unit_quaternions)
def test_quat_to_matrix_is_a_rotation(e):
    rotation = np.asarray(quat_to_matrix(e))
    np.testing.assert_allclose(rotation @ rotation.T, np.eye(3), rtol=0.0, atol=1e-14)
    assert abs(np.linalg.det(rotation) - 1.0) < 1e-14


@CHEAP
@given(unit_quaternions, unit_quaternions, vectors)
def test_quat_multiply_is_matrix_product(a, b, v):
    product = np.asarray(quat_to_matrix(quat_multiply(a, b)))
    np.testing.assert_allclose(
        product, np.asarray(quat_to_matrix(a)) @ np.asarray(quat_to_matrix(b)), rtol=0.0,
        atol=1e-14)
    np.testing.assert_allclose(quat_rotate(quat_multiply(a, b), v),
                               quat_rotate(a, quat_rotate(b, v)), rtol=0.0, atol=1e-13)


@CHEAP
@given(unit_quaternions, unit_quaternions, vectors)
def test_matrix_helpers_are_the_matrix_products(a, b, v):
    rotation_a = np.asarray(quat_to_matrix(a))
    rotation_b = np.asarray(quat_to_matrix(b))
    np.testing.assert_allclose(matrix_times(rotation_a, v), rotation_a @ v, rtol=0.0, atol=1e-13)
    np.testing.assert_allclose(matrix_transpose_times(rotation_a, v), rotation_a.T @ v, rtol=0.0,
                               atol=1e-13)
    np.testing.assert_allclose(matrix_product(rotation_a, rotation_b), rotation_a @ rotation_b,
                               rtol=0.0, atol=1e-14)
    batched = np.stack([rotation_a, rotation_b])
    np.testing.assert_allclose(matrix_times(batched, np.stack([v, 2.0 * v])),
                               [rotation_a @ v, 2.0 * rotation_b @ v], rtol=0.0, atol=1e-13)


@CHEAP
@given(unit_quaternions, st.floats(-10.0, 10.0))
def test_turn_about_x_and_x_axis_are_the_general_product_and_rotation(e, angle):
    x_axis = np.array([1.0, 0.0, 0.0])
    about_x = np.array([math.cos(0.5 * angle), math.sin(0.5 * angle), 0.0, 0.0])
    np.testing.assert_allclose(jit(lie.quat_turned_about_x)(e, angle),
                               quat_multiply(e, about_x), rtol=0.0, atol=1e-15)
    np.testing.assert_allclose(jit(lie.quat_x_axis)(e), quat_rotate(e, x_axis), rtol=0.0,
                               atol=1e-15)


def test_batched_inputs_broadcast():
    rng = np.random.default_rng(0)
    e = rng.normal(size=(5, 2, 4))
    e /= np.linalg.norm(e, axis=-1, keepdims=True)
    psi = rng.normal(size=(5, 2, 3))
    out = np.asarray(boxminus(boxplus(e, psi), e))
    for index in np.ndindex(5, 2):
        np.testing.assert_allclose(out[index], boxminus(boxplus(e[index], psi[index]), e[index]),
                                   rtol=0.0, atol=1e-14)


# --- exponential and logarithm ------------------------------------------------------------------


@PROPERTY
@given(rotation_vectors())
@example(np.array([0.0, 1.27622225e-04, 2.67947270e-05]))
def test_log_of_exp_is_identity(psi):
    recovered = np.asarray(quat_log(quat_exp(psi)))
    angle = np.linalg.norm(psi)
    # Relative accuracy of a few ulp of the angle: each component passes through about eight
    # roundings of at most eps/2 (exp: the norm's sum and root, the sine, the division, the
    # product; log: n², the series or atan2, the product), so 8 eps bounds it; 4e-16 (1.8 eps)
    # was exceeded by a component at 1.9 eps (ψ = (0, 1.276e-4, 2.68e-5)). Near π the angle is
    # recovered from w = cos(θ/2) ≈ 0.
    eps = np.finfo(np.float64).eps
    np.testing.assert_allclose(recovered, psi, rtol=0.0, atol=8 * eps * angle + 1e-300)


@pytest.mark.parametrize("angle", SPECIAL_ANGLES)
def test_log_of_exp_special_angles(angle):
    psi = angle * np.array([0.48, -0.6, 0.64])
    recovered = np.asarray(quat_log(quat_exp(psi)))
    np.testing.assert_allclose(recovered, psi, rtol=0.0, atol=4e-16 * angle)
    if angle == 0.0:
        np.testing.assert_array_equal(quat_exp(psi), IDENTITY_QUAT)
        np.testing.assert_array_equal(recovered, np.zeros(3))


@PROPERTY
@given(unit_quaternions)
def test_exp_of_log_is_plus_minus_identity(e):
    psi = np.asarray(quat_log(e))
    assert np.linalg.norm(psi) <= math.pi + 1e-12
    assert same_rotation_error(quat_exp(psi), e) < 1e-15


@CHEAP
@given(st.one_of(rotation_vectors(), st.lists(_floats(-20.0, 20.0), min_size=3,
                                              max_size=3).map(np.array)))
def test_exp_has_unit_norm(psi):
    assert abs(np.linalg.norm(quat_exp(psi)) - 1.0) < 1e-15


# --- ⊞ and ⊟ ------------------------------------------------------------------------------------


@PROPERTY
@given(unit_quaternions, rotation_vectors())
def test_boxminus_inverts_boxplus(e, psi):
    recovered = np.asarray(boxminus(boxplus(e, psi), e))
    # e ⋆ e* is the identity only to rounding, so there is an absolute floor of a few ulp.
    np.testing.assert_allclose(recovered, psi, rtol=0.0, atol=1e-15 * np.linalg.norm(psi) + 2e-15)


@PROPERTY
@given(unit_quaternions, rotation_vectors())
def test_small_angle_boxminus_is_third_order(e, psi):
    """``2 d_s d_v = sin θ ψ̂`` with ψ = θ ψ̂ the exact ⊟, so ``|small − exact| = θ − sin θ``.

    θ − sin θ lies in ``[θ³/6 (1 − θ²/20), θ³/6]`` (alternating Taylor series), so C = 1/6 is
    the explicit, tight constant.
    """
    a = boxplus(e, psi)
    exact = np.asarray(boxminus(a, e))
    small = np.asarray(boxminus_small_angle(a, e))
    theta = np.linalg.norm(exact)
    error = np.linalg.norm(small - exact)
    rounding = 4e-15
    assert error <= theta**3 / 6.0 + rounding
    assert error >= theta**3 / 6.0 * (1.0 - theta**2 / 20.0) - rounding
    # Same direction: small = (sin θ / θ) exact.
    np.testing.assert_allclose(small, np.sinc(theta / np.pi) * exact, rtol=0.0, atol=rounding)


@CHEAP
@given(unit_quaternions, unit_quaternions)
def test_small_angle_boxminus_sign_invariant(a, b):
    reference = np.asarray(boxminus_small_angle(a, b))
    np.testing.assert_array_equal(boxminus_small_angle(-a, b), reference)
    np.testing.assert_array_equal(boxminus_small_angle(a, -b), reference)
    np.testing.assert_array_equal(boxminus_small_angle(-a, -b), reference)


# --- derivatives --------------------------------------------------------------------------------


def test_exp_jacobian_at_zero_is_exact():
    """Appendix D.2, (D.12): d exp(ψ)/dψ at 0 = [0; ½ I], exactly and without NaN."""
    expected = np.vstack([np.zeros((1, 3)), 0.5 * np.eye(3)])
    for jacobian in (jac_exp_fwd, jac_exp_rev):
        value = np.asarray(jacobian(np.zeros(3)))
        assert not np.any(np.isnan(value))
        np.testing.assert_array_equal(value, expected)


def test_log_jacobian_at_identity():
    expected = np.hstack([np.zeros((3, 1)), 2.0 * np.eye(3)])
    for jacobian in (jac_log_fwd, jac_log_rev):
        value = np.asarray(jacobian(IDENTITY_QUAT))
        assert not np.any(np.isnan(value))
        np.testing.assert_array_equal(value, expected)


@PROPERTY
@given(rotation_vectors())
def test_exp_jacobian_matches_finite_differences(psi):
    analytic = np.asarray(jac_exp_fwd(psi))
    assert_jacobian_close(analytic, central_difference(quat_exp, psi))
    np.testing.assert_allclose(jac_exp_rev(psi), analytic, rtol=0.0, atol=1e-15)


@PROPERTY
@given(unit_quaternions.filter(lambda e: abs(e[0]) > 0.05))
def test_log_jacobian_matches_finite_differences(e):
    # |w| > 0.05 keeps the finite-difference stencil away from the e → −e flip at w = 0.
    analytic = np.asarray(jac_log_fwd(e))
    assert_jacobian_close(analytic, central_difference(quat_log, e))
    np.testing.assert_allclose(jac_log_rev(e), analytic, rtol=0.0, atol=1e-14)


@pytest.mark.parametrize("side", [1.0 - 1e-6, 1.0 - 1e-12, 1.0, 1.0 + 1e-12, 1.0 + 1e-6])
@settings(max_examples=10, deadline=None)
@given(axis=unit_axes)
def test_exp_jacobian_near_taylor_switch(side, axis):
    psi = EXP_SWITCH * side * axis
    assert_jacobian_close(jac_exp_fwd(psi), central_difference(quat_exp, psi))


@pytest.mark.parametrize("side", [1.0 - 1e-6, 1.0 - 1e-12, 1.0, 1.0 + 1e-12, 1.0 + 1e-6])
@settings(max_examples=10, deadline=None)
@given(axis=unit_axes, sign=st.sampled_from([1.0, -1.0]))
def test_log_jacobian_near_taylor_switch(side, axis, sign):
    n = EXP_SWITCH * side  # |e_v| at the switch of quat_log
    e = sign * np.concatenate([[math.sqrt(1.0 - n * n)], n * axis])
    assert_jacobian_close(jac_log_fwd(e), central_difference(quat_log, e))


@CHEAP
@given(unit_quaternions)
def test_boxminus_of_boxplus_jacobian_at_zero_is_identity(e):
    for jacobian in (jac_small_boxminus, jac_exact_boxminus):
        value = np.asarray(jacobian(np.zeros(3), e))
        assert not np.any(np.isnan(value))
        np.testing.assert_allclose(value, np.eye(3), rtol=0.0, atol=1e-14)


# --- rotation matrix → quaternion ---------------------------------------------------------------


@PROPERTY
@given(unit_quaternions)
def test_quat_from_matrix_round_trip(e):
    q = np.asarray(quat_from_matrix(quat_to_matrix(e)))
    assert q[0] >= 0.0
    assert same_rotation_error(q, e) < 1e-14


@PROPERTY
@given(unit_axes)
def test_quat_from_matrix_half_turn(axis):
    e = np.concatenate([[0.0], axis])  # rotation by π: trace(R) = −1
    rotation = np.asarray(quat_to_matrix(e))
    assert abs(np.trace(rotation) + 1.0) < 1e-14
    assert same_rotation_error(quat_from_matrix(rotation), e) < 1e-14


# --- state-level ⊞ / ⊟ --------------------------------------------------------------------------


@PROPERTY
@given(body_states(), state_deltas())
def test_configuration_boxminus_inverts_boxplus(x, delta):
    moved = configuration_boxplus(x, delta[:, :6])
    recovered = np.asarray(configuration_boxminus(moved, x, exact=True))
    # Positions: (r + δ) − r loses up to ulp(|r| + |δ|) ≤ ulp(20); rotations: a few ulp.
    np.testing.assert_allclose(recovered, delta[:, :6], rtol=0.0, atol=1e-14)
    np.testing.assert_array_equal(moved.linear_velocity, x.linear_velocity)
    np.testing.assert_array_equal(moved.angular_velocity, x.angular_velocity)


@PROPERTY
@given(body_states(), state_deltas())
def test_state_boxminus_inverts_boxplus(x, delta):
    moved = state_boxplus(x, delta)
    recovered = np.asarray(state_boxminus(moved, x, exact=True))
    np.testing.assert_allclose(recovered, delta, rtol=0.0, atol=1e-14)
    np.testing.assert_allclose(state_boxminus(moved, x), recovered, rtol=0.0, atol=0.0)


@CHEAP
@given(body_states())
def test_boxplus_zero_is_identity(x):
    # The orientation is renormalised, which may move an (already unit) quaternion by an ulp.
    assert_states_close(configuration_boxplus(x, np.zeros((2, 6))), x, atol=4e-16)
    assert_states_close(state_boxplus(x, np.zeros((2, 12))), x, atol=4e-16)
    # x ⊟ x: e ⋆ e* has a vector part of rounding size only (XLA may contract to FMAs).
    np.testing.assert_allclose(state_boxminus(x, x), np.zeros((2, 12)), rtol=0.0, atol=1e-15)


def _observed(state):
    """A nonlinear function of every part of a state: rotation matrices, positions, velocities."""
    return jnp.concatenate([lie.quat_to_matrix(state.orientation).reshape(-1),
                            state.position.reshape(-1) ** 2,
                            (state.velocity * state.orientation[..., :1]).reshape(-1)])


@jit
def _jacobians_of_both_moves(x):
    def through(move):
        def function(delta):
            delta = delta.reshape(x.num_bodies, 12)
            return _observed(move(delta))
        return jax.jacfwd(function)(jnp.zeros(12 * x.num_bodies))

    exact = through(lambda delta: mbstate.state_boxplus(x, delta))
    linearized = through(lambda delta: mbstate.state_boxplus_linearized(x, delta[:, :6],
                                                                        delta[:, 6:]))
    return exact, linearized


@CHEAP
@given(body_states())
def test_linearized_boxplus_has_the_derivative_of_boxplus_at_zero(x):
    """What the Jacobian blocks differentiate: equal at δ = 0, and equal derivatives there."""
    zero = np.zeros((2, 6))
    assert_states_close(mbstate.state_boxplus_linearized(x, zero, zero), x, atol=0.0)
    exact, linearized = _jacobians_of_both_moves(x)
    np.testing.assert_allclose(linearized, exact, rtol=0.0, atol=1e-12)
    # ... and that is the derivative of the exact ⊞, by central differences of all 24 columns.
    numeric = central_difference(jax.vmap(lambda d: _observed(mbstate.state_boxplus(
        x, d.reshape(2, 12)))), np.zeros(24))
    assert_jacobian_close(linearized, numeric, rtol=1e-7)
