"""A multibody system: rigid bodies, frictional hinges and gravity (paper §2.1, §4.3, appendix F).

A :class:`Multibody` is an immutable pytree: arrays (masses, inertias, anchors, compliances,
friction, motor gain…) are leaves, so a rig can build it from (traced) parameters and everything
downstream differentiates with respect to them; the topology (which body each hinge connects,
whether it has a motor or dry friction) is static.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from mb_estimation import lie
from mb_estimation.multibody.state import BodyStates
from mb_estimation.numerics import jax, pytree_dataclass

jnp = jax.numpy

WORLD = -1  # index used for the world as a hinge's parent


@pytree_dataclass
@dataclass(frozen=True)
class Bodies:
    """Inertial properties of ``nb`` rigid bodies.

    Attributes:
        mass: ``[nb]`` [kg].
        inertia: principal moments about the centre of mass in body axes, ``[nb, 3]`` [kg m^2].
    """

    mass: jax.Array
    inertia: jax.Array


@pytree_dataclass
@dataclass(frozen=True)
class Hinge:
    """A frictional hinge joint between ``parent`` (a body index or :data:`WORLD`) and ``child``.

    The attachment frame ``a`` is fixed in the parent (origin ``parent_anchor``, axes
    ``parent_frame``), frame ``b`` in the child. The hinge axis is the x axis of both frames;
    the holonomic rows (F.1) keep the origins together and ``x_a ⟂ y_b, z_b``. The joint angle
    is the rotation of ``b`` relative to ``a`` about x; it is zero when the frames coincide.

    Attributes:
        parent, child: body indices (static). ``child`` must be the hinge's own index in the
            system (each body hangs on exactly one hinge, listed parent-first).
        has_motor: a motor row (F.3) on this hinge, driven by one input (static).
        has_dry_friction: a dry friction row on the hinge axis (static).
        parent_anchor, child_anchor: frame origins in body coordinates [m], ``[3]``.
        parent_frame, child_frame: unit quaternions frame → body, ``[4]``.
        compliance_linear: ε of the three translational rows [m/N].
        compliance_rotational: ε of the two rotational rows [rad/(N m)]; also regularises the
            dry friction row.
        damping: τ of the holonomic rows [s] (2.9).
        viscous: b of the viscous row (F.2) [N m s/rad].
        motor_gain: K, torque per input unit [N m/V].
        shaft_inertia: J_shaft of the motor row (F.3) [kg m^2].
        friction_coefficient: the dry friction impulse is bounded by
            ``(friction_coefficient + stribeck_delta exp(-stribeck_zeta ω_k²)) Σ|λ_hinge|``,
            i.e. μ·r for the Furuta hinges [m] and the Stribeck law (4.1) for the pendulum.
        stribeck_delta: static minus kinetic part of that coefficient [m].
        stribeck_zeta: transition rate ζ of (4.1) [s²/rad²].
        coulomb_torque: a dry friction torque that does not grow with the hinge's load [N m]:
            it adds ``coulomb_torque h`` to that bound (the drivers' and bearings' seals).
        ripple_cos, ripple_sin: ``[H]`` amplitudes [N m] of a torque ripple (cogging) on the
            hinge axis, ``Σ_k ripple_cos_k cos(k n θ) + ripple_sin_k sin(k n θ)``
            (:func:`ripple_torque`).
        ripple_per_revolution: ``n``, the ripple's periods per revolution (static; 0: none).
    """

    parent: int = field(metadata=dict(static=True))
    child: int = field(metadata=dict(static=True))
    has_motor: bool = field(metadata=dict(static=True))
    has_dry_friction: bool = field(metadata=dict(static=True))
    parent_anchor: jax.Array
    child_anchor: jax.Array
    parent_frame: jax.Array
    child_frame: jax.Array
    compliance_linear: jax.Array
    compliance_rotational: jax.Array
    damping: jax.Array
    viscous: jax.Array
    motor_gain: jax.Array
    shaft_inertia: jax.Array
    friction_coefficient: jax.Array
    stribeck_delta: jax.Array
    stribeck_zeta: jax.Array
    coulomb_torque: jax.Array = 0.0
    ripple_cos: jax.Array = field(default_factory=tuple)
    ripple_sin: jax.Array = field(default_factory=tuple)
    ripple_per_revolution: int = field(default=0, metadata=dict(static=True))


def ripple_torque(hinge: Hinge, angle):
    """The hinge's torque ripple (cogging) [N m] at joint angle ``angle`` [rad].

    ``Σ_k a_k cos(k n θ) + b_k sin(k n θ)`` with ``a = ripple_cos``, ``b = ripple_sin`` and
    ``n`` periods per revolution; zero where the hinge has none.
    """
    if not hinge.ripple_per_revolution:
        return jnp.zeros_like(angle)
    orders = hinge.ripple_per_revolution * jnp.arange(1, len(hinge.ripple_cos) + 1)
    phases = orders * angle
    return jnp.sum(hinge.ripple_cos * jnp.cos(phases) + hinge.ripple_sin * jnp.sin(phases))


@pytree_dataclass
@dataclass(frozen=True)
class Multibody:
    """Bodies, hinges (parent-first, hinge ``i`` carries body ``i``) and gravity [m/s², world].

    ``drift_correction`` (static) adds each constraint's curvature along the step to the
    holonomic rows (:func:`mb_estimation.multibody.constraints.constraint_rows`); off, the rows
    are exactly the paper's (2.8).
    """

    bodies: Bodies
    hinges: tuple[Hinge, ...]
    gravity: jax.Array
    drift_correction: bool = field(default=False, metadata=dict(static=True))

    @property
    def num_bodies(self) -> int:
        return self.bodies.mass.shape[-1]

    @property
    def num_inputs(self) -> int:
        return sum(1 for hinge in self.hinges if hinge.has_motor)


def frictionless_hinges(*systems: Multibody) -> tuple[bool, ...]:
    """Per hinge: a dry friction row whose bound is zero in every one of ``systems``.

    ``systems``: the same rig built with concrete values (e.g. at the start and with every
    fitted parameter moved), so a hinge listed here has no dry friction whatever the fit does.
    """
    def idle(hinges):
        return all(hinge.has_dry_friction and float(hinge.friction_coefficient) == 0.0
                   and float(hinge.stribeck_delta) == 0.0
                   and float(hinge.coulomb_torque) == 0.0 for hinge in hinges)

    return tuple(idle(hinges) for hinges in zip(*(system.hinges for system in systems),
                                                strict=True))


def without_dry_friction(system: Multibody, hinges: tuple[bool, ...]) -> Multibody:
    """``system`` without the dry friction rows of the marked ``hinges``.

    For hinges whose friction bound is zero (:func:`frictionless_hinges`): their rows carry no
    impulse (β = 0 forces λ_F = 0), so the step is the same, and 2–3× cheaper without the
    friction complementarity problem (measured).
    """
    return dataclasses.replace(system, hinges=tuple(
        dataclasses.replace(hinge, has_dry_friction=False) if drop else hinge
        for hinge, drop in zip(system.hinges, hinges, strict=True)))


def world_inertia_times(system: Multibody, orientation, omega):
    """``J(q) ω = R (J_body ⊙ Rᵀ ω)`` (2.3) per body, ``[nb, 3]`` [kg m²/s], without forming J."""
    rotation = lie.quat_to_matrix(orientation)
    return lie.matrix_times(rotation,
                            system.bodies.inertia * lie.matrix_transpose_times(rotation, omega))


def mass_times(system: Multibody, state: BodyStates, velocity):
    """``M(q) v`` (2.3)-(2.4) for a generalised velocity ``[nb, 6]``: ``[m v; J(q) ω]``."""
    linear = system.bodies.mass[:, None] * velocity[:, :3]
    angular = world_inertia_times(system, state.orientation, velocity[:, 3:])
    return jnp.concatenate([linear, angular], axis=-1)


def mass_matrix(system: Multibody, state: BodyStates):
    """Block-diagonal mass matrix ``M(q) = diag(m_i I, J_i(q))`` (2.3)-(2.4), ``[6nb, 6nb]``."""
    nb = system.num_bodies

    def times(velocity):
        return mass_times(system, state, velocity.reshape(nb, 6)).reshape(-1)

    return jax.jacfwd(times)(jnp.zeros(6 * nb))


def inverse_mass_matrix(system: Multibody, state: BodyStates):
    """``M(q)^{-1}`` ``[6nb, 6nb]``, from the inverse principal inertias (no matrix inversion)."""
    nb = system.num_bodies
    rotation = lie.quat_to_matrix(state.orientation)
    inverse_inertia = rotation @ (
        (1.0 / system.bodies.inertia)[:, :, None] * jnp.swapaxes(rotation, -1, -2)
    )
    blocks = jnp.zeros((nb, 6, 6))
    blocks = blocks.at[:, :3, :3].set((1.0 / system.bodies.mass)[:, None, None] * jnp.eye(3))
    blocks = blocks.at[:, 3:, 3:].set(inverse_inertia)
    return jax.scipy.linalg.block_diag(*blocks)


def applied_forces(system: Multibody, state: BodyStates):
    """Gravity and fictitious forces ``f + f_g`` (2.3): ``[m g; -ω × J ω]`` per body, ``[6nb]``."""
    omega = state.angular_velocity
    gyroscopic = -jnp.cross(omega, world_inertia_times(system, state.orientation, omega))
    gravity = system.bodies.mass[:, None] * system.gravity
    return jnp.concatenate([gravity, gyroscopic], axis=-1).reshape(-1)


def kinetic_energy(system: Multibody, state: BodyStates):
    """Kinetic energy [J] of the bodies and of each motor shaft, ``½ J_shaft θ̇²`` (F.3).

    The shaft inertia is part of the model although it belongs to no body.
    """
    omega = state.angular_velocity
    kinetic = 0.5 * jnp.sum(system.bodies.mass * jnp.sum(state.linear_velocity**2, axis=-1))
    kinetic += 0.5 * jnp.sum(omega * world_inertia_times(system, state.orientation, omega))
    for hinge in system.hinges:
        if hinge.has_motor:
            kinetic += 0.5 * hinge.shaft_inertia * hinge_rate(hinge, state) ** 2
    return kinetic


def potential_energy(system: Multibody, state: BodyStates):
    """Gravitational potential energy ``-Σ m g·r`` [J] (zero at the world origin)."""
    return -jnp.sum(system.bodies.mass * (state.position @ system.gravity))


def rigid_body_energy(system: Multibody, state: BodyStates):
    """Kinetic plus gravitational potential energy [J].

    The energy stored in compliant constraints is not included
    (:func:`mb_estimation.multibody.energy` adds it).
    """
    return kinetic_energy(system, state) + potential_energy(system, state)


def _body_pose(state: BodyStates, index: int):
    """Orientation, position, linear and angular velocity of body ``index`` or of the world."""
    if index == WORLD:
        zero = jnp.zeros(3)
        return jnp.array([1.0, 0.0, 0.0, 0.0]), zero, zero, zero
    return (
        state.orientation[index],
        state.position[index],
        state.linear_velocity[index],
        state.angular_velocity[index],
    )


def body_rotation(state: BodyStates, index: int):
    """Rotation matrix body → world ``[3, 3]`` of body ``index``, or ``None`` for the world."""
    return None if index == WORLD else lie.quat_to_matrix(state.orientation[index])


def hinge_frames(hinge: Hinge, state: BodyStates):
    """World axes of the attachment frames ``a`` (parent) and ``b`` (child): ``A, B [3, 3]``.

    Their columns are the frames' x, y, z axes in world coordinates, ``A = R_p R(parent_frame)``
    and ``B = R_c R(child_frame)``. Rotation matrices rather than quaternion products: every
    world vector of a hinge is then one matrix column or one matrix-vector product, which makes
    the model's compiled programs about a fifth smaller (measured).
    """
    parent = body_rotation(state, hinge.parent)
    frame_a = lie.quat_to_matrix(hinge.parent_frame)
    if parent is not None:
        frame_a = lie.matrix_product(parent, frame_a)
    frame_b = lie.matrix_product(body_rotation(state, hinge.child),
                                 lie.quat_to_matrix(hinge.child_frame))
    return frame_a, frame_b


def hinge_angle(hinge: Hinge, state: BodyStates):
    """Joint angle [rad] in (-π, π]: rotation of frame ``b`` relative to ``a`` about x."""
    axes_a, axes_b = hinge_frames(hinge, state)
    y_b = axes_b[:, 1]
    return jnp.arctan2(lie.dot(axes_a[:, 2], y_b), lie.dot(axes_a[:, 1], y_b))


def hinge_rate(hinge: Hinge, state: BodyStates):
    """Relative angular velocity about the hinge axis ``x_b`` [rad/s] (the row Ḡ of F.2)."""
    _, axes_b = hinge_frames(hinge, state)
    parent_omega = _body_pose(state, hinge.parent)[3]
    return lie.dot(state.angular_velocity[hinge.child] - parent_omega, axes_b[:, 0])


def joint_angles(system: Multibody, state: BodyStates):
    """All hinge angles ``[n_hinges]`` [rad], wrapped to (-π, π]."""
    return jnp.stack([hinge_angle(hinge, state) for hinge in system.hinges])


def joint_rates(system: Multibody, state: BodyStates):
    """All hinge rates ``[n_hinges]`` [rad/s]."""
    return jnp.stack([hinge_rate(hinge, state) for hinge in system.hinges])


def states_from_joints(system: Multibody, angles, rates) -> BodyStates:
    """Body states at zero constraint violation for given hinge angles [rad] and rates [rad/s].

    Forward kinematics along the tree: the inverse of :func:`joint_angles`/:func:`joint_rates`,
    used for initial states (appendix G.3) and for states from measured angles (§4.4).
    """
    nb = system.num_bodies
    orientation = [None] * nb
    position = [None] * nb
    linear = [None] * nb
    angular = [None] * nb
    for i, hinge in enumerate(system.hinges):
        if hinge.child != i:
            raise ValueError(f"hinge {i} must carry body {i}, it carries body {hinge.child}")
        if hinge.parent == WORLD:
            e_p = jnp.array([1.0, 0.0, 0.0, 0.0])
            r_p = v_p = w_p = jnp.zeros(3)
        else:
            e_p, r_p, v_p, w_p = (orientation[hinge.parent], position[hinge.parent],
                                  linear[hinge.parent], angular[hinge.parent])
        frame_a = lie.quat_multiply(e_p, hinge.parent_frame)
        frame_b = lie.quat_turned_about_x(frame_a, angles[i])
        e_c = lie.quat_multiply(frame_b, lie.quat_conjugate(hinge.child_frame))
        anchor = r_p + lie.matrix_times(lie.quat_to_matrix(e_p), hinge.parent_anchor)
        r_c = anchor - lie.matrix_times(lie.quat_to_matrix(e_c), hinge.child_anchor)
        axis = lie.quat_x_axis(frame_a)
        w_c = w_p + rates[i] * axis
        v_anchor = v_p + jnp.cross(w_p, anchor - r_p)
        orientation[i], position[i] = e_c, r_c
        angular[i] = w_c
        linear[i] = v_anchor + jnp.cross(w_c, r_c - anchor)
    return BodyStates(jnp.stack(position), jnp.stack(orientation), jnp.stack(linear),
                      jnp.stack(angular))
