"""Residuals of the estimation problem (3.15) and their per-step Jacobian blocks (§3.6, app. B).

The unknowns of one recording are the states ``x_0..x_{n-1}`` on the grid; all recordings share
the free parameters χ. How a state is written and which dynamics residuals connect consecutive
states is the structure's *formulation* (:mod:`mb_estimation.estimation.formulations`): the
paper's maximal coordinates, or joint coordinates in the rigid limit. Residual block ``k``
(``m = impulse rows + n_joints``) stacks

* ``√κ Δp_k``: for ``k = 0`` the initial-state residual ((3.16)-(3.17) in maximal coordinates),
  for ``k ≥ 1`` the dynamics residuals of the transition ``x_{k-1} → x_k`` ((3.7)-(3.8), exact
  ⊟, see :func:`~mb_estimation.multibody.impulse_residuals`; or the joint-space momentum
  residuals of :func:`~mb_estimation.multibody.variational.variational_residuals`);
* ``Δy_k``: the observation residual (3.6), ``wrap(h(x_k) - y_k)`` (weight ``R⁻¹ = I``), zero
  where ``y_k`` is missing.

The weights are folded in (``Ω⁻¹ = κI`` → factor ``√κ``), so the cost is ``Σ ‖r_k‖²``. Block
``k`` depends on ``(x_{k-1}, x_k, χ)`` only; its Jacobian is three dense blocks ``∂r_k/∂δx_{k-1}``,
``∂r_k/∂δx_k`` and ``∂r_k/∂δχ``, computed with forward-mode AD in the tangent spaces (``x ⊞ δ``,
``χ ⊞ δχ``) and vmapped over ``k``. The full Jacobian is never formed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mb_estimation.estimation.formulations import (
    LOCKED_TORQUE_WEIGHT,
    Formulation,
    MaximalCoordinates,
    tangent_columns,
)
from mb_estimation.estimation.parameters import FreeParameters, parameters_boxplus
from mb_estimation.numerics import jax, pytree_dataclass, run_once, traced_once
from mb_estimation.rigs import Rig

jnp = jax.numpy

#: The weight of a locked joint's angle residuals relative to a moving joint's, the inverse of
#: its torque residuals' weight: a joint held still by an unrecorded torque is where it is
#: held; free to move at the noise's price, the fit moved it to absorb the other joints' noise,
#: and its rate carried that motion into the states.
LOCKED_ANGLE_WEIGHT = 1.0 / LOCKED_TORQUE_WEIGHT


@dataclass(frozen=True)
class ModelStructure:
    """What the estimator compiles against (static, hashable): rig, free layout, formulation."""

    rig: Rig
    free: FreeParameters
    formulation: Formulation = field(default_factory=MaximalCoordinates)

    def system(self, fixed, free_values):
        """The multibody system for the fixed and free parameter values."""
        return self.rig.build({**fixed, **free_values})


@pytree_dataclass
@dataclass(frozen=True)
class StepData:
    """Data of one recording on the grid, as arrays (see :class:`~mb_estimation.signals.GridData`).

    ``measured_angles [n, n_joints]`` [rad], ``inputs [n-1, n_inputs]`` (held means per step),
    ``observed [n]`` (1 or 0), ``dt`` [s] and ``sqrt_kappa`` (``√κ``) as 0-d arrays, ``locked
    [n_joints]`` (1 where the recording holds a joint still, else 0).
    """

    measured_angles: jax.Array
    inputs: jax.Array
    observed: jax.Array
    dt: jax.Array
    sqrt_kappa: jax.Array
    locked: jax.Array


@pytree_dataclass
@dataclass(frozen=True)
class Linearization:
    """Residual blocks and their Jacobian blocks for one recording.

    ``residuals [n, m]``; ``previous [n, m, s]`` = ``∂r_k/∂δx_{k-1}`` (zero for ``k = 0``);
    ``current [n, m, s]`` = ``∂r_k/∂δx_k``; ``parameters [n, m, p]`` = ``∂r_k/∂δχ``, with
    ``s = 12 nb`` the state tangent dimension and ``p`` the dimension of ``δχ``.
    """

    residuals: jax.Array
    previous: jax.Array
    current: jax.Array
    parameters: jax.Array


def observation_residuals(structure: ModelStructure, system, state, measured_angles, observed,
                          locked):
    """``Δy = wrap(h(x) - y)`` (3.6) [rad], wrapped to (-π, π], times the ``observed`` flag.

    A ``locked`` joint's weighs :data:`LOCKED_ANGLE_WEIGHT` times a moving one's: held still
    (at its median angle), it stays there rather than move to absorb the other joints' noise.
    """
    difference = structure.formulation.observe(system, state) - measured_angles
    weights = jnp.where(locked > 0.5, LOCKED_ANGLE_WEIGHT, 1.0)
    return jnp.arctan2(jnp.sin(difference), jnp.cos(difference)) * weights * observed


def initial_block(structure: ModelStructure, fixed, free_values, state, measured_angles,
                  observed, dt, sqrt_kappa, locked):
    """Residual block 0: ``[√κ Δp_0; Δy_0]`` (``Δp_0``: (3.16)-(3.17), or zero in joints)."""
    system = structure.system(fixed, free_values)
    impulse = structure.formulation.initial_residual(system, state, dt)
    observation = observation_residuals(structure, system, state, measured_angles, observed,
                                        locked)
    return jnp.concatenate([sqrt_kappa * impulse, observation])


def transition_block(structure: ModelStructure, fixed, free_values, previous, current, inputs,
                     measured_angles, observed, dt, sqrt_kappa, locked):
    """Residual block k ≥ 1: ``[√κ Δp_k; Δy_k]`` from ``(x_{k-1}, x_k, χ)``."""
    system = structure.system(fixed, free_values)
    impulse = structure.formulation.transition_residual(system, previous, current, inputs, dt,
                                                        measured_angles, locked)
    observation = observation_residuals(structure, system, current, measured_angles, observed,
                                        locked)
    return jnp.concatenate([sqrt_kappa * impulse, observation])


def transition_residuals(structure: ModelStructure, fixed, free_values, previous, current,
                         inputs, measured_angles, observed, dt, sqrt_kappa, locked):
    """Residual blocks ``[c, m]`` of ``c`` transitions (a chunk, or all of a recording).

    Transition ``j`` goes from ``previous[j]`` to ``current[j]`` under ``inputs[j]`` and is
    observed through ``measured_angles[j]`` where ``observed[j]``.
    """
    def block(previous, current, inputs, measured, observed):
        return transition_block(structure, fixed, free_values, previous, current, inputs,
                                measured, observed, dt, sqrt_kappa, locked)

    return jax.vmap(block)(previous, current, inputs, measured_angles, observed)


def recording_residuals(structure: ModelStructure, fixed, free_values, states, data: StepData):
    """All residual blocks ``[n, m]`` of one recording."""
    first = initial_block(structure, fixed, free_values, states[0], data.measured_angles[0],
                          data.observed[0], data.dt, data.sqrt_kappa, data.locked)
    rest = transition_residuals(structure, fixed, free_values, states[:-1], states[1:],
                                data.inputs, data.measured_angles[1:], data.observed[1:],
                                data.dt, data.sqrt_kappa, data.locked)
    return jnp.concatenate([first[None], rest])


@pytree_dataclass
@dataclass(frozen=True)
class JacobianParts:
    """Residual blocks and their Jacobian blocks, the state columns by part, ``[c, m, ·]``.

    ``previous_configuration``, ``previous_velocity``, ``current_configuration`` and
    ``current_velocity`` are ``∂r/∂δq`` and ``∂r/∂δv`` of both states (``[c, m, s/2]`` each);
    ``parameters`` is ``∂r/∂δχ``. The compiled model programs return them so, and the
    :class:`Linearization`'s columns are formed outside (:func:`joined`, or on the host in
    ``recording_blocks.linearization``): interleaved inside the program, they made XLA compile
    the transition program 1.5× longer (10.8 against 7.0 s, measured).
    """

    residuals: jax.Array
    previous_configuration: jax.Array
    previous_velocity: jax.Array
    current_configuration: jax.Array
    current_velocity: jax.Array
    parameters: jax.Array


def joined(formulation: Formulation, parts: JacobianParts) -> Linearization:
    """:class:`Linearization` of ``parts``: the state columns in the formulation's ⊞ layout."""
    return Linearization(
        residuals=parts.residuals,
        previous=tangent_columns(formulation, parts.previous_configuration,
                                 parts.previous_velocity),
        current=tangent_columns(formulation, parts.current_configuration,
                                parts.current_velocity),
        parameters=parts.parameters)


def _jacobians_by_part(function, half_size, num_parameters, passes):
    """Value and Jacobian blocks of ``function(δq_prev, δv_prev, δq_cur, δv_cur, δχ)`` at zero.

    ``passes``: groups of argument indices, one forward pass each (the formulation's
    ``jacobian_passes``). A pass carries tangents only through the operations that depend on its
    arguments: in maximal coordinates most of the residual depends on the previous
    configuration alone (mass matrix, constraint rows) and the velocities enter almost linearly,
    so one pass per argument made the Jacobian 2.3× cheaper than one over all 61 directions
    (312 → 136 ms, measured).
    Returns ``(value, ∂/∂δq_prev, ∂/∂δv_prev, ∂/∂δq_cur, ∂/∂δv_cur, ∂/∂δχ)`` (see
    :class:`JacobianParts`).
    """
    half = jnp.zeros(half_size)
    zeros = (half, half, half, half, jnp.zeros(num_parameters))
    function = traced_once(function, *zeros)  # its primitives: the passes trace faster

    def with_value(*arguments):
        value = function(*arguments)
        return value, value  # the value as auxiliary output: traced with a pass, not apart

    parts = {}
    for group in passes:
        jacobians, value = jax.jacfwd(with_value, argnums=group, has_aux=True)(*zeros)
        parts.update(zip(group, jacobians, strict=True))
    return (value, *(parts[argument] for argument in range(5)))


@run_once
def first_jacobians(structure: ModelStructure, fixed, free_values, state, measured_angles,
                    observed, dt, sqrt_kappa, locked) -> JacobianParts:
    """Block 0 and its Jacobian blocks (no previous state: those columns are zero).

    Evaluated once a linearisation, so compiled as a program that runs a few times
    (:func:`~mb_estimation.numerics.run_once`): in maximal coordinates, where block 0 goes
    through the stiff projection onto the constraints, it compiles in 0.43 s instead of 1.86 s
    and runs in 1.2 ms instead of 0.35 ms (furuta.yaml's 11 free parameters, one core,
    measured).
    """
    free = structure.free
    formulation = structure.formulation

    def first(_configuration, _velocity, configuration, velocity, delta_parameters):
        values = parameters_boxplus(free, free_values, delta_parameters)
        return initial_block(structure, fixed, values,
                             formulation.moved(state, configuration, velocity), measured_angles,
                             observed, dt, sqrt_kappa, locked)

    # One forward pass: block 0 is evaluated once per linearisation, so its run time does not
    # matter, and one pass compiles in a third of the time of three.
    return JacobianParts(*_jacobians_by_part(first, formulation.half_size_of(state), free.size,
                                             passes=((0, 1, 2, 3, 4),)))


def transition_jacobians(structure: ModelStructure, fixed, free_values, previous, current,
                         inputs, measured_angles, observed, dt, sqrt_kappa, locked
                         ) -> JacobianParts:
    """Residual and Jacobian blocks of ``c`` transitions (see :func:`transition_residuals`)."""
    free = structure.free
    formulation = structure.formulation
    moved = formulation.moved
    half_size = formulation.half_size_of(previous[0])

    def transition(previous, current, inputs, measured, observed):
        def residual(previous_configuration, previous_velocity, current_configuration,
                     current_velocity, delta_parameters):
            values = parameters_boxplus(free, free_values, delta_parameters)
            return transition_block(
                structure, fixed, values,
                moved(previous, previous_configuration, previous_velocity),
                moved(current, current_configuration, current_velocity),
                inputs, measured, observed, dt, sqrt_kappa, locked)

        return JacobianParts(*_jacobians_by_part(residual, half_size, free.size,
                                                 formulation.jacobian_passes))

    return jax.vmap(transition)(previous, current, inputs, measured_angles, observed)


def linearize(structure: ModelStructure, fixed, free_values, states,
              data: StepData) -> Linearization:
    """Residual blocks and their Jacobian blocks at ``(states, χ)`` for a whole recording."""
    first = first_jacobians(structure, fixed, free_values, states[0], data.measured_angles[0],
                            data.observed[0], data.dt, data.sqrt_kappa, data.locked)
    transitions = transition_jacobians(structure, fixed, free_values, states[:-1], states[1:],
                                       data.inputs, data.measured_angles[1:], data.observed[1:],
                                       data.dt, data.sqrt_kappa, data.locked)
    both = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a[None], b]), first,
                                  transitions)
    return joined(structure.formulation, both)
