"""Unit quaternions and rotation vectors: the rotation part of the manifold (R^3 x H)^n.

Conventions (used throughout the package):

- A quaternion is an array ``[..., 4]`` = ``[w, x, y, z]`` (scalar first, the paper's
  ``[e_s; e_v]``). A body's quaternion maps body coordinates to world coordinates.
- Angular velocities and rotation increments are *world-frame* rotation vectors, so the
  configuration update (2.13)/(2.16) is written ``e ⊞ ψ = exp(ψ) ⋆ e``. The paper writes the
  right-multiplied form ``e ⋆ exp(ψ_body)``; the two agree with ``ψ = R(e) ψ_body``.
- ``a ⊟ b`` is the world-frame rotation vector ψ with ``a = b ⊞ ψ``: exactly (3.23) via the
  logarithm, or with the small-angle residual form (3.24) ``2 e'_s e'_v``.

All functions are pure, broadcast over leading dimensions, and differentiable. The exponential
and logarithm switch to Taylor expansions near the identity behind a double ``where`` so their
values *and* derivatives are exact there (the rule of appendix D.2, ``d exp(ψ)/dψ |_0 = [0; ½ I]``,
comes out of the expansion, so no custom JVP is needed).
"""

from __future__ import annotations

import numpy as np

from mb_estimation.compiled import compiled_function
from mb_estimation.numerics import jax

jnp = jax.numpy

# Below this squared angle [rad^2] the Taylor branches are used. Their truncation error is
# O(θ^6 / 10^5) < 1e-17 there.
_SMALL_ANGLE_SQUARED = 1e-4


def _components(array):
    """The entries along the last axis, each ``[...]``.

    Sliced, not unpacked from ``moveaxis``: under ``vmap`` and forward-mode AD the move is a
    transpose of every batched operand, which XLA keeps.
    """
    return tuple(array[..., i] for i in range(array.shape[-1]))


def _bilinear_form_of_product() -> np.ndarray:
    """``C [16, 4]`` with ``a ⋆ b = vec(a bᵀ) C``: the Hamilton product's coefficients."""
    signs = {  # (component of a, component of b) -> (component of a ⋆ b, sign)
        (0, 0): (0, 1), (1, 1): (0, -1), (2, 2): (0, -1), (3, 3): (0, -1),
        (0, 1): (1, 1), (1, 0): (1, 1), (2, 3): (1, 1), (3, 2): (1, -1),
        (0, 2): (2, 1), (1, 3): (2, -1), (2, 0): (2, 1), (3, 1): (2, 1),
        (0, 3): (3, 1), (1, 2): (3, 1), (2, 1): (3, -1), (3, 0): (3, 1),
    }
    form = np.zeros((16, 4))
    for (i, j), (k, sign) in signs.items():
        form[4 * i + j, k] = sign
    return form


_PRODUCT_FORM = _bilinear_form_of_product()


def quat_multiply(a, b):
    """Hamilton product ``a ⋆ b`` of quaternions ``[..., 4]``: ``vec(a bᵀ)`` times a constant."""
    a, b = jnp.broadcast_arrays(a, b)
    return (a[..., :, None] * b[..., None, :]).reshape(*a.shape[:-1], 16) @ _PRODUCT_FORM


def quat_conjugate(e):
    """Conjugate ``e*`` (the inverse of a unit quaternion)."""
    return e * jnp.array([1.0, -1.0, -1.0, -1.0])


def quat_normalize(e):
    """Scale ``e`` to unit length."""
    return e / jnp.linalg.norm(e, axis=-1, keepdims=True)


def _quadratic_form_of_rotation() -> np.ndarray:
    """``C [16, 9]`` with ``vec R(e) = vec(e eᵀ) C + vec I`` for a unit quaternion ``e``."""
    w, x, y, z = range(4)
    terms = [  # R_ij - δ_ij = Σ coefficient · e_a e_b
        [((y, y), -2), ((z, z), -2)], [((x, y), 2), ((w, z), -2)], [((x, z), 2), ((w, y), 2)],
        [((x, y), 2), ((w, z), 2)], [((x, x), -2), ((z, z), -2)], [((y, z), 2), ((w, x), -2)],
        [((x, z), 2), ((w, y), -2)], [((y, z), 2), ((w, x), 2)], [((x, x), -2), ((y, y), -2)],
    ]
    form = np.zeros((16, 9))
    for entry, products in enumerate(terms):
        for (a, b), coefficient in products:
            form[4 * a + b, entry] += coefficient
    return form


_ROTATION_FORM = _quadratic_form_of_rotation()


def quat_to_matrix(e):
    """Rotation matrix ``R(e)`` ``[..., 3, 3]`` of a unit quaternion (body → world).

    ``R_ij = δ_ij + Σ_ab C_ij,ab e_a e_b``: the products ``e eᵀ`` times a constant matrix.
    Every rotation of the model and its derivatives goes through here; a handful of operations
    instead of the sixty of the nine entries written out makes every compiled program smaller.
    """
    products = (e[..., :, None] * e[..., None, :]).reshape(*e.shape[:-1], 16)
    return (products @ _ROTATION_FORM).reshape(*e.shape[:-1], 3, 3) + np.eye(3)


def dot(a, b):
    """``a · b`` over the last axis of vectors ``[..., 3]``."""
    return jnp.sum(a * b, axis=-1)


def matrix_times(rotation, v):
    """``R v`` for matrices ``[..., 3, 3]`` and vectors ``[..., 3]``, as a sum of three columns.

    Written with broadcast products rather than ``@``: under ``vmap`` and forward-mode AD a
    product of tiny matrices becomes a batched dot that XLA's CPU backend neither fuses nor runs
    fast, while these products fuse with their neighbours (measured). A sum over the last axis
    compiles smaller, but the model's Jacobian programs then run slower (measured too).
    """
    return (rotation[..., :, 0] * v[..., 0:1] + rotation[..., :, 1] * v[..., 1:2]
            + rotation[..., :, 2] * v[..., 2:3])


def matrix_transpose_times(rotation, v):
    """``Rᵀ v`` ``[..., 3]``, written like :func:`matrix_times`."""
    return (rotation[..., 0, :] * v[..., 0:1] + rotation[..., 1, :] * v[..., 1:2]
            + rotation[..., 2, :] * v[..., 2:3])


def matrix_product(a, b):
    """``A B`` of matrices ``[..., 3, 3]``, written like :func:`matrix_times`."""
    return (a[..., :, 0:1] * b[..., 0:1, :] + a[..., :, 1:2] * b[..., 1:2, :]
            + a[..., :, 2:3] * b[..., 2:3, :])


def quat_rotate(e, v):
    """Rotate vectors ``v [..., 3]`` by unit quaternions ``e``: ``R(e) v``."""
    w = e[..., :1]
    u = e[..., 1:]
    t = 2.0 * jnp.cross(u, v)
    return v + w * t + jnp.cross(u, t)


def quat_turned_about_x(e, angle):
    """``e ⋆ q_x(angle)``: ``e`` followed by a rotation by ``angle`` [rad] about its own x axis.

    The Hamilton product with ``[cos(θ/2), sin(θ/2), 0, 0]`` written out: half the arithmetic
    of :func:`quat_multiply`, which forward kinematics and its nested derivatives repeat often.
    """
    w, x, y, z = _components(e)
    half = 0.5 * jnp.asarray(angle)
    c, s = jnp.cos(half), jnp.sin(half)
    return jnp.stack([w * c - x * s, x * c + w * s, y * c + z * s, z * c - y * s], axis=-1)


def quat_x_axis(e):
    """``R(e) [1, 0, 0]``: the first column of :func:`quat_to_matrix`, ``[..., 3]``."""
    w, x, y, z = _components(e)
    return jnp.stack([1 - 2 * (y * y + z * z), 2 * (x * y + w * z), 2 * (x * z - w * y)], -1)


def quat_exp(rotation_vector):
    """Quaternion ``exp(ψ) = [cos(|ψ|/2); sin(|ψ|/2) ψ/|ψ|]`` of a rotation vector (2.13), (D.8).

    Well-behaved at ``ψ = 0``: value ``[1, 0, 0, 0]`` and derivative ``[0; ½ I]`` (D.12).
    """
    psi = jnp.asarray(rotation_vector)
    theta2 = jnp.sum(psi * psi, axis=-1, keepdims=True)
    small = theta2 < _SMALL_ANGLE_SQUARED
    safe_theta2 = jnp.where(small, 1.0, theta2)
    theta = jnp.sqrt(safe_theta2)
    # sin(θ/2)/θ and cos(θ/2), each with its Taylor series in θ² near zero (D.11).
    sinc_half = jnp.where(
        small,
        0.5 - theta2 / 48.0 + theta2 * theta2 / 3840.0,
        jnp.sin(0.5 * theta) / theta,
    )
    cos_half = jnp.where(
        small,
        1.0 - theta2 / 8.0 + theta2 * theta2 / 384.0,
        jnp.cos(0.5 * theta),
    )
    return jnp.concatenate([cos_half, sinc_half * psi], axis=-1)


def quat_log(e):
    """Rotation vector ψ of a unit quaternion, the shortest one (|ψ| ≤ π): inverse of quat_exp.

    Equals (3.23) ``2 arccos(e_s) e_v / sqrt(1 - e_s²)`` written with ``atan2`` (accurate for all
    angles), after flipping ``e → −e`` when ``e_s < 0`` (both represent the same rotation).
    """
    e = jnp.where(e[..., :1] < 0.0, -e, e)
    w = e[..., :1]
    v = e[..., 1:]
    n2 = jnp.sum(v * v, axis=-1, keepdims=True)
    # 2 atan2(n, w) / n with n = |v|; near n = 0 use 2/w (1 - n²/(3w²) + n⁴/(5w⁴)).
    small = n2 < _SMALL_ANGLE_SQUARED
    safe_n2 = jnp.where(small, 1.0, n2)
    n = jnp.sqrt(safe_n2)
    r2 = n2 / (w * w)
    scale = jnp.where(
        small,
        2.0 / w * (1.0 - r2 / 3.0 + r2 * r2 / 5.0 - r2 * r2 * r2 / 7.0),
        2.0 * jnp.arctan2(n, w) / n,
    )
    return scale * v


def boxplus(e, rotation_vector):
    """``e ⊞ ψ = exp(ψ) ⋆ e`` (2.14): rotate ``e`` by the world-frame rotation vector ψ."""
    return quat_multiply(quat_exp(rotation_vector), e)


def boxminus(a, b):
    """``a ⊟ b`` (2.15), exact via the logarithm (3.23): ψ such that ``a = b ⊞ ψ``."""
    return quat_log(quat_multiply(a, quat_conjugate(b)))


def boxminus_small_angle(a, b):
    """``a ⊟ b`` in the small-angle residual form (3.24): ``2 e'_s e'_v``, ``e' = a ⋆ b*``.

    Equals :func:`boxminus` to first order, is smooth everywhere and invariant to the sign of
    either quaternion. The paper uses it when and only when computing rotation residuals.
    """
    d = quat_multiply(a, quat_conjugate(b))
    return 2.0 * d[..., :1] * d[..., 1:]


def skew(v):
    """Cross-product matrix ``[v]×`` ``[..., 3, 3]`` with ``[v]× w = v × w``."""
    x, y, z = _components(v)
    zero = jnp.zeros_like(x)
    return jnp.stack(
        [
            jnp.stack([zero, -z, y], -1),
            jnp.stack([z, zero, -x], -1),
            jnp.stack([-y, x, zero], -1),
        ],
        axis=-2,
    )


def quat_from_matrix(rotation):
    """Unit quaternion (``w ≥ 0``) of a rotation matrix ``[..., 3, 3]`` (Shepperd's method).

    Of the four algebraically equivalent formulas, the one with the largest pivot is used.
    """
    m = jnp.asarray(rotation)
    m00, m11, m22 = m[..., 0, 0], m[..., 1, 1], m[..., 2, 2]
    trace = m00 + m11 + m22
    candidates = jnp.stack(
        [
            jnp.stack([1 + trace, m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0],
                       m[..., 1, 0] - m[..., 0, 1]], -1),
            jnp.stack([m[..., 2, 1] - m[..., 1, 2], 1 + m00 - m11 - m22,
                       m[..., 0, 1] + m[..., 1, 0], m[..., 0, 2] + m[..., 2, 0]], -1),
            jnp.stack([m[..., 0, 2] - m[..., 2, 0], m[..., 0, 1] + m[..., 1, 0],
                       1 - m00 + m11 - m22, m[..., 1, 2] + m[..., 2, 1]], -1),
            jnp.stack([m[..., 1, 0] - m[..., 0, 1], m[..., 0, 2] + m[..., 2, 0],
                       m[..., 1, 2] + m[..., 2, 1], 1 - m00 - m11 + m22], -1),
        ],
        axis=-2,
    )
    pivots = jnp.stack([1 + trace, 1 + m00 - m11 - m22, 1 - m00 + m11 - m22,
                        1 - m00 - m11 + m22], -1)
    best = jnp.argmax(pivots, axis=-1)
    chosen = jnp.take_along_axis(candidates, best[..., None, None], axis=-2)[..., 0, :]
    q = quat_normalize(chosen)
    return jnp.where(q[..., :1] < 0.0, -q, q)


# --- on NumPy arrays, outside compiled code -----------------------------------------------------

def _normalized_boxplus(e, psi):
    return quat_normalize(boxplus(e, psi))


# Compiled (about 0.1 s each, at the first call; then loaded from the compiled-code cache): run
# op by op, the few dozen small JAX operations of one call would each compile a program on a
# cold start and then cost about 0.5 ms a call.
_compiled_boxplus = compiled_function(_normalized_boxplus)
_compiled_boxminus = compiled_function(boxminus)


def quat_boxplus(e: np.ndarray, psi: np.ndarray) -> np.ndarray:
    """``e ⊞ ψ = exp(ψ) ⋆ e`` (2.14), renormalised: :func:`boxplus` on NumPy arrays.

    ``e`` a quaternion ``[w, x, y, z]``, ``ψ`` a world-frame rotation vector [rad]; float64.
    """
    return np.array(_compiled_boxplus(np.asarray(e, dtype=np.float64),
                                      np.asarray(psi, dtype=np.float64)))


def quat_boxminus(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a ⊟ b = log(a ⋆ b*)`` (2.15), (3.23): :func:`boxminus` on NumPy arrays, float64.

    The shortest ψ [rad] with ``a = b ⊞ ψ``.
    """
    return np.array(_compiled_boxminus(np.asarray(a, dtype=np.float64),
                                       np.asarray(b, dtype=np.float64)))
