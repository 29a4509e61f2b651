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
    state_boxplus,
)
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


def linearize(structure: ModelStructure, fixed, free_values, states: BodyStates,
              data: StepData) -> Linearization:
    """Residual blocks and their Jacobian blocks at ``(states, χ)``."""
    free = structure.free
    num_bodies = states.position.shape[-2]
    state_size = 12 * num_bodies
    zero_state = jnp.zeros(state_size)
    zero_parameters = jnp.zeros(free.size)

    def moved(state, delta):
        return state_boxplus(state, delta.reshape(num_bodies, 12))

    def first(delta_state, delta_parameters):
        values = parameters_boxplus(free, free_values, delta_parameters)
        return initial_block(structure, fixed, values, moved(states[0], delta_state), data)

    def transition(previous, current, inputs, measured, observed):
        def residual(delta_previous, delta_current, delta_parameters):
            values = parameters_boxplus(free, free_values, delta_parameters)
            return transition_block(structure, fixed, values, moved(previous, delta_previous),
                                    moved(current, delta_current), inputs, measured, observed,
                                    data)

        value = residual(zero_state, zero_state, zero_parameters)
        jacobians = jax.jacfwd(residual, argnums=(0, 1, 2))(zero_state, zero_state,
                                                             zero_parameters)
        return (value, *jacobians)

    value0 = first(zero_state, zero_parameters)
    current0, parameters0 = jax.jacfwd(first, argnums=(0, 1))(zero_state, zero_parameters)
    value, previous, current, parameters = jax.vmap(transition)(
        states[:-1], states[1:], data.inputs, data.measured_angles[1:], data.observed[1:])
    return Linearization(
        residuals=jnp.concatenate([value0[None], value]),
        previous=jnp.concatenate([jnp.zeros_like(current0)[None], previous]),
        current=jnp.concatenate([current0[None], current]),
        parameters=jnp.concatenate([parameters0[None], parameters]),
    )
