"""Residuals of the estimation problem (3.15) and their per-step Jacobian blocks (§3.6, app. B).

The unknowns of one recording are the states ``x_0..x_{n-1}`` on the grid; all recordings share
the free parameters χ. Residual block ``k`` (``m = 12 nb + n_joints`` rows) stacks

* ``√κ Δp_k``: for ``k = 0`` the initial-state residual (3.16)-(3.17), for ``k ≥ 1`` the impulse
  residuals (3.7)-(3.8) of the transition ``x_{k-1} → x_k`` (exact ⊟, see
  :func:`~mb_estimation.multibody.impulse_residuals`);
* ``Δy_k``: the observation residual (3.6), ``wrap(h(x_k) - y_k)`` (weight ``R⁻¹ = I``), zero
  where ``y_k`` is missing.

The weights are folded in (``Ω⁻¹ = κI`` → factor ``√κ``), so the cost is ``Σ ‖r_k‖²``. Block
``k`` depends on ``(x_{k-1}, x_k, χ)`` only; its Jacobian is three dense blocks ``∂r_k/∂δx_{k-1}``,
``∂r_k/∂δx_k`` and ``∂r_k/∂δχ``, computed with forward-mode AD in the tangent spaces (``x ⊞ δ``,
``χ ⊞ δχ``) and vmapped over ``k``. The full Jacobian is never formed.
"""

from __future__ import annotations

from dataclasses import dataclass

from mb_estimation.estimation.parameters import FreeParameters, parameters_boxplus
from mb_estimation.multibody import (
    BodyStates,
    impulse_residuals,
    initial_state_residual,
    joint_angles,
)
from mb_estimation.multibody.state import state_boxplus_parts
from mb_estimation.numerics import jax
from mb_estimation.rigs import Rig

jnp = jax.numpy


@dataclass(frozen=True)
class ModelStructure:
    """What the estimator compiles against (static, hashable): the rig and the free layout."""

    rig: Rig
    free: FreeParameters

    def system(self, fixed, free_values):
        """The multibody system for the fixed and free parameter values."""
        return self.rig.build({**fixed, **free_values})


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class StepData:
    """Data of one recording on the grid, as arrays (see :class:`~mb_estimation.signals.GridData`).

    ``measured_angles [n, n_joints]`` [rad], ``inputs [n-1, n_inputs]`` (held means per step),
    ``observed [n]`` (1 or 0), ``dt`` [s] and ``sqrt_kappa`` (``√κ``) as 0-d arrays.
    """

    measured_angles: jax.Array
    inputs: jax.Array
    observed: jax.Array
    dt: jax.Array
    sqrt_kappa: jax.Array


@jax.tree_util.register_dataclass
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


def observation_residuals(system, state: BodyStates, measured_angles, observed):
    """``Δy = wrap(h(x) - y)`` (3.6) [rad], wrapped to (-π, π], times the ``observed`` flag."""
    difference = joint_angles(system, state) - measured_angles
    return jnp.arctan2(jnp.sin(difference), jnp.cos(difference)) * observed


def initial_block(structure: ModelStructure, fixed, free_values, state, data: StepData):
    """Residual block 0: ``[√κ Δp_0 (3.16)-(3.17); Δy_0]``."""
    system = structure.system(fixed, free_values)
    impulse = initial_state_residual(system, state, data.dt)
    observation = observation_residuals(system, state, data.measured_angles[0], data.observed[0])
    return jnp.concatenate([data.sqrt_kappa * impulse, observation])


def transition_block(structure: ModelStructure, fixed, free_values, previous, current, inputs,
                     measured_angles, observed, data: StepData):
    """Residual block k ≥ 1: ``[√κ Δp_k (3.7)-(3.8); Δy_k]`` from ``(x_{k-1}, x_k, χ)``."""
    system = structure.system(fixed, free_values)
    impulse = impulse_residuals(system, previous, current, inputs, data.dt)
    observation = observation_residuals(system, current, measured_angles, observed)
    return jnp.concatenate([data.sqrt_kappa * impulse, observation])


def recording_residuals(structure: ModelStructure, fixed, free_values, states: BodyStates,
                        data: StepData):
    """All residual blocks ``[n, m]`` of one recording."""
    first = initial_block(structure, fixed, free_values, states[0], data)

    def block(previous, current, inputs, measured, observed):
        return transition_block(structure, fixed, free_values, previous, current, inputs,
                                measured, observed, data)

    rest = jax.vmap(block)(states[:-1], states[1:], data.inputs, data.measured_angles[1:],
                           data.observed[1:])
    return jnp.concatenate([first[None], rest])


def _moved(state: BodyStates, delta_configuration, delta_velocity) -> BodyStates:
    """``x ⊞ δ`` from the flat parts ``[δr, δψ]`` and ``[δv, δω]`` (``[6 nb]`` each)."""
    num_bodies = state.num_bodies
    return state_boxplus_parts(state, delta_configuration.reshape(num_bodies, 6),
                               delta_velocity.reshape(num_bodies, 6))


def _jacobians_by_part(function, num_bodies, num_parameters):
    """Value and Jacobian blocks of ``function(δq_prev, δv_prev, δq_cur, δv_cur, δχ)`` at zero.

    Each argument gets its own forward pass (five passes instead of one over all directions):
    a pass carries tangents only through the operations that depend on its argument, and most
    of the residual depends on the previous configuration alone (mass matrix, constraint rows);
    the velocities enter almost linearly. On the 10 s swing-up this alone made the Jacobian
    2.3× cheaper than one pass over all 61 directions (312 → 136 ms, benchmarks/RESULTS.md).
    Returns ``(value, ∂/∂δx_prev, ∂/∂δx_cur, ∂/∂δχ)`` with the state blocks in the
    ``[δr, δψ, δv, δω]``-per-body layout of ⊞.
    """
    half = jnp.zeros(6 * num_bodies)
    zeros = (half, half, half, half, jnp.zeros(num_parameters))
    parts = [jax.jacfwd(function, argnums=i)(*zeros) for i in range(5)]

    def state_block(configuration, velocity):
        rows = configuration.shape[0]
        return jnp.concatenate([configuration.reshape(rows, num_bodies, 6),
                                velocity.reshape(rows, num_bodies, 6)], axis=-1).reshape(rows, -1)

    return (function(*zeros), state_block(parts[0], parts[1]), state_block(parts[2], parts[3]),
            parts[4])


def linearize(structure: ModelStructure, fixed, free_values, states: BodyStates,
              data: StepData) -> Linearization:
    """Residual blocks and their Jacobian blocks at ``(states, χ)``."""
    free = structure.free
    num_bodies = states.position.shape[-2]

    def first(_configuration, _velocity, configuration, velocity, delta_parameters):
        values = parameters_boxplus(free, free_values, delta_parameters)
        return initial_block(structure, fixed, values, _moved(states[0], configuration, velocity),
                             data)

    def transition(previous, current, inputs, measured, observed):
        def residual(previous_configuration, previous_velocity, current_configuration,
                     current_velocity, delta_parameters):
            values = parameters_boxplus(free, free_values, delta_parameters)
            return transition_block(
                structure, fixed, values,
                _moved(previous, previous_configuration, previous_velocity),
                _moved(current, current_configuration, current_velocity),
                inputs, measured, observed, data)

        return _jacobians_by_part(residual, num_bodies, free.size)

    value0, _, current0, parameters0 = _jacobians_by_part(first, num_bodies, free.size)
    value, previous, current, parameters = jax.vmap(transition)(
        states[:-1], states[1:], data.inputs, data.measured_angles[1:], data.observed[1:])
    return Linearization(
        residuals=jnp.concatenate([value0[None], value]),
        previous=jnp.concatenate([jnp.zeros_like(current0)[None], previous]),
        current=jnp.concatenate([current0[None], current]),
        parameters=jnp.concatenate([parameters0[None], parameters]),
    )
