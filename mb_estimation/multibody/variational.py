"""The rigid tree's time step in joint coordinates: variational residuals and their solve.

The rigid limit of :mod:`~mb_estimation.multibody.joint_space` written as a *variational*
time-discretisation (discrete Lagrange–d'Alembert, midpoint rule), second-order accurate and
free of artificial energy drift, so that residuals computed from it vanish on the continuous
trajectory up to O(h²) — a step-consistent replacement for the impulse residuals (3.7)-(3.8)
when the hinges are stiff (:func:`variational_residuals`); solved forward, it is the rigid
model's simulator (:func:`variational_step`, :func:`held_steps`).

Non-conservative generalised impulses per step of length h (paper (F.2), (F.3), appendix F):

* viscous friction (F.2): ``-b θ̇ h``;
* motor (F.3): ``K u h``; the shaft inertia J_shaft is part of the kinetic energy;
* torque ripple (cogging): ``τ_r(θ̄) h`` at the step's mid angle θ̄;
* dry friction: ``clip(-θ̇/σ, -β, β)`` with the hinge's own regularisation
  ``σ = (4/h²) ε_rot γ`` and bound ``β = c Σ|λ| + τ_C h`` over the hinge's five holonomic rows,
  as in (2.31), ``τ_C`` a Coulomb torque that does not grow with the load; here λ are the
  reaction impulses of the rigid motion (the wrench the hinge transmits to its subtree), which
  the projection otherwise never needs. They are taken at the step's midpoint by Newton–Euler,
  like the rest of the step (:func:`~mb_estimation.multibody.joint_space.reaction_impulses`):
  second-order accurate, and one pose per step instead of three.
"""

from __future__ import annotations

from mb_estimation.multibody import small_solve
from mb_estimation.multibody.constraints import spook_gamma
from mb_estimation.multibody.joint_space import (
    JointStates,
    joint_rates,
    lagrangian_angle_gradient,
    momenta_in_pose,
    reaction_impulses,
    tree_motion,
    tree_pose,
)
from mb_estimation.multibody.system import Multibody, ripple_torque
from mb_estimation.numerics import jax, traced_once

jnp = jax.numpy


def joint_impulses(system: Multibody, reactions, mid_angles, mid_rates, inputs, h):
    """Non-conservative generalised impulses ``[n_joints]`` [N m s] over one step.

    Viscous (F.2) at the mean rate ``mid_rates``, motor (F.3) with the held input, the torque
    ripple (:func:`~mb_estimation.multibody.system.ripple_torque`) at the mid angles
    ``mid_angles``, and dry friction clipped to its bound: reaction-dependent (2.31) (see the
    module docstring) plus the hinge's Coulomb torque times h, with the Stribeck term at the mean
    rate and the step's ``reactions`` (:func:`reaction_impulses`; only read for hinges with dry
    friction). ``inputs`` has one entry per motorised hinge, in hinge order.
    """
    impulses, input_index = [], 0
    for i, hinge in enumerate(system.hinges):
        impulse = (ripple_torque(hinge, mid_angles[i]) - hinge.viscous * mid_rates[i]) * h
        if hinge.has_motor:
            impulse = impulse + hinge.motor_gain * inputs[input_index] * h
            input_index += 1
        if hinge.has_dry_friction:
            coefficient = (hinge.friction_coefficient + hinge.stribeck_delta
                           * jnp.exp(-hinge.stribeck_zeta * mid_rates[i]**2))
            bound = (coefficient * jnp.sum(jnp.abs(reactions[i]))
                     + hinge.coulomb_torque * h)
            regularization = 4.0 / h**2 * hinge.compliance_rotational * spook_gamma(
                hinge.damping, h)
            # A band of zero width at zero rate is closed: no slope either way (a clip would
            # take half of each side's at the tie, as if it were open).
            impulse = impulse + jnp.where(
                (bound == 0.0) & (mid_rates[i] == 0.0), 0.0,
                jnp.clip(-mid_rates[i] / regularization, -bound, bound))
        impulses.append(impulse)
    return jnp.stack(impulses)


def input_impulse_gains(system: Multibody, h):
    """``∂Q/∂u`` ``[n_joints, n_inputs]`` [N m s per input unit] of :func:`joint_impulses`.

    The impulses are affine in the held input: the motor's ``K u h`` (F.3) on each motorised
    hinge's row, in hinge order, nothing elsewhere.
    """
    motorised = [i for i, hinge in enumerate(system.hinges) if hinge.has_motor]
    gains = jnp.zeros((len(system.hinges), len(motorised)))
    for column, i in enumerate(motorised):
        gains = gains.at[i, column].set(system.hinges[i].motor_gain * h)
    return gains


def variational_residuals(system: Multibody, state: JointStates, next_state: JointStates,
                          inputs, h, weights):
    """Momentum residuals of the step ``x_k → x_{k+1}`` in joint coordinates, ``[2 n_joints]``.

    Discrete Lagrange–d'Alembert with the midpoint discrete Lagrangian
    ``L_d(θ_k, θ_{k+1}) = h L((θ_k + θ_{k+1})/2, (θ_{k+1} - θ_k)/h)`` and the step's
    non-conservative impulse ``Q`` (:func:`joint_impulses`) split in halves:

        r_a = p_k + D₁L_d + Q/2        (the impulse the step's start needs)
        r_b = p_{k+1} - D₂L_d - Q/2    (the impulse its end needs)

    with ``p`` the states' momenta and ``D₁L_d = (h/2) ∂L/∂θ - ∂L/∂θ̇``, ``D₂L_d = (h/2) ∂L/∂θ +
    ∂L/∂θ̇`` at the midpoint (in closed form: :func:`lagrangian_angle_gradient`,
    :func:`joint_momenta`). These are the two discrete Legendre transforms of the
    position–momentum form; their sum is the discrete Euler–Lagrange equation. They play the
    parts of (3.7) and (3.8), vanish on the discrete motion and to O(h²) on the continuous rigid
    motion. Both are multiplied by ``weights`` ``[n_joints, n_joints]``, normally
    :func:`body_impulse_norm_weights` at the recorded angles (data, so they carry no
    derivatives). [N m s]
    """
    a0, a1 = state.angles, next_state.angles
    mid_rates = (a1 - a0) / h
    middle = tree_pose(system, 0.5 * (a0 + a1))
    mid_motion = tree_motion(system, middle, mid_rates)
    angle_gradient = 0.5 * h * lagrangian_angle_gradient(system, middle, mid_motion)
    rate_gradient = momenta_in_pose(system, middle, mid_motion, mid_rates)
    d1, d2 = angle_gradient - rate_gradient, angle_gradient + rate_gradient
    reactions = None
    if _has_dry_friction(system):  # needs the bodies' motion
        forces = (next_state.momenta - state.momenta) / h - 2.0 / h * angle_gradient
        reactions = reaction_impulses(system, middle, mid_motion, forces, h)
    half = 0.5 * joint_impulses(system, reactions, 0.5 * (a0 + a1), mid_rates, inputs, h)
    return jnp.concatenate([weights @ (state.momenta + d1 + half),
                            weights @ (next_state.momenta - d2 - half)])


# The forward variational step's iterations from the explicit guess θ + h θ̇. Without dry
# friction, chord (simplified Newton) iterations: the residuals' matrix taken once, at the
# guess, and reused; the error falls by a factor O(h) each. Five reach round-off at the steps
# the predictions and the bound use (≤ 2 ms: 2 s of a driven swing within 9e-15 rad of eight
# full Newton iterations at 2 ms, 2e-15 at 1 ms; 5e-9 at the design search's 10 ms) at half
# the cost of three Newton iterations, each of which differentiates the residuals again. With
# dry friction, whose clipped impulse changes slope where a hinge sticks or slips within the
# step, Newton's method: the error falls quadratically once the regime is found, three reach
# round-off at ≤ 1 ms.
CHORD_ITERATIONS = 5
NEWTON_ITERATIONS = 3
#: ... the chord iterations stop early once an update moves no angle by more than this
#: (relative, at least 1 rad): the next would move it by a fraction of that, below round-off
#: (at ≤ 0.5 ms the fourth update is about 1e-14, the fifth 4e-16).
CHORD_TOLERANCE = 1e-13


def variational_step(system: Multibody, state: JointStates, inputs, h, locked=None
                     ) -> JointStates:
    """The rigid tree's next joint state: the step of :func:`variational_residuals` forward.

    Solves ``r_a = 0``, ``r_b = 0`` for ``(θ_{k+1}, p_{k+1})`` from ``(θ_k + h θ̇_k, p_k)``, the
    input held over the step: by chord iterations, or where a hinge has dry friction by
    Newton's method (:data:`CHORD_ITERATIONS`). Second-order accurate, like the
    residuals it solves: the forward simulator of the model the consistent path fits.
    Forward-mode derivatives are those of the solution (implicit function theorem: ``d x_{k+1}
    = -(∂r/∂x_{k+1})⁻¹ d r`` with ``d r`` the residuals' change at fixed ``x_{k+1}``), not
    of the iterations: the same at convergence, and a fraction of their cost.

    ``locked [n_joints]`` (1 where a joint is locked, else 0; None: none is): a locked joint
    keeps its angle, whatever torque that takes (its rows ``r_a`` carry that unknown torque,
    so they give way to ``θ_{k+1} = θ_k``). Start it at rest
    (:func:`~mb_estimation.multibody.joint_space.rigid_state`).
    """
    return _solved_step(system, state, inputs, h,
                        _no_joint_locked(state) if locked is None else locked)


def held_steps(system: Multibody, state: JointStates, inputs, h, substeps, locked=None
               ) -> JointStates:
    """``substeps`` :func:`variational_step` s of ``h`` [s] with ``inputs`` held (one sample).

    ``locked``: as :func:`variational_step` takes it.
    """
    return jax.lax.fori_loop(
        0, substeps, lambda _, current: variational_step(system, current, inputs, h, locked),
        state)


def rigid_chunk(step, system: Multibody, state: JointStates, inputs, locked):
    """The rigid tree driven by ``inputs [n, c]``: its last state, the state after each input.

    Each input held for ``step = (h, substeps)``: ``substeps`` :func:`variational_step` s of
    ``h`` [s] (:func:`held_steps`), the ``locked`` joints ``[n_joints]`` (1 where locked) kept
    where they are; the states :class:`JointStates` ``[n, n_joints]`` (angles [rad], momenta).
    The plain simulation of the open-loop replays, the predictions and the simulation-error
    stage, whose Jacobians are taken along the states it returns (one step an input:
    :func:`step_jacobian`): one program for all of them.
    """
    h, substeps = step

    def sample(current, held):
        current = held_steps(system, current, held, h, substeps, locked)
        return current, current

    return jax.lax.scan(sample, state, inputs)


def _no_joint_locked(state: JointStates):
    return jnp.zeros(state.angles.shape[-1])


def _step_residual(system: Multibody, state: JointStates, inputs, h, locked, unknowns):
    """:func:`variational_residuals` (unweighted) at the next state ``unknowns = (θ, p)``.

    A ``locked`` joint's ``r_a`` row is ``θ_{k+1} - θ_k`` instead (:func:`variational_step`).
    """
    joints = state.angles.shape[-1]
    following = JointStates(unknowns[:joints], unknowns[joints:])
    residual = variational_residuals(system, state, following, inputs, h, jnp.eye(joints))
    kept = jnp.where(locked > 0.5, following.angles - state.angles, residual[:joints])
    return jnp.concatenate([kept, residual[joints:]])


def _angle_step(system: Multibody, state: JointStates, inputs, h, locked, angles):
    """The step without dry friction in its next ``angles`` alone: ``(r_a, p_{k+1})``.

    Without dry friction ``r_a`` does not involve ``p_{k+1}`` and ``r_b = 0`` gives it
    explicitly, ``p_{k+1} = D₂L_d + Q/2`` (:func:`variational_residuals`); so only the ``n``
    angles are unknown, and the matrix of the step's iterations is ``n × n``. A ``locked``
    joint's ``r_a`` row is ``θ_{k+1} - θ_k`` (:func:`_step_residual`).
    """
    joints = state.angles.shape[-1]
    residual = variational_residuals(system, state, JointStates(angles, jnp.zeros_like(angles)),
                                     inputs, h, jnp.eye(joints))
    kept = jnp.where(locked > 0.5, angles - state.angles, residual[:joints])
    return jnp.concatenate([kept, -residual[joints:]])


def _matrix_and_value(residual, step, unknowns):
    """``∂residual(*step, u)/∂u`` at ``unknowns`` and its value, evaluated once."""
    def twice(at):
        value = residual(*step, at)
        return value, value

    return jax.jacfwd(traced_once(twice, unknowns), has_aux=True)(unknowns)


def _has_dry_friction(system: Multibody) -> bool:
    return any(hinge.has_dry_friction for hinge in system.hinges)


@jax.custom_jvp
def _solved_step(system: Multibody, state: JointStates, inputs, h, locked) -> JointStates:
    """:func:`variational_step`'s iterations (:data:`CHORD_ITERATIONS`).

    Chord iterations on the angles with the matrix of :func:`_angle_step` at the guess, the
    momenta following each iterate to first order with it (the same iterates as chord steps on
    :func:`_step_residual` with its block-triangular matrix); with dry friction, Newton's on
    the angles and momenta together.
    """
    joints = state.angles.shape[-1]
    step = (system, state, inputs, h, locked)
    guess = state.angles + h * joint_rates(system, state, locked)
    if _has_dry_friction(system):
        def newton(_, unknowns):
            matrix, residual = _matrix_and_value(_step_residual, step, unknowns)
            return unknowns - small_solve.solve_small(matrix, residual)

        solution = jax.lax.fori_loop(0, NEWTON_ITERATIONS, newton,
                                     jnp.concatenate([guess, state.momenta]))
        return JointStates(solution[:joints], solution[joints:])
    matrix, balance = _matrix_and_value(_angle_step, step, guess)
    factored, momenta_in_angles = small_solve.lu_factor(matrix[:joints]), matrix[joints:]

    def updated(count, angles, balance):
        change = small_solve.lu_solve(factored, balance[:joints])
        return (count + 1, JointStates(angles - change,
                                       balance[joints:] - momenta_in_angles @ change),
                jnp.max(jnp.abs(change) / jnp.maximum(jnp.abs(angles), 1.0)))

    def chord(carry):
        count, iterate, _ = carry
        return updated(count, iterate.angles, _angle_step(*step, iterate.angles))

    def unconverged(carry):
        count, _, change = carry
        return (count < CHORD_ITERATIONS) & (change > CHORD_TOLERANCE)

    # The first iteration's balance at the guess came with the matrix.
    return jax.lax.while_loop(unconverged, chord, updated(0, guess, balance))[1]


def _linearized(function, primals, tangents, unknowns):
    """``function(*primals, unknowns)``'s change along ``tangents`` and its matrix in ``unknowns``.

    One linearisation at the solution serves both (its value computed once). ``tangents`` as a
    rule with ``symbolic_zeros`` gets them: a leaf whose tangent is a
    :class:`~jax.custom_derivatives.SymbolicZero` (the recorded input, the step, every part of
    the system no free value reaches) is held constant instead of carrying zeros through the
    whole tree algebra in every direction. Returns ``(change, matrix [rows, unknowns])``.
    """
    leaves, tree = jax.tree_util.tree_flatten(primals)
    tangent_leaves = tree.flatten_up_to(tangents)
    moving = [i for i, tangent in enumerate(tangent_leaves)
              if not isinstance(tangent, jax.custom_derivatives.SymbolicZero)]

    def of_moving(moving_leaves, unknowns):
        current = list(leaves)
        for index, leaf in zip(moving, moving_leaves, strict=True):
            current[index] = leaf
        return function(*jax.tree_util.tree_unflatten(tree, current), unknowns)

    moving_leaves = [leaves[i] for i in moving]
    _, linear = jax.linearize(of_moving, moving_leaves, unknowns)
    still = [jnp.zeros_like(leaf) for leaf in moving_leaves]
    change = linear([tangent_leaves[i] for i in moving], jnp.zeros_like(unknowns))
    matrix = jax.vmap(lambda direction: linear(still, direction), out_axes=1)(
        jnp.eye(unknowns.shape[0]))
    return change, matrix


def _solution_change(matrix, change, dry_friction: bool):
    """The solved step's change ``[2 n_joints, ...]`` from its residuals' (implicit function).

    ``change``: the residuals' change at the fixed solution ``[rows, ...]``, ``matrix``: their
    matrix in the unknowns: with ``dry_friction`` the unknowns are ``(θ_{k+1}, p_{k+1})``
    (:func:`_step_residual`) and ``d x = -matrix⁻¹ change``; without, the angles alone
    (:func:`_angle_step`), the momenta following explicitly.
    """
    if dry_friction:
        return -small_solve.solve_small(matrix, change)
    joints = matrix.shape[1]
    moved = -small_solve.solve_small(matrix[:joints], change[:joints])
    return jnp.concatenate([moved, change[joints:] + matrix[joints:] @ moved])


def _step_residual_and_unknowns(system: Multibody, solved: JointStates):
    """The residuals :func:`_solved_step` zeroes (unknowns last) and its unknowns at ``solved``."""
    if _has_dry_friction(system):
        return _step_residual, jnp.concatenate([solved.angles, solved.momenta])
    return _angle_step, solved.angles


def _solved_step_derivative(primals, tangents):
    solved = _solved_step(*primals)
    joints = solved.angles.shape[-1]
    residual, unknowns = _step_residual_and_unknowns(primals[0], solved)
    change, matrix = _linearized(residual, primals, tangents, unknowns)
    moved = _solution_change(matrix, change, _has_dry_friction(primals[0]))
    return solved, JointStates(moved[:joints], moved[joints:])


_solved_step.defjvp(_solved_step_derivative, symbolic_zeros=True)


def step_jacobian(system_of, values, state: JointStates, solved: JointStates, inputs, h,
                  locked) -> jax.Array:
    """The Jacobian of :func:`variational_step` of ``system_of(values)`` at a step it solved.

    ``system_of``: the free ``values [p]`` to the :class:`Multibody`; ``solved``: the step's
    result from ``state`` (:func:`rigid_chunk`'s). Returns ``∂(θ_{k+1}, p_{k+1})/∂(θ_k, p_k,
    values)`` ``[2 n_joints, 2 n_joints + p]``: the residuals' Jacobian at the solution, then
    the implicit function theorem, as the step's forward derivative has it. A simulation
    carries its sensitivities step by step with it (forward sensitivities) along the states a
    plain run stored: no solve is traced with the derivatives, and the program compiles in a
    third of the time of the solve and its Jacobian together (measured on a lane of the
    simulation-error stage).
    """
    system = system_of(values)
    residual, unknowns = _step_residual_and_unknowns(system, solved)

    def balance(angles, momenta, free, at):
        return residual(system_of(free), JointStates(angles, momenta), inputs, h, locked, at)

    at = (state.angles, state.momenta, values, unknowns)
    in_angles, in_momenta, in_values, matrix = jax.jacfwd(traced_once(balance, *at),
                                                          argnums=(0, 1, 2, 3))(*at)
    change = jnp.concatenate([in_angles, in_momenta, in_values], axis=1)
    return _solution_change(matrix, change, _has_dry_friction(system))
