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
``β = c_k Σ_{hinge rows} |λ_i| + h τ_C`` (with the internal distance r folded into ``c``, and
``τ_C`` a Coulomb torque that does not grow with the load). A hinge's torque ripple (cogging,
:func:`~mb_estimation.multibody.system.ripple_torque`) at the step's start joins its motor row's
torque impulse.

The rows are kept matrix-free: a hinge's Jacobian rows are made of five world vectors (the two
lever arms, two normals and the axis, :class:`HingeGeometry`), and ``J v`` and ``Jᵀ λ`` are
computed from them directly (:func:`row_rates`, :func:`row_impulses`). The dense ``J`` the
forward step needs is the Jacobian of ``v ↦ J v`` (:attr:`ConstraintRows.jacobian`). Inverse
dynamics and its derivatives never form it, which keeps their forward-mode tangents small.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mb_estimation import lie
from mb_estimation.multibody.state import BodyStates
from mb_estimation.multibody.system import (
    WORLD,
    Hinge,
    Multibody,
    body_rotation,
    hinge_angle,
    hinge_frames,
    rigid_body_energy,
    ripple_torque,
)
from mb_estimation.numerics import jax, pytree_dataclass

jnp = jax.numpy

HOLONOMIC_ROWS_PER_HINGE = 5


@pytree_dataclass
@dataclass(frozen=True)
class HingeGeometry:
    """World-frame vectors of one hinge at a configuration, of which its rows are made.

    Attributes:
        parent_lever, child_lever: ``s_p``, ``s_c``: the anchor relative to each body's centre
            of mass [m], ``[3]`` (zero for the world).
        normals: ``[2, 3]`` ``x_a × y_b`` and ``x_a × z_b``: the rotational rows (F.1).
        axis: the hinge axis ``x_b`` ``[3]``: the viscous, motor and dry friction rows (F.2).
    """

    parent_lever: jax.Array
    child_lever: jax.Array
    normals: jax.Array
    axis: jax.Array


@dataclass(frozen=True)
class HingeLayout:
    """The static part of a hinge the rows need: its bodies and which rows it has."""

    parent: int
    child: int
    has_motor: bool
    has_dry_friction: bool


@pytree_dataclass
@dataclass(frozen=True)
class ConstraintRows:
    """All constraint rows of a system at one state, in the scaled form (*) of the module doc.

    Regular rows, per hinge in order: five holonomic rows, the viscous row, the motor row if
    it has one. Dry friction rows (one per hinge with dry friction) are kept apart.

    Attributes:
        geometry: per hinge, the vectors its rows are made of.
        scale: ``[m]`` ``D_i``.
        regularization: ``[m]`` ``S_i``.
        target: ``[m]`` ``e_i``.
        friction_regularization: ``[nf]`` σ.
        friction_bound_coefficient: ``[nf]`` ``c_k`` (μ r, or the Stribeck law (4.1) at ω_k).
        friction_bound_constant: ``[nf]`` the part of β that does not grow with the load,
            ``h`` times the hinge's Coulomb torque [N m s].
        layout: per hinge, its bodies and rows (static).
        num_bodies: ``nb`` (static).
    """

    geometry: tuple[HingeGeometry, ...]
    scale: jax.Array
    regularization: jax.Array
    target: jax.Array
    friction_regularization: jax.Array
    friction_bound_coefficient: jax.Array
    friction_bound_constant: jax.Array
    layout: tuple[HingeLayout, ...] = field(metadata=dict(static=True))
    num_bodies: int = field(metadata=dict(static=True))

    @property
    def num_friction(self) -> int:
        return sum(hinge.has_dry_friction for hinge in self.layout)

    @property
    def friction_groups(self) -> tuple[tuple[int, ...], ...]:
        """For each friction row, the indices of its hinge's holonomic rows among the regular."""
        groups, first = [], 0
        for hinge in self.layout:
            if hinge.has_dry_friction:
                groups.append(tuple(range(first, first + HOLONOMIC_ROWS_PER_HINGE)))
            first += HOLONOMIC_ROWS_PER_HINGE + 1 + hinge.has_motor
        return tuple(groups)

    @property
    def jacobian(self):
        """Dense ``J`` ``[m, 6nb]`` of the regular rows: the Jacobian of :func:`row_rates`."""
        return jax.jacfwd(lambda v: row_rates(self, v)[0])(jnp.zeros(6 * self.num_bodies))

    @property
    def friction_jacobian(self):
        """Dense ``[nf, 6nb]`` hinge-axis rows of the dry friction constraints."""
        return jax.jacfwd(lambda v: row_rates(self, v)[1])(jnp.zeros(6 * self.num_bodies))


def _position(state: BodyStates, index: int):
    """Centre of mass ``[3]`` [m] of body ``index`` (the origin for the world)."""
    return jnp.zeros(3) if index == WORLD else state.position[index]


def _body_velocity(velocity, index: int):
    """Linear and angular velocity ``[3], [3]`` of body ``index`` in ``[nb, 6]`` (zero: world)."""
    if index == WORLD:
        return jnp.zeros(3), jnp.zeros(3)
    return velocity[index, :3], velocity[index, 3:]


def _hinge_vectors(hinge: Hinge, state: BodyStates):
    """World lever arms ``s_p, s_c`` [m] and frame axes ``x_a, y_b, z_b, x_b`` of a hinge."""
    axes_a, axes_b = hinge_frames(hinge, state)
    parent = body_rotation(state, hinge.parent)
    parent_lever = (hinge.parent_anchor if parent is None
                    else lie.matrix_times(parent, hinge.parent_anchor))
    child_lever = lie.matrix_times(body_rotation(state, hinge.child), hinge.child_anchor)
    return (parent_lever, child_lever, axes_a[:, 0], axes_b[:, 1], axes_b[:, 2], axes_b[:, 0])


def hinge_holonomic(hinge: Hinge, state: BodyStates):
    """Violation ``g(q)`` (F.1) ``[5]`` and the geometry of the hinge's rows.

    Rows: the three components of ``anchor_a - anchor_b`` [m], then ``x_a·y_b`` and ``x_a·z_b``.
    """
    r_p = _position(state, hinge.parent)
    r_c = _position(state, hinge.child)
    s_p, s_c, x_a, y_b, z_b, x_b = _hinge_vectors(hinge, state)
    violation = jnp.concatenate([(r_p + s_p) - (r_c + s_c),
                                 jnp.stack([lie.dot(x_a, y_b), lie.dot(x_a, z_b)])])
    normals = jnp.stack([jnp.cross(x_a, y_b), jnp.cross(x_a, z_b)])
    return violation, HingeGeometry(s_p, s_c, normals, x_b)


def hinge_rates(hinge: HingeLayout, geometry: HingeGeometry, velocity):
    """``[G v (5); Ḡ v]`` of one hinge for ``velocity [nb, 6]``: ``ġ`` (F.1) and the axis rate.

    ``ġ_lin = (v_p + ω_p × s_p) - (v_c + ω_c × s_c)``, ``ġ_rot = n · (ω_p - ω_c)`` and
    ``Ḡ v = x_b · (ω_c - ω_p)`` [m/s, rad/s].
    """
    v_p, w_p = _body_velocity(velocity, hinge.parent)
    v_c, w_c = _body_velocity(velocity, hinge.child)
    linear = (v_p + jnp.cross(w_p, geometry.parent_lever)) - (
        v_c + jnp.cross(w_c, geometry.child_lever))
    relative = w_p - w_c
    return jnp.concatenate([linear, lie.dot(geometry.normals, relative),
                            -lie.dot(relative, geometry.axis)[None]])


def hinge_impulses(geometry: HingeGeometry, holonomic, axial):
    """``Gᵀ λ + Ḡᵀ λ_axis`` of one hinge's rows: the impulses ``[6]`` on its child and parent.

    ``holonomic [5]`` are the multipliers of the rows of :func:`hinge_rates`, ``axial`` the sum
    of those acting on the axis (viscous, motor, dry friction). Returns ``(child, parent)``.
    """
    force = holonomic[:3]
    torque = (geometry.normals[0] * holonomic[3] + geometry.normals[1] * holonomic[4]
              - axial * geometry.axis)
    child = jnp.concatenate([-force, -jnp.cross(geometry.child_lever, force) - torque])
    parent = jnp.concatenate([force, jnp.cross(geometry.parent_lever, force) + torque])
    return child, parent


def row_rates(rows: ConstraintRows, velocity):
    """``(J v [m], J_F v [nf])``: the rates of the regular and dry friction rows, ``v [6nb]``."""
    velocity = velocity.reshape(rows.num_bodies, 6)
    regular, friction = [], []
    for hinge, geometry in zip(rows.layout, rows.geometry, strict=True):
        rates = hinge_rates(hinge, geometry, velocity)
        regular.append(rates[:HOLONOMIC_ROWS_PER_HINGE + 1])
        if hinge.has_motor:
            regular.append(rates[-1:])
        if hinge.has_dry_friction:
            friction.append(rates[-1:])
    return jnp.concatenate(regular), jnp.concatenate(friction) if friction else jnp.zeros(0)


def row_impulses(rows: ConstraintRows, multipliers, friction_multipliers):
    """``Jᵀ λ + J_Fᵀ λ_F`` ``[6nb]``: the generalised impulse of all rows' multipliers."""
    on_body = [[] for _ in range(rows.num_bodies)]
    row, friction_row = 0, 0
    for hinge, geometry in zip(rows.layout, rows.geometry, strict=True):
        holonomic = multipliers[row:row + HOLONOMIC_ROWS_PER_HINGE]
        row += HOLONOMIC_ROWS_PER_HINGE
        axial = multipliers[row]
        row += 1
        if hinge.has_motor:
            axial = axial + multipliers[row]
            row += 1
        if hinge.has_dry_friction:
            axial = axial + friction_multipliers[friction_row]
            friction_row += 1
        child, parent = hinge_impulses(geometry, holonomic, axial)
        on_body[hinge.child].append(child)
        if hinge.parent != WORLD:
            on_body[hinge.parent].append(parent)
    # Summed per body from a static list rather than scattered into an array: no scatter ops.
    return jnp.concatenate([sum(parts) if parts else jnp.zeros(6) for parts in on_body])


def holonomic_constraints(system: Multibody, state: BodyStates):
    """Stacked violation ``g`` ``[5 n_h]`` and dense Jacobian ``G`` ``[5 n_h, 6nb]`` (ġ = G v)."""
    parts = [hinge_holonomic(hinge, state) for hinge in system.hinges]

    def rates(velocity):
        velocity = velocity.reshape(state.num_bodies, 6)
        return jnp.concatenate([
            hinge_rates(_layout(hinge), geometry, velocity)[:HOLONOMIC_ROWS_PER_HINGE]
            for hinge, (_, geometry) in zip(system.hinges, parts, strict=True)])

    jacobian = jax.jacfwd(rates)(jnp.zeros(6 * state.num_bodies))
    return jnp.concatenate([p[0] for p in parts]), jacobian


def _layout(hinge: Hinge) -> HingeLayout:
    return HingeLayout(hinge.parent, hinge.child, hinge.has_motor, hinge.has_dry_friction)


def energy(system: Multibody, state: BodyStates):
    """Total energy of the regularised model [J]: kinetic, gravitational and elastic.

    The elastic part is the potential of the compliant holonomic rows, ``½ gᵀ ε⁻¹ g`` (the
    constraint potential that SPOOK discretises, §2.3); without it a conservative run
    seems to lose and regain energy whenever the hinges deflect.
    """
    elastic = 0.0
    for hinge in system.hinges:
        violation, _ = hinge_holonomic(hinge, state)
        elastic += 0.5 * (jnp.sum(violation[:3] ** 2) / hinge.compliance_linear
                          + jnp.sum(violation[3:] ** 2) / hinge.compliance_rotational)
    return rigid_body_energy(system, state) + elastic


def spook_gamma(damping, h):
    """γ = 1/(1 + 4τ/h) (2.9)."""
    return 1.0 / (1.0 + 4.0 * damping / h)


def constraint_curvature(hinge: Hinge, state: BodyStates):
    """``d²/ds² g(q ⊞ s v)`` at ``s = 0`` ``[5]`` [m/s², rad/s²], ``v`` the state's velocity.

    The curvature of the hinge's violation (F.1) along the step direction; its slope there is
    ``ġ = G v``. Positions move on straight lines and every body-fixed world vector ``u`` turns
    as ``u(s) = exp(s ω) u``, so ``u'' = ω × (ω × u)``: the translational rows get the two
    centripetal terms, ``x_a·y_b`` gets ``x_a''·y_b + 2 x_a'·y_b' + x_a·y_b''``.
    """
    velocity = state.velocity
    w_p = _body_velocity(velocity, hinge.parent)[1]
    w_c = _body_velocity(velocity, hinge.child)[1]
    s_p, s_c, x_a, y_b, z_b, _ = _hinge_vectors(hinge, state)

    def turned(w, u):
        return jnp.cross(w, u)

    def twice_turned(w, u):
        return jnp.cross(w, jnp.cross(w, u))

    def dot_curvature(b):
        return (twice_turned(w_p, x_a) @ b + 2.0 * turned(w_p, x_a) @ turned(w_c, b)
                + x_a @ twice_turned(w_c, b))

    linear = twice_turned(w_p, s_p) - twice_turned(w_c, s_c)
    return jnp.concatenate([linear, jnp.stack([dot_curvature(y_b), dot_curvature(z_b)])])


def drift_correction_coefficient(gamma):
    """``c = (1 - γ²)/2`` of the drift-corrected holonomic row (see :func:`constraint_rows`)."""
    return 0.5 * (1.0 - gamma**2)


def constraint_rows(system: Multibody, state: BodyStates, inputs, h) -> ConstraintRows:
    """Assemble every constraint row at state ``x_k`` with inputs ``u_k`` and step ``h`` [s].

    Implements the right-hand sides and regularisation of (2.8)-(2.11), (2.17), (F.2), (F.3);
    ``inputs`` has one entry per motorised hinge, in hinge order.

    With ``system.drift_correction`` the holonomic target gets ``- c h κ_k``, ``κ_k`` the
    curvature of ``g`` along the step (:func:`constraint_curvature`) and ``c = (1 - γ²)/2``.
    Why: (2.8) linearises ``g(q_{k+1}) ≈ g_k + h G_k v_{k+1}`` and leaves out ``½ h² κ``. On
    a steady rotation the violation then settles where the stabilisation cancels that drift,
    at ``g* = h² κ (1 + γ) / (8 γ)`` — for τ ≫ h (γ → 0) about ``½ h τ κ``, which with the
    paper's τ = 0.02 s is 1e-4…4e-3 m in a fast spin, far above the physical deflection ε·F,
    and its relaxation dissipates energy that depends on h (measured). With the
    correction the fixed point is ``g* = h² κ (1 + γ)/8`` (small for every τ), and at τ = 0
    (γ = 1) the row is unchanged, where SPOOK's undamped rows are only marginally stable and
    any explicit term would destabilise them. ``κ_k`` uses ``v_k``, so row k still depends on
    ``x_k`` only and the inverse dynamics stays consistent with the forward step.
    """
    velocity = state.velocity
    geometries, scale, reg, target = [], [], [], []
    friction_reg, friction_coef, friction_constant = [], [], []
    input_index = 0
    for hinge in system.hinges:
        gamma = spook_gamma(hinge.damping, h)
        violation, geometry = hinge_holonomic(hinge, state)
        rates = hinge_rates(_layout(hinge), geometry, velocity)
        compliance = jnp.concatenate(
            [jnp.full(3, hinge.compliance_linear), jnp.full(2, hinge.compliance_rotational)]
        )
        geometries.append(geometry)
        scale.append(jnp.ones(HOLONOMIC_ROWS_PER_HINGE))
        reg.append(4.0 / h**2 * compliance * gamma)
        holonomic_target = -4.0 / h * gamma * violation + gamma * rates[:HOLONOMIC_ROWS_PER_HINGE]
        if system.drift_correction:
            holonomic_target -= (drift_correction_coefficient(gamma) * h
                                 * constraint_curvature(hinge, state))
        target.append(holonomic_target)

        rate = rates[-1]
        scale.append(jnp.atleast_1d(hinge.viscous * h))
        reg.append(jnp.ones(1))
        target.append(jnp.zeros(1))
        if hinge.has_motor:
            torque_impulse = (hinge.motor_gain * inputs[input_index]
                              + ripple_torque(hinge, hinge_angle(hinge, state))) * h
            input_index += 1
            scale.append(jnp.atleast_1d(hinge.shaft_inertia))
            reg.append(jnp.ones(1))
            target.append(jnp.atleast_1d(hinge.shaft_inertia * rate + torque_impulse))
        if hinge.has_dry_friction:
            friction_reg.append(4.0 / h**2 * hinge.compliance_rotational * gamma)
            friction_coef.append(
                hinge.friction_coefficient
                + hinge.stribeck_delta * jnp.exp(-hinge.stribeck_zeta * rate**2)
            )
            friction_constant.append(hinge.coulomb_torque * h)
    return ConstraintRows(
        geometry=tuple(geometries),
        scale=jnp.concatenate(scale),
        regularization=jnp.concatenate(reg),
        target=jnp.concatenate(target),
        friction_regularization=jnp.stack(friction_reg) if friction_reg else jnp.zeros(0),
        friction_bound_coefficient=jnp.stack(friction_coef) if friction_coef else jnp.zeros(0),
        friction_bound_constant=(jnp.stack(friction_constant) if friction_constant
                                 else jnp.zeros(0)),
        layout=tuple(_layout(hinge) for hinge in system.hinges),
        num_bodies=system.num_bodies,
    )


def friction_bounds(rows: ConstraintRows, multipliers):
    """β = c_k Σ |λ_i| + h τ_C over each friction row's hinge rows: its impulse's box."""
    sums = [jnp.sum(jnp.abs(multipliers[group[0]:group[-1] + 1]))
            for group in rows.friction_groups]
    if not sums:
        return jnp.zeros(0)
    return rows.friction_bound_coefficient * jnp.stack(sums) + rows.friction_bound_constant
