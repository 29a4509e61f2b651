"""Constraint rows of frictional hinges: holonomic (F.1), viscous (F.2), motor (F.3), dry friction.

Every row ``i`` of the SPOOK velocity update is written in one scaled form

    D_i · (J_i v_{k+1}) + S_i · λ_i = e_i                                    (*)

with the multiplier λ_i an impulse. This covers (2.8)-(2.11), (2.17), (F.2) and (F.3) without
dividing by parameters that may be zero:

- holonomic row (2.8): ``D = 1``, ``S = (4/h²) ε γ``, ``e = -(4/h) γ g_k + γ G_k v_k``,
  ``γ = 1/(1 + 4τ/h)`` (2.9)-(2.11);
- viscous row (F.2) ``Ḡ v_{k+1} + λ/(b h) = 0``: ``D = b h``, ``S = 1``, ``e = 0``;
- motor row (F.3) ``λ/J_shaft + Ḡ v_{k+1} = Ḡ v_k + τ_motor/J_shaft`` with the torque impulse
  ``τ_motor = K u h``: ``D = J_shaft``, ``S = 1``, ``e = J_shaft Ḡ v_k + K u h``.

Dry friction rows are kept apart: ``Ḡ v_{k+1} + σ λ = w`` with ``|λ| ≤ β`` and ``w`` of the
sign that makes it a box complementarity condition (2.24)-(2.25). Their regularisation is the
hinge's rotational one, ``σ = (4/h²) ε_rot γ``, and the bound is
``β = c_k Σ_{hinge rows} |λ_i|`` (DESIGN §3; with the internal distance r folded into ``c``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mb_estimation import lie
from mb_estimation.multibody.state import BodyStates
from mb_estimation.multibody.system import WORLD, Hinge, Multibody, hinge_frames
from mb_estimation.numerics import jax

jnp = jax.numpy

HOLONOMIC_ROWS_PER_HINGE = 5


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class ConstraintRows:
    """All constraint rows of a system at one state, in the scaled form (*) of the module doc.

    Attributes:
        jacobian: ``[m, 6nb]`` rows ``J_i`` of the regular (non-friction) constraints.
        scale: ``[m]`` ``D_i``.
        regularization: ``[m]`` ``S_i``.
        target: ``[m]`` ``e_i``.
        friction_jacobian: ``[nf, 6nb]`` hinge-axis rows of the dry friction constraints.
        friction_regularization: ``[nf]`` σ.
        friction_bound_coefficient: ``[nf]`` ``c_k`` (μ r, or the Stribeck law (4.1) at ω_k).
        friction_groups: for each friction row, the indices of its hinge's holonomic rows among
            the regular rows (static).
    """

    jacobian: jax.Array
    scale: jax.Array
    regularization: jax.Array
    target: jax.Array
    friction_jacobian: jax.Array
    friction_regularization: jax.Array
    friction_bound_coefficient: jax.Array
    friction_groups: tuple[tuple[int, ...], ...] = field(metadata=dict(static=True))

    @property
    def num_friction(self) -> int:
        return len(self.friction_groups)


def _place(num_bodies: int, body: int, block):
    """Scatter an ``[r, 6]`` Jacobian block into the columns of ``body`` of ``[r, 6nb]``."""
    rows = jnp.zeros((block.shape[0], 6 * num_bodies))
    return rows.at[:, 6 * body : 6 * body + 6].set(block)


def _pose(state: BodyStates, index: int):
    if index == WORLD:
        return jnp.array([1.0, 0.0, 0.0, 0.0]), jnp.zeros(3)
    return state.orientation[index], state.position[index]


def hinge_holonomic(hinge: Hinge, state: BodyStates):
    """Violation ``g(q)`` (F.1) ``[5]`` and its Jacobian ``G(q)`` ``[5, 6nb]`` with ``ġ = G v``.

    Rows: the three components of ``anchor_a - anchor_b`` [m], then ``x_a·y_b`` and ``x_a·z_b``.
    """
    nb = state.num_bodies
    e_p, r_p = _pose(state, hinge.parent)
    e_c, r_c = _pose(state, hinge.child)
    s_p = lie.quat_rotate(e_p, hinge.parent_anchor)
    s_c = lie.quat_rotate(e_c, hinge.child_anchor)
    frame_a, frame_b = hinge_frames(hinge, state)
    x_a = lie.quat_rotate(frame_a, jnp.array([1.0, 0.0, 0.0]))
    y_b = lie.quat_rotate(frame_b, jnp.array([0.0, 1.0, 0.0]))
    z_b = lie.quat_rotate(frame_b, jnp.array([0.0, 0.0, 1.0]))
    violation = jnp.concatenate([(r_p + s_p) - (r_c + s_c), jnp.stack([x_a @ y_b, x_a @ z_b])])

    n_y = jnp.cross(x_a, y_b)
    n_z = jnp.cross(x_a, z_b)
    zero = jnp.zeros(3)
    child_block = jnp.concatenate(
        [
            jnp.concatenate([-jnp.eye(3), lie.skew(s_c)], axis=1),
            jnp.stack([jnp.concatenate([zero, -n_y]), jnp.concatenate([zero, -n_z])]),
        ]
    )
    jacobian = _place(nb, hinge.child, child_block)
    if hinge.parent != WORLD:
        parent_block = jnp.concatenate(
            [
                jnp.concatenate([jnp.eye(3), -lie.skew(s_p)], axis=1),
                jnp.stack([jnp.concatenate([zero, n_y]), jnp.concatenate([zero, n_z])]),
            ]
        )
        jacobian = jacobian + _place(nb, hinge.parent, parent_block)
    return violation, jacobian


def hinge_axis_row(hinge: Hinge, state: BodyStates):
    """Row ``Ḡ`` ``[6nb]`` with ``Ḡ v`` = relative angular velocity about ``x_b`` (F.2)."""
    nb = state.num_bodies
    _, frame_b = hinge_frames(hinge, state)
    axis = lie.quat_rotate(frame_b, jnp.array([1.0, 0.0, 0.0]))
    block = jnp.concatenate([jnp.zeros(3), axis])[None, :]
    row = _place(nb, hinge.child, block)
    if hinge.parent != WORLD:
        row = row - _place(nb, hinge.parent, block)
    return row[0]


def holonomic_constraints(system: Multibody, state: BodyStates):
    """Stacked violation ``g`` ``[5 n_h]`` and Jacobian ``G`` ``[5 n_h, 6nb]`` of all hinges."""
    parts = [hinge_holonomic(hinge, state) for hinge in system.hinges]
    return jnp.concatenate([p[0] for p in parts]), jnp.concatenate([p[1] for p in parts])


def spook_gamma(damping, h):
    """γ = 1/(1 + 4τ/h) (2.9)."""
    return 1.0 / (1.0 + 4.0 * damping / h)


def constraint_rows(system: Multibody, state: BodyStates, inputs, h) -> ConstraintRows:
    """Assemble every constraint row at state ``x_k`` with inputs ``u_k`` and step ``h`` [s].

    Implements the right-hand sides and regularisation of (2.8)-(2.11), (2.17), (F.2), (F.3);
    ``inputs`` has one entry per motorised hinge, in hinge order.
    """
    velocity = state.velocity.reshape(-1)
    jac, scale, reg, target = [], [], [], []
    friction_jac, friction_reg, friction_coef, friction_groups = [], [], [], []
    input_index = 0
    for hinge in system.hinges:
        gamma = spook_gamma(hinge.damping, h)
        violation, g_jac = hinge_holonomic(hinge, state)
        compliance = jnp.concatenate(
            [jnp.full(3, hinge.compliance_linear), jnp.full(2, hinge.compliance_rotational)]
        )
        first_row = sum(r.shape[0] for r in jac)
        jac.append(g_jac)
        scale.append(jnp.ones(HOLONOMIC_ROWS_PER_HINGE))
        reg.append(4.0 / h**2 * compliance * gamma)
        target.append(-4.0 / h * gamma * violation + gamma * (g_jac @ velocity))

        axis_row = hinge_axis_row(hinge, state)
        rate = axis_row @ velocity
        jac.append(axis_row[None])
        scale.append(jnp.atleast_1d(hinge.viscous * h))
        reg.append(jnp.ones(1))
        target.append(jnp.zeros(1))
        if hinge.has_motor:
            torque_impulse = hinge.motor_gain * inputs[input_index] * h
            input_index += 1
            jac.append(axis_row[None])
            scale.append(jnp.atleast_1d(hinge.shaft_inertia))
            reg.append(jnp.ones(1))
            target.append(jnp.atleast_1d(hinge.shaft_inertia * rate + torque_impulse))
        if hinge.has_dry_friction:
            friction_jac.append(axis_row)
            friction_reg.append(4.0 / h**2 * hinge.compliance_rotational * gamma)
            friction_coef.append(
                hinge.friction_coefficient
                + hinge.stribeck_delta * jnp.exp(-hinge.stribeck_zeta * rate**2)
            )
            friction_groups.append(tuple(range(first_row, first_row + HOLONOMIC_ROWS_PER_HINGE)))
    nb6 = 6 * system.num_bodies
    return ConstraintRows(
        jacobian=jnp.concatenate(jac),
        scale=jnp.concatenate(scale),
        regularization=jnp.concatenate(reg),
        target=jnp.concatenate(target),
        friction_jacobian=jnp.stack(friction_jac) if friction_jac else jnp.zeros((0, nb6)),
        friction_regularization=jnp.stack(friction_reg) if friction_reg else jnp.zeros(0),
        friction_bound_coefficient=jnp.stack(friction_coef) if friction_coef else jnp.zeros(0),
        friction_groups=tuple(friction_groups),
    )


def friction_bounds(rows: ConstraintRows, multipliers):
    """β = c_k Σ |λ_i| over each friction row's hinge rows: the box of the dry friction impulse."""
    sums = [jnp.sum(jnp.abs(multipliers[jnp.array(group)])) for group in rows.friction_groups]
    return rows.friction_bound_coefficient * jnp.stack(sums) if sums else jnp.zeros(0)
