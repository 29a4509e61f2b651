"""Rigid-limit dynamics in joint coordinates: the holonomic multipliers eliminated.

As every hinge compliance ε → 0 the regularised model of §2.3 becomes a rigid tree whose
configuration is its joint angles θ; the holonomic multipliers of (2.30), whose sensitivity to
the states grows as 1/ε, then do no work along the motions the hinges allow and drop out when
the equations of motion are projected onto those motions (Kane's method; the paper's §4.9 asks
for an inverse dynamics that survives stiff constraints). This module holds that tree's
kinematics and the terms of its dynamics; its variational time step is
:mod:`~mb_estimation.multibody.variational`.

The bodies, hinges, masses, inertias, gravity, friction and motor are exactly those of the
:class:`~mb_estimation.multibody.Multibody` (maximal coordinates, appendix F): the Lagrangian is
evaluated on the body states :func:`~mb_estimation.multibody.states_from_joints` builds from
(θ, θ̇), so both formulations describe the same rig. What the residuals need of it — the
momenta ``∂L/∂θ̇``, ``∂L/∂θ``, the mass matrix, the reactions — is written out in closed form
over the tree's forward kinematics (:func:`tree_pose`, :func:`tree_motion`; rotation matrices),
checked against forward-mode AD of :func:`lagrangian` and finite differences in the tests:
nested AD compiled 1.6× longer and ran 3–5× slower (measured).

Every hinge and body is handled at once, over arrays stacked along them (which hinge carries
which body is a constant 0/1 matrix, :func:`carried_bodies`), rather than in loops unrolled per
body: a rigid step's program is about half the size that way, and it compiles faster and runs
faster in a scan (a simulation step by step); vmapped over thousands of transitions at once
(the joint fit's Jacobians) the denser arrays cost more memory traffic and run slower
(measured). Only elementwise JAX operations and tiny unrolled solves are used: batched LAPACK
calls inside a vmap deadlock jaxlib 0.10's CPU runtime on two cores (each worker blocks on the
pool it runs in).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mb_estimation import lie
from mb_estimation.compiled import compiled_function
from mb_estimation.multibody import small_solve
from mb_estimation.multibody.system import (
    WORLD,
    Multibody,
    kinetic_energy,
    potential_energy,
    states_from_joints,
)
from mb_estimation.numerics import jax, jit, pytree_dataclass

jnp = jax.numpy


@pytree_dataclass
@dataclass(frozen=True)
class JointStates:
    """Joint angles [rad] and generalised momenta ``p = ∂L/∂θ̇`` [N m s] of a tree.

    The position–momentum form of the variational step; both ``[..., n_joints]``. Leading
    dimensions (time steps) are free; ``states[k]`` selects along the first one.
    :func:`joint_rates` gives the rates [rad/s], :func:`joint_states` the states of given rates.
    """

    angles: jax.Array
    momenta: jax.Array

    def __getitem__(self, index):
        return jax.tree_util.tree_map(lambda a: a[index], self)


@jit
def lagrangian(system: Multibody, angles, rates):
    """``L = T - V`` [J] of the rigid tree at joint angles [rad] and rates [rad/s] (2.3).

    The energies of the body states :func:`states_from_joints` builds (motor shafts' ``½
    J_shaft θ̇²`` included, F.3): the definition the closed forms below
    (:func:`joint_momenta`, :func:`lagrangian_angle_gradient`) are derivatives of, and what the
    tests check them against.
    """
    state = states_from_joints(system, angles, rates)
    return kinetic_energy(system, state) - potential_energy(system, state)


@pytree_dataclass
@dataclass(frozen=True)
class TreePose:
    """The rigid tree at given joint angles, in world coordinates (forward kinematics).

    Per body, stacked (hinge ``i`` carries body ``i``): ``rotation`` body → world ``[nb, 3,
    3]`` and ``position`` of the centre of mass ``[nb, 3]`` [m]. Per hinge: ``axis`` (unit,
    ``[n, 3]``), ``anchor`` the point on it ``[n, 3]`` [m] and ``child_axes`` the world axes of
    the child's attachment frame ``b`` ``[n, 3, 3]`` (its first column is the axis). And
    ``linear_jacobian = ∂v_b/∂θ̇_j`` ``[n, nb, 3]`` [m/rad]: ``a_j × (r_b - s_j)`` where hinge
    ``j`` carries body ``b``, else 0 (the angular one is ``a_j`` where carried,
    :func:`carried_bodies`).
    """

    rotation: jax.Array
    position: jax.Array
    axis: jax.Array
    anchor: jax.Array
    child_axes: jax.Array
    linear_jacobian: jax.Array


@pytree_dataclass
@dataclass(frozen=True)
class TreeMotion:
    """The bodies' velocities at given joint rates, world vectors stacked ``[nb, 3]``.

    ``linear``: of the centres of mass [m/s]; ``angular`` [rad/s].
    """

    linear: jax.Array
    angular: jax.Array


def tree_pose(system: Multibody, angles) -> TreePose:
    """Forward kinematics of the rigid tree at joint angles ``[n_joints]`` [rad].

    The same poses as :func:`~mb_estimation.multibody.states_from_joints`, as rotation matrices:
    frame ``a`` is ``A = R_p R(parent_frame)``, frame ``b`` is ``A`` turned by θ about its x
    axis, and the child's rotation ``B R(child_frame)ᵀ``; the anchor ``r_p + R_p s_p`` and the
    child's centre of mass ``anchor - R_c s_c``.
    """
    rotation, position, axis, anchor, child_axes = [], [], [], [], []
    for i, hinge in enumerate(system.hinges):
        if hinge.child != i:
            raise ValueError(f"hinge {i} must carry body {i}, it carries body {hinge.child}")
        frame_a = lie.quat_to_matrix(hinge.parent_frame)
        point = hinge.parent_anchor
        if hinge.parent != WORLD:
            frame_a = lie.matrix_product(rotation[hinge.parent], frame_a)
            point = position[hinge.parent] + lie.matrix_times(rotation[hinge.parent], point)
        c, s = jnp.cos(angles[i]), jnp.sin(angles[i])
        frame_b = jnp.stack([frame_a[:, 0], c * frame_a[:, 1] + s * frame_a[:, 2],
                             c * frame_a[:, 2] - s * frame_a[:, 1]], axis=1)
        child = lie.matrix_product(frame_b, lie.quat_to_matrix(hinge.child_frame).T)
        rotation.append(child)
        position.append(point - lie.matrix_times(child, hinge.child_anchor))
        axis.append(frame_b[:, 0])
        anchor.append(point)
        child_axes.append(frame_b)
    position, axis, anchor = map(jnp.stack, (position, axis, anchor))
    return TreePose(jnp.stack(rotation), position, axis, anchor, jnp.stack(child_axes),
                    carried_bodies(system)[:, :, None]
                    * jnp.cross(axis[:, None, :], _levers(position, anchor)))


def _levers(position, anchor):
    """``r_b - s_j`` ``[n_joints, nb, 3]`` [m]: each centre of mass from each hinge's anchor."""
    return position[None, :, :] - anchor[:, None, :]


def carried_bodies(system: Multibody) -> np.ndarray:
    """``C [n_joints, nb]``: 1 where hinge ``j`` carries body ``b`` (:func:`subtrees`), else 0."""
    carried = np.zeros((len(system.hinges), system.num_bodies))
    for j, bodies in enumerate(subtrees(system)):
        carried[j, bodies] = 1.0
    return carried


def _parent_bodies(system: Multibody) -> np.ndarray:
    """``[n_joints, nb]``: 1 at each hinge's parent body; a row of zeros for the world."""
    parents = np.zeros((len(system.hinges), system.num_bodies))
    for j, hinge in enumerate(system.hinges):
        if hinge.parent != WORLD:
            parents[j, hinge.parent] = 1.0
    return parents


def _per_hinge(selection: np.ndarray, per_body):
    """``Σ_b selection[j, b] x_b``: per hinge ``[n_joints, 3]`` of per body ``x [nb, 3]``."""
    return jnp.sum(selection[:, :, None] * per_body[None, :, :], axis=1)


def _parent_motion(system: Multibody, pose: TreePose, motion: TreeMotion):
    """Per hinge, its parent's angular velocity ``ω_P [n, 3]`` and ``x ↦ v_P(x)``.

    ``v_P(x) = v_p + ω_P × (x - r_p)``: the velocity of the parent's point ``x`` (``[n, ...,
    3]``, one set of points per hinge, or broadcast); zero where the parent is the world.
    """
    parents = _parent_bodies(system)
    omega, linear, centre = (_per_hinge(parents, motion.angular),
                             _per_hinge(parents, motion.linear),
                             _per_hinge(parents, pose.position))

    def velocity(points):
        spread = (slice(None),) + (None,) * (points.ndim - 2)
        return linear[spread] + jnp.cross(omega[spread], points - centre[spread])

    return omega, velocity


def tree_motion(system: Multibody, pose: TreePose, rates) -> TreeMotion:
    """Body velocities at joint rates ``[n_joints]`` [rad/s].

    ``ω_b = Σ_j θ̇_j a_j`` and ``v_b = Σ_j θ̇_j a_j × (r_b - s_j)`` over the hinges ``j``
    carrying ``b``: the recursion ``ω_c = ω_p + θ̇ a``, ``v_c = v_p(s) + ω_c × (r_c - s)``
    along the tree, summed.
    """
    turning = rates[:, None] * carried_bodies(system)
    return TreeMotion(jnp.sum(rates[:, None, None] * pose.linear_jacobian, axis=0),
                      jnp.sum(turning[:, :, None] * pose.axis[:, None, :], axis=0))


def subtrees(system: Multibody) -> list[list[int]]:
    """Per hinge, the bodies it carries: its child and everything below it."""
    carried = [{i} for i in range(len(system.hinges))]
    for i in reversed(range(len(system.hinges))):  # parent-first order: children come later
        parent = system.hinges[i].parent
        if parent != WORLD:
            carried[parent] |= carried[i]
    return [sorted(bodies) for bodies in carried]


def _inertias_times(system: Multibody, pose: TreePose, vectors):
    """``J_b(q) w_b`` for every body at once: ``vectors [..., nb, 3]`` → ``[..., nb, 3]``."""
    return lie.matrix_times(pose.rotation, system.bodies.inertia
                            * lie.matrix_transpose_times(pose.rotation, vectors))


def _shaft_inertias(system: Multibody):
    """``J_shaft`` per hinge ``[n_joints]`` [kg m²], 0 on a hinge without a motor (F.3)."""
    return jnp.stack([hinge.shaft_inertia if hinge.has_motor else jnp.zeros(())
                      for hinge in system.hinges])


def momenta_in_pose(system: Multibody, pose: TreePose, motion: TreeMotion, rates):
    """:func:`joint_momenta` of a tree already posed and moving [N m s].

    ``p_j = a_j · Σ_{b carried} (J_b ω_b + (r_b - anchor_j) × m_b v_b) + J_shaft θ̇_j``, the
    second term written ``(a_j × (r_b - anchor_j)) · m_b v_b``.
    """
    spins = _inertias_times(system, pose, motion.angular)
    translations = system.bodies.mass[:, None] * motion.linear
    return (jnp.sum(carried_bodies(system) * lie.dot(pose.axis[:, None, :], spins[None]), axis=1)
            + jnp.sum(lie.dot(pose.linear_jacobian, translations[None]), axis=1)
            + _shaft_inertias(system) * rates)


def joint_momenta(system: Multibody, angles, rates):
    """Generalised momenta ``p = ∂L/∂θ̇`` ``[n_joints]`` [N m s] (the continuous Legendre map).

    In closed form: hinge ``j``'s momentum is the angular momentum about its anchor of the
    bodies it carries, along its axis, plus the motor shaft's ``J_shaft θ̇_j`` (F.3).
    Derivatives written out rather than taken by forward-mode AD, which the estimator would
    nest two and three deep (measured: 1.6× longer to compile, 3–5× slower to run).
    """
    pose = tree_pose(system, angles)
    return momenta_in_pose(system, pose, tree_motion(system, pose, rates), rates)


def _mass_matrix(system: Multibody, pose: TreePose):
    """``M(θ)`` of a pose: ``M_jk = Σ_b m_b (a_j × (r_b - s_j))·(a_k × (r_b - s_k)) + a_j·J_b a_k``.

    Over the bodies both hinges carry, plus ``J_shaft`` on a motorised hinge's diagonal (F.3);
    every entry at once, over stacked arrays, then symmetrised (the two halves differ by
    round-off).
    """
    carried = carried_bodies(system)
    jacobian = pose.linear_jacobian
    translational = jnp.sum(system.bodies.mass * lie.dot(jacobian[:, None], jacobian[None]),
                            axis=-1)
    spun = _inertias_times(system, pose, jnp.broadcast_to(
        pose.axis[:, None, :], (len(system.hinges), system.num_bodies, 3)))  # J_b a_k [k, b]
    rotational = jnp.sum(carried[:, None, :] * carried[None, :, :]
                         * lie.dot(pose.axis[:, None, None, :], spun[None]), axis=-1)
    matrix = translational + rotational
    return 0.5 * (matrix + matrix.T) + jnp.diag(_shaft_inertias(system))


def joint_mass_matrix(system: Multibody, angles):
    """``M(θ) = ∂²L/∂θ̇²`` ``[n_joints, n_joints]`` [kg m²], shaft inertias included."""
    return _mass_matrix(system, tree_pose(system, angles))


def lagrangian_angle_gradient(system: Multibody, pose: TreePose, motion: TreeMotion):
    """``∂L/∂θ`` ``[n_joints]`` [N m] at fixed rates, in closed form.

    Turning hinge ``i`` by δθ turns the bodies it carries rigidly about its axis ``a`` through
    its anchor ``s``: ``δr_b = a × (r_b - s)``, ``δω_b = a × (ω_b - ω_P)``, ``δv_b = a × (v_b -
    v_P(r_b)) + ω_P × δr_b`` and ``δJ_b = [a]× J_b - J_b [a]×`` per unit δθ, with ``ω_P`` and
    ``v_P(x) = v_p + ω_P × (x - r_p)`` the motion of the hinge's parent ``p`` (zero for the
    world). Collected, per carried body:

        ∂T/∂θ_i ∋ J_b ω_b · (ω_P × a) + m_b v_b · (ω_P × δr_b - a × v_P(r_b))
        -∂V/∂θ_i ∋ m_b g · δr_b

    (the shaft energy ``½ J_shaft θ̇²`` does not depend on θ). Every hinge and body at once.
    """
    parent_omega, parent_velocity = _parent_motion(system, pose, motion)
    parent_points = parent_velocity(pose.position[None])                   # [n, nb, 3]
    moved = pose.linear_jacobian                                           # δr_b, [n, nb, 3]
    spins = _inertias_times(system, pose, motion.angular)
    translations = system.bodies.mass[:, None] * motion.linear
    per_body = (lie.dot(spins[None], jnp.cross(parent_omega, pose.axis)[:, None, :])
                + lie.dot(translations[None], jnp.cross(parent_omega[:, None, :], moved)
                          - jnp.cross(pose.axis[:, None, :], parent_points))
                + system.bodies.mass * lie.dot(system.gravity, moved))
    return jnp.sum(carried_bodies(system) * per_body, axis=1)


def joint_rates(system: Multibody, state: JointStates, locked=None):
    """Joint rates ``θ̇ = M(θ)⁻¹ p`` [rad/s] of a joint state (the inverse Legendre map).

    ``locked [n_joints]`` (1 where a joint is locked, else 0; None: none is): those joints at
    rest, the others' rates from their own momenta (``M`` and ``p`` restricted to them).
    """
    matrix = joint_mass_matrix(system, state.angles)
    if locked is None:
        return small_solve.solve_positive_definite(matrix, state.momenta)
    moving = 1.0 - locked
    return small_solve.solve_positive_definite(
        matrix * moving[:, None] * moving[None, :] + jnp.diag(locked), state.momenta * moving)


def joint_states(system: Multibody, angles, rates) -> JointStates:
    """The joint state at ``angles`` [rad] moving with ``rates`` [rad/s]."""
    return JointStates(angles, joint_momenta(system, angles, rates))


def rigid_state(system: Multibody, joint_state, locked) -> JointStates:
    """The state at ``joint_state = (angles, rates)`` ``[2 n_joints]`` [rad, rad/s].

    The ``locked`` joints ``[n_joints]`` (1 where locked, else 0) at rest there.
    """
    joints = joint_state.shape[0] // 2
    return joint_states(system, joint_state[:joints], joint_state[joints:] * (1.0 - locked))


#: :func:`rigid_state` compiled (once per system structure), for use outside compiled code:
#: the rigid tree's start state of a replay, a prediction, a simulation or a simulated lane.
rigid_start = compiled_function(rigid_state)


def rate_basis(system: Multibody, angles):
    """``N = ∂v/∂θ̇`` ``[6 nb, n_joints]``: body velocities per unit joint rate at ``angles``.

    Its columns span the motions the rigid hinges allow (``G N = 0``): column ``j`` is ``[a_j ×
    (r_b - s_j); a_j]`` for each body ``b`` hinge ``j`` carries, zero for the others.
    """
    pose = tree_pose(system, angles)
    unit = jnp.eye(len(system.hinges))
    columns = []
    for k in range(len(system.hinges)):
        motion = tree_motion(system, pose, unit[k])
        columns.append(jnp.concatenate([motion.linear, motion.angular], axis=1).reshape(-1))
    return jnp.stack(columns, axis=1)


def _orthonormal_factor(basis):
    """``R`` of ``N = Q R`` (Gram–Schmidt, unrolled over the few columns; upper triangular)."""
    columns, factor = [], []
    for j in range(basis.shape[1]):
        column = basis[:, j]
        row = []
        for q in columns:
            projection = q @ basis[:, j]
            column = column - projection * q
            row.append(projection)
        norm = jnp.sqrt(column @ column)
        columns.append(column / norm)
        factor.append(jnp.stack(row + [norm] + [jnp.zeros(())] * (basis.shape[1] - j - 1)))
    return jnp.stack(factor, axis=1)


def body_impulse_norm_weights(system: Multibody, angles):
    """``R⁻ᵀ`` with ``N = Q R`` (``[n_joints, n_joints]``): joint impulse → body impulse norm.

    A generalised impulse ``r`` is carried by body impulses ``P`` with ``Nᵀ P = r``; the
    smallest such ``P`` has ``‖P‖ = ‖R⁻ᵀ r‖``. Weighting joint residuals by ``R⁻ᵀ`` keeps the
    state error weight κ of the paper (``Ω⁻¹ = κ I`` on body impulses, §4.4) meaning the same.
    """
    factor = _orthonormal_factor(rate_basis(system, angles))
    size = factor.shape[0]
    identity = jnp.eye(size)
    # forward substitution with Rᵀ (lower triangular), one unit vector at a time
    columns = []
    for j in range(size):
        solution = []
        for i in range(size):
            value = identity[i, j] - sum((factor[k, i] * solution[k] for k in range(i)), 0.0)
            solution.append(value / factor[i, i])
        columns.append(jnp.stack(solution))
    return jnp.stack(columns, axis=1)


def coasting_acceleration(system: Multibody, pose: TreePose, motion: TreeMotion) -> TreeMotion:
    """Body accelerations of the tree moving with ``motion`` at zero joint accelerations.

    :func:`tree_motion` differentiated in time with ``θ̈ = 0``: hinge ``j`` turns its subtree
    at ``w_j = θ̇_j a_j = ω_j - ω_P`` about an axis fixed in its parent (``ȧ_j = ω_P × a_j``)
    through an anchor moving as the parent's point (``ṡ_j = v_P(s_j)``), so over the hinges
    ``j`` carrying ``b``: ``α_b = Σ ω_P × w_j`` and ``a_b = Σ (ω_P × w_j) × (r_b - s_j) + w_j ×
    (v_b - v_P(s_j))`` — the recursion ``α_c = α_p + ω_p × w``, ``a_c = a_P(s) + α_c × (r_c -
    s) + ω_c × (ω_c × (r_c - s))`` summed. The part of ``θ̈`` is linear and added apart
    (:func:`reaction_impulses`). ``linear``: of the centres of mass [m/s²]; ``angular``
    [rad/s²].
    """
    carried = carried_bodies(system)[:, :, None]
    parent_omega, parent_velocity = _parent_motion(system, pose, motion)
    turning = motion.angular - parent_omega   # hinge j carries body j: w_j [n, 3]
    turned = jnp.cross(parent_omega, turning)  # ω_P × w_j
    linear = (jnp.cross(turned[:, None, :], _levers(pose.position, pose.anchor))
              + jnp.cross(turning[:, None, :],
                          motion.linear[None] - parent_velocity(pose.anchor)[:, None, :]))
    return TreeMotion(jnp.sum(carried * linear, axis=0),
                      jnp.sum(carried * turned[:, None, :], axis=0))


def _subtree_wrenches(system: Multibody, pose: TreePose, motion: TreeMotion,
                     acceleration: TreeMotion):
    """Per hinge, the force [N] and the torque about its anchor [N m] its subtree needs.

    Newton–Euler over the bodies hinge ``i`` carries, moving with ``motion`` at
    ``acceleration``: ``F_i = Σ m_b (a_b - g)`` and ``T_i = Σ J_b α_b + ω_b × J_b ω_b + (r_b -
    s_i) × m_b (a_b - g)``; ``[n, 3]`` each.
    """
    carried = carried_bodies(system)[:, :, None]
    forces = system.bodies.mass[:, None] * (acceleration.linear - system.gravity)
    torques = (_inertias_times(system, pose, acceleration.angular)
               + jnp.cross(motion.angular, _inertias_times(system, pose, motion.angular)))
    levers = _levers(pose.position, pose.anchor)
    return (jnp.sum(carried * forces[None], axis=1),
            jnp.sum(carried * (torques[None] + jnp.cross(levers, forces[None])), axis=1))


def _unit_acceleration_wrenches(system: Multibody, pose: TreePose):
    """Per unit ``θ̈_k``, the force [N] and torque about hinge ``i``'s anchor [N m] ``[k, i, 3]``.

    :func:`_subtree_wrenches` of the accelerations one joint's unit acceleration gives the
    bodies (``α_b = a_k``, ``a_b = a_k × (r_b - s_k)`` for the bodies hinge ``k`` carries), at
    rest and without gravity: ``F = Σ m_b a_b``, ``T = Σ J_b α_b + (r_b - s_i) × m_b a_b``,
    over the bodies hinge ``i`` carries. Linear in ``θ̈``: a motion's wrench is the coasting
    one plus ``Σ_k θ̈_k`` of these, and ``a_i · T[k, i]`` is the mass matrix's ``M_ik``.
    """
    carried = carried_bodies(system)
    forces = system.bodies.mass[None, :, None] * pose.linear_jacobian  # [k, b, 3]
    spins = _inertias_times(system, pose, carried[:, :, None] * pose.axis[:, None, :])
    levers = _levers(pose.position, pose.anchor)  # [i, b, 3]
    subtree = carried[None, :, :, None]
    return (jnp.sum(subtree * forces[:, None], axis=2),
            jnp.sum(subtree * (spins[:, None] + jnp.cross(levers[None], forces[:, None])),
                    axis=2))


def reaction_impulses(system: Multibody, pose: TreePose, motion: TreeMotion,
                      generalized_forces, h):
    """Holonomic multipliers ``[n_hinges, 5]`` [N s, N m s] of a rigid step, at its midpoint.

    ``pose`` and ``motion`` are the step's midpoint (its mean angles and rates);
    ``generalized_forces`` ``[n_joints]`` [N m] the non-conservative forces its momenta imply,
    ``(p_{k+1} - p_k)/h - ∂L/∂θ`` (Lagrange's equations). Every hinge must transmit to its
    subtree the Newton–Euler wrench of the motion (:func:`_subtree_wrenches`). The joint
    accelerations follow from ``M θ̈ = Q - τ₀``, with ``τ₀`` the torques along the axes of the
    tree coasting at ``θ̈ = 0`` (velocity products and gravity;
    :func:`coasting_acceleration`); the wrench is the coasting one plus ``Σ_k θ̈_k`` times
    that of a unit ``θ̈_k`` (:func:`_unit_acceleration_wrenches`, whose torques along the
    axes are ``M``'s columns). Over the step ``h`` the wrench (force ``F_i``, torque ``T_i``
    about the anchor) is, in the rows of (F.1), ``λ_lin = -h F_i`` and ``λ_rot = -h (n ·
    T_i)`` for the normals ``x_a × y_b = z_b`` and ``x_a × z_b = -y_b`` (the rigid hinge has
    ``x_a = x_b``); the part of ``T_i`` along the axis is the hinge's own friction, viscous and
    motor torque, not a holonomic multiplier. The midpoint rule makes the impulse
    second-order accurate in ``h``, like the residuals it bounds.
    """
    coasting = coasting_acceleration(system, pose, motion)
    coasting_force, coasting_torque = _subtree_wrenches(system, pose, motion, coasting)
    unit_force, unit_torque = _unit_acceleration_wrenches(system, pose)
    matrix = lie.dot(pose.axis[None, :, :], unit_torque).T  # M_ik = a_i · T[k, i]
    matrix = 0.5 * (matrix + matrix.T) + jnp.diag(_shaft_inertias(system))
    accelerations = small_solve.solve_positive_definite(
        matrix, generalized_forces - lie.dot(pose.axis, coasting_torque))
    force = coasting_force + jnp.sum(accelerations[:, None, None] * unit_force, axis=0)
    torque = coasting_torque + jnp.sum(accelerations[:, None, None] * unit_torque, axis=0)
    axes = pose.child_axes
    return -h * jnp.concatenate([force, lie.dot(axes[:, :, 2], torque)[:, None],
                                 -lie.dot(axes[:, :, 1], torque)[:, None]], axis=1)
