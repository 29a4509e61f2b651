"""Rigid-limit dynamics in joint coordinates: the holonomic multipliers eliminated.

As every hinge compliance ε → 0 the regularised model of §2.3 becomes a rigid tree whose
configuration is its joint angles θ; the holonomic multipliers of (2.30), whose sensitivity to
the states grows as 1/ε, then do no work along the motions the hinges allow and drop out when
the equations of motion are projected onto those motions (Kane's method; the paper's §4.9 asks
for an inverse dynamics that survives stiff constraints). This module writes that limit as a
*variational* time-discretisation (discrete Lagrange–d'Alembert, midpoint rule), second-order
accurate and free of artificial energy drift, so that residuals computed from it vanish on the
continuous trajectory up to O(h²) — a step-consistent replacement for the impulse residuals
(3.7)-(3.8) when the hinges are stiff.

The bodies, hinges, masses, inertias, gravity, friction and motor are exactly those of the
:class:`~mb_estimation.multibody.Multibody` (maximal coordinates, appendix F): the Lagrangian is
evaluated on the body states :func:`~mb_estimation.multibody.states_from_joints` builds from
(θ, θ̇), so both formulations describe the same rig.

Non-conservative generalised impulses per step of length h (paper (F.2), (F.3), appendix F):

* viscous friction (F.2): ``-b θ̇ h``;
* motor (F.3): ``K u h``; the shaft inertia J_shaft is part of the kinetic energy;
* dry friction: ``clip(-θ̇/σ, -β, β)`` with the hinge's own regularisation
  ``σ = (4/h²) ε_rot γ`` and bound ``β = c Σ|λ|`` over the hinge's five holonomic rows, as in
  (2.31); here λ are the reaction impulses of the rigid motion (the wrench the hinge transmits to
  its subtree), which the projection otherwise never needs.

Only elementwise JAX operations and tiny unrolled solves are used: batched LAPACK calls inside a
vmap deadlock jaxlib 0.10's CPU runtime on two cores (each worker blocks on the pool it runs in).
"""

from __future__ import annotations

from dataclasses import dataclass

from mb_estimation.multibody import small_solve
from mb_estimation.multibody.constraints import hinge_holonomic, spook_gamma
from mb_estimation.multibody.state import BodyStates
from mb_estimation.multibody.system import (
    WORLD,
    Multibody,
    applied_forces,
    hinge_rate,
    kinetic_energy,
    mass_times,
    potential_energy,
    states_from_joints,
)
from mb_estimation.numerics import jax

jnp = jax.numpy


@jax.tree_util.register_dataclass
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


@jax.jit
def lagrangian(system: Multibody, angles, rates):
    """``L = T - V`` [J] of the rigid tree at joint angles [rad] and rates [rad/s] (2.3).

    The energies of the body states :func:`states_from_joints` builds (motor shafts' ``½
    J_shaft θ̇²`` included, F.3). Jitted so that the estimator's programs, which differentiate
    it many times over, trace it once (lowering the rigid-limit Jacobian program 4.5 → 3.8 s,
    benchmarks/RESULTS.md, issue 16).
    """
    state = states_from_joints(system, angles, rates)
    return kinetic_energy(system, state) - potential_energy(system, state)


def joint_momenta(system: Multibody, angles, rates):
    """Generalised momenta ``p = ∂L/∂θ̇`` ``[n_joints]`` [N m s] (the continuous Legendre map).

    Forward mode over the few joints (here and below): it compiles far faster than reverse
    mode nested inside the estimator's forward-mode Jacobians.
    """
    return jax.jacfwd(lagrangian, argnums=2)(system, angles, rates)


def joint_mass_matrix(system: Multibody, angles):
    """``M(θ) = ∂²L/∂θ̇²`` ``[n_joints, n_joints]`` [kg m²], shaft inertias included."""
    num_joints = angles.shape[-1]
    return jax.jacfwd(lambda rates: joint_momenta(system, angles, rates))(jnp.zeros(num_joints))


def solve_small(matrix, vector):
    """``matrix⁻¹ vector`` for a small symmetric positive definite ``matrix``.

    An unrolled Cholesky: no LAPACK call, which batched inside a vmap deadlocks jaxlib 0.10's
    CPU runtime.
    """
    size = matrix.shape[0]
    factor = [[None] * size for _ in range(size)]
    for i in range(size):
        for j in range(i + 1):
            value = matrix[i, j] - sum((factor[i][k] * factor[j][k] for k in range(j)), 0.0)
            factor[i][j] = jnp.sqrt(value) if i == j else value / factor[j][j]
    forward = []
    for i in range(size):
        forward.append((vector[i] - sum((factor[i][k] * forward[k] for k in range(i)), 0.0))
                       / factor[i][i])
    solution = [None] * size
    for i in reversed(range(size)):
        solution[i] = (forward[i] - sum((factor[k][i] * solution[k]
                                         for k in range(i + 1, size)), 0.0)) / factor[i][i]
    return jnp.stack(solution)


def joint_rates(system: Multibody, state: JointStates):
    """Joint rates ``θ̇ = M(θ)⁻¹ p`` [rad/s] of a joint state (the inverse Legendre map)."""
    return solve_small(joint_mass_matrix(system, state.angles), state.momenta)


def joint_states(system: Multibody, angles, rates) -> JointStates:
    """The joint state at ``angles`` [rad] moving with ``rates`` [rad/s]."""
    return JointStates(angles, joint_momenta(system, angles, rates))


def rate_basis(system: Multibody, angles):
    """``N = ∂v/∂θ̇`` ``[6 nb, n_joints]``: body velocities per unit joint rate at ``angles``.

    Its columns span the motions the rigid hinges allow (``G N = 0``).
    """
    num_joints = angles.shape[-1]
    return jax.jacfwd(
        lambda rates: states_from_joints(system, angles, rates).velocity.reshape(-1)
    )(jnp.zeros(num_joints))


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


def reaction_impulses(system: Multibody, state: BodyStates, next_state: BodyStates, h):
    """Holonomic multipliers ``[n_hinges, 5]`` [N s, N m s] of a rigid step ``x_k → x_{k+1}``.

    Every body ``b`` needs the impulse ``p_b = M_b (v_{k+1} - v_k) - h f_b`` (gravity and the
    gyroscopic term at ``x_k``, as in (3.7)); hinge ``i`` must transmit the sum over the bodies
    it carries, force ``F_i`` and torque ``T_i`` about its anchor. In the rows of (F.1) that is
    ``λ_lin = -F_i`` and ``λ_rot = -(n · T_i)`` for the two normals (unit and orthogonal at
    zero violation). The part of ``T_i`` along the axis is the hinge's own friction, viscous
    and motor torque, which is not a holonomic multiplier.
    """
    change = (next_state.velocity - state.velocity)
    needed = (mass_times(system, state, change).reshape(-1)
              - h * applied_forces(system, state)).reshape(state.num_bodies, 6)
    subtree = [{i} for i in range(len(system.hinges))]
    for i in reversed(range(len(system.hinges))):  # parent-first order: children come later
        parent = system.hinges[i].parent
        if parent != WORLD:
            subtree[parent] |= subtree[i]
    rows = []
    for i, hinge in enumerate(system.hinges):
        _, geometry = hinge_holonomic(hinge, state)
        anchor = state.position[hinge.child] + geometry.child_lever
        force = sum(needed[b, :3] for b in subtree[i])
        torque = sum(needed[b, 3:] + jnp.cross(state.position[b] - anchor, needed[b, :3])
                     for b in subtree[i])
        rows.append(jnp.concatenate([-force, -(geometry.normals @ torque)]))
    return jnp.stack(rows)


def joint_impulses(system: Multibody, state: BodyStates, next_state: BodyStates, inputs,
                   mid_rates, h):
    """Non-conservative generalised impulses ``[n_joints]`` [N m s] over one step.

    Viscous (F.2) at the mean rate, motor (F.3) with the held input, and dry friction clipped to
    its reaction-dependent bound (2.31) (see the module docstring). ``inputs`` has one entry per
    motorised hinge, in hinge order.
    """
    impulses, input_index = [], 0
    reactions = None
    for i, hinge in enumerate(system.hinges):
        impulse = -hinge.viscous * mid_rates[i] * h
        if hinge.has_motor:
            impulse = impulse + hinge.motor_gain * inputs[input_index] * h
            input_index += 1
        if hinge.has_dry_friction:
            if reactions is None:
                reactions = reaction_impulses(system, state, next_state, h)
            rate_k = hinge_rate(hinge, state)
            coefficient = (hinge.friction_coefficient
                           + hinge.stribeck_delta * jnp.exp(-hinge.stribeck_zeta * rate_k**2))
            bound = coefficient * jnp.sum(jnp.abs(reactions[i]))
            regularization = 4.0 / h**2 * hinge.compliance_rotational * spook_gamma(
                hinge.damping, h)
            impulse = impulse + jnp.clip(-mid_rates[i] / regularization, -bound, bound)
        impulses.append(impulse)
    return jnp.stack(impulses)


def variational_residuals(system: Multibody, state: JointStates, next_state: JointStates,
                          inputs, h, weights):
    """Momentum residuals of the step ``x_k → x_{k+1}`` in joint coordinates, ``[2 n_joints]``.

    Discrete Lagrange–d'Alembert with the midpoint discrete Lagrangian
    ``L_d(θ_k, θ_{k+1}) = h L((θ_k + θ_{k+1})/2, (θ_{k+1} - θ_k)/h)`` and the step's
    non-conservative impulse ``Q`` (:func:`joint_impulses`) split in halves:

        r_a = p_k + D₁L_d + Q/2        (the impulse the step's start needs)
        r_b = p_{k+1} - D₂L_d - Q/2    (the impulse its end needs)

    with ``p`` the states' momenta. These are the two discrete Legendre transforms of the
    position–momentum form; their sum is the discrete Euler–Lagrange equation. They play the
    parts of (3.7) and (3.8), vanish on the discrete motion and to O(h²) on the continuous rigid
    motion. Both are multiplied by ``weights`` ``[n_joints, n_joints]``, normally
    :func:`body_impulse_norm_weights` at the recorded angles (data, so they carry no
    derivatives). [N m s]
    """
    a0, a1 = state.angles, next_state.angles

    def discrete_lagrangian(first, second):
        return h * lagrangian(system, 0.5 * (first + second), (second - first) / h)

    d1, d2 = jax.jacfwd(discrete_lagrangian, argnums=(0, 1))(a0, a1)
    mid_rates = (a1 - a0) / h
    if any(hinge.has_dry_friction for hinge in system.hinges):  # needs the bodies' motion
        bodies = states_from_joints(system, a0, joint_rates(system, state))
        next_bodies = states_from_joints(system, a1, joint_rates(system, next_state))
    else:
        bodies = next_bodies = None
    half = 0.5 * joint_impulses(system, bodies, next_bodies, inputs, mid_rates, h)
    return jnp.concatenate([weights @ (state.momenta + d1 + half),
                            weights @ (next_state.momenta - d2 - half)])


# Newton iterations of the forward variational step: from the explicit guess θ + h θ̇ the error
# falls quadratically; three reach round-off at the steps the predictions use (≤ 1 ms).
NEWTON_ITERATIONS = 3


def variational_step(system: Multibody, state: JointStates, inputs, h,
                     newton_iterations: int = NEWTON_ITERATIONS) -> JointStates:
    """The rigid tree's next joint state: the step of :func:`variational_residuals` forward.

    Solves ``r_a = 0``, ``r_b = 0`` for ``(θ_{k+1}, p_{k+1})`` by Newton's method from
    ``(θ_k + h θ̇_k, p_k)``, the input held over the step. Second-order accurate, like the
    residuals it solves: the forward simulator of the model the consistent path fits.
    """
    joints = state.angles.shape[-1]
    unweighted = jnp.eye(joints)

    def residual(unknowns):
        following = JointStates(unknowns[:joints], unknowns[joints:])
        return variational_residuals(system, state, following, inputs, h, unweighted)

    def newton(_, unknowns):
        return unknowns - small_solve.solve_small(jax.jacfwd(residual)(unknowns),
                                                  residual(unknowns))

    guess = jnp.concatenate([state.angles + h * joint_rates(system, state), state.momenta])
    solution = jax.lax.fori_loop(0, newton_iterations, newton, guess)
    return JointStates(solution[:joints], solution[joints:])
