"""The two ways the estimator describes a recording's states and the dynamics between them.

* :class:`MaximalCoordinates` — the paper's (§3): each body's position, orientation and
  velocity (``s = 12 nb`` tangent directions per step), the impulse residuals (3.7)-(3.8) of the
  regularised inverse dynamics and the initial-state residual (3.16)-(3.17). Faithful to the
  compliant hinges of the config, but its multipliers (2.30) grow stiff as 1/ε and its first-order
  step biases the estimate (paper §4.9: *shadow* parameters).
* :class:`JointCoordinates` — the rigid limit: joint angles and rates (``s = 2 n_joints``), the
  holonomic multipliers eliminated, a second-order variational step
  (:mod:`mb_estimation.multibody.joint_space`). Valid for stiff hinges, consistent as h → 0.

Both are a :class:`Formulation`, so the residual assembly, the Jacobian blocks, the
Levenberg–Marquardt loop and the covariance are shared. A formulation is a frozen, field-less
dataclass: hashable, so it is part of what the estimator compiles against.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Protocol

import numpy as np

from mb_estimation.multibody import (
    BodyStates,
    configuration_boxminus,
    impulse_residuals,
    initial_state_residual,
    joint_angles,
    joint_rates,
    joint_space,
    state_boxplus,
    states_from_joints,
)
from mb_estimation.multibody.joint_space import JointStates, body_impulse_norm_weights, joint_states
from mb_estimation.multibody.state import state_boxplus_linearized, with_velocity
from mb_estimation.multibody.variational import variational_residuals
from mb_estimation.numerics import jax

jnp = jax.numpy

#: The weight of a locked joint's momentum residuals relative to a moving joint's: the torque
#: that holds it still is unknown, so its residuals may be a thousand times the force noise.
LOCKED_TORQUE_WEIGHT = 1e-3


class Formulation(Protocol):
    """How the estimator describes a recording's states and the dynamics between them.

    ``name``: as the config names it; ``jacobian_passes``: the transition Jacobian's forward
    passes, as groups of the residual's arguments ``(previous configuration, previous
    velocity, current configuration, current velocity, parameters)``. States are a pytree of
    ``[n, ...]`` arrays; ``system`` the rig built from parameter values.
    """

    name: ClassVar[str]
    jacobian_passes: ClassVar[tuple[tuple[int, ...], ...]]

    def half_size_of(self, states) -> int:
        """Tangent directions of the configuration (= of the velocity) part of one state."""

    def tangent_group(self, half_size: int) -> int:
        """Configuration columns per group of the ⊞ layout (then as many velocity columns)."""

    def initial_residual(self, system, state, dt):
        """The first state's residual [N m s]."""

    def transition_residual(self, system, previous, current, inputs, dt, measured_angles,
                            locked):
        """The residual of one step ``previous → current`` [N m s].

        ``locked [n_joints]``: 1 where the recording holds a joint still (by an unknown torque),
        else 0.
        """

    def observe(self, system, state):
        """The rig's joint angles [rad] in ``state``."""

    def moved(self, state, delta_configuration, delta_velocity):
        """``x ⊞ δ`` to first order (what the Jacobian blocks differentiate at ``δ = 0``)."""

    def boxplus(self, states, step):
        """All states moved by ``step [n, s]``."""

    def initial_states(self, system, filtered_angles, rates, dt):
        """Initial states from filtered angles and rates (None: :meth:`start_rates` gave none)."""

    def start_rates(self, filtered_angles, dt):
        """The joint rates [rad/s] its initial states take where a recording gives none.

        Computed on the host from the filtered angles ``[n, n_joints]``, so that every level's
        initial states come from one program; None where they take the angles alone.
        """

    def shadow(self, system, states):
        """Joint angles [rad], rates [rad/s] ``[n, n_joints]`` and body states."""


@dataclass(frozen=True)
class MaximalCoordinates:
    """Body states in maximal coordinates and the paper's inverse dynamics (§2.6, §3.2-3.3)."""

    name = "maximal"
    # The transition Jacobian's forward passes, as groups of the residual's arguments
    # (δq_prev, δv_prev, δq_cur, δv_cur, δχ): one pass per argument. Each carries tangents only
    # through what depends on it; one pass over all 61 directions ran 2.3× slower, the states
    # in one pass 2.2× slower (measured).
    jacobian_passes = ((0,), (1,), (2,), (3,), (4,))

    @staticmethod
    def half_size_of(states: BodyStates) -> int:
        """Tangent directions of the configuration (= of the velocity) part of one state."""
        return 6 * states.position.shape[-2]

    @staticmethod
    def tangent_group(half_size: int) -> int:
        """Columns per group of the ⊞ layout: ``[δr, δψ]`` then ``[δv, δω]`` of each body."""
        return 6

    @staticmethod
    def initial_residual(system, state: BodyStates, dt):
        """(3.16)-(3.17) as impulses."""
        return initial_state_residual(system, state, dt)

    @staticmethod
    def transition_residual(system, previous: BodyStates, current: BodyStates, inputs, dt,
                            measured_angles, locked):
        """(3.7)-(3.8); no joint locked (the calibration's set-up refuses locked joints here)."""
        return impulse_residuals(system, previous, current, inputs, dt)

    @staticmethod
    def observe(system, state: BodyStates):
        """The rig's joint angles [rad], wrapped."""
        return joint_angles(system, state)

    @staticmethod
    def moved(state: BodyStates, delta_configuration, delta_velocity) -> BodyStates:
        """``x ⊞ δ`` to first order, from the flat parts ``[δr, δψ]`` and ``[δv, δω]``.

        ``[6 nb]`` each. What the Jacobian blocks differentiate at ``δ = 0``
        (:func:`~mb_estimation.multibody.state.state_boxplus_linearized`).
        """
        num_bodies = state.num_bodies
        return state_boxplus_linearized(state, delta_configuration.reshape(num_bodies, 6),
                                        delta_velocity.reshape(num_bodies, 6))

    @staticmethod
    def boxplus(states: BodyStates, step) -> BodyStates:
        """All states moved by ``step [n, 12 nb]`` (``[δr, δψ, δv, δω]`` per body)."""
        num_bodies = states.position.shape[-2]
        return state_boxplus(states, step.reshape(step.shape[0], num_bodies, 12))

    @staticmethod
    def start_rates(filtered_angles, dt) -> None:
        """None: the velocities (4.3) come from the configurations' differences."""
        return None

    @staticmethod
    def initial_states(system, filtered_angles, rates, dt) -> BodyStates:
        """Initial states (§4.4): zero-violation configurations from the filtered angles.

        Velocities (4.3) from their differences, or the body velocities of given joint rates.
        """
        if rates is not None:
            return jax.vmap(lambda a, r: states_from_joints(system, a, r))(filtered_angles,
                                                                           rates)
        zero_rates = jnp.zeros(filtered_angles.shape[1])
        configurations = jax.vmap(lambda a: states_from_joints(system, a, zero_rates))(
            filtered_angles)
        velocity = configuration_boxminus(configurations[1:], configurations[:-1]) / dt
        velocity = jnp.concatenate([velocity[:1], velocity])
        return with_velocity(configurations, velocity)

    @staticmethod
    def shadow(system, states: BodyStates):
        """Joint angles [rad] and rates [rad/s] ``[n, n_joints]`` and the body states."""
        return (jax.vmap(lambda s: joint_angles(system, s))(states),
                jax.vmap(lambda s: joint_rates(system, s))(states), states)


@dataclass(frozen=True)
class JointCoordinates:
    """Joint angles and momenta with the rigid-limit variational residuals (module docstring)."""

    name = "joint"
    # The states' few directions in one pass, the parameters' in another: 1.4× faster to run
    # than one pass over all (the node's window call on furuta.yaml 3.1 against 4.4 ms), for
    # 0.35 s more compiling (1.46 against 1.11 s; measured).
    jacobian_passes = ((0, 1, 2, 3), (4,))

    @staticmethod
    def half_size_of(states: JointStates) -> int:
        return states.angles.shape[-1]

    @staticmethod
    def tangent_group(half_size: int) -> int:
        """One group: ``[δθ, δθ̇]``."""
        return half_size

    @staticmethod
    def initial_residual(system, state: JointStates, dt):
        """None needed: joint states satisfy the rigid hinges exactly (rows kept as zeros)."""
        return jnp.zeros(2 * state.angles.shape[-1])

    @staticmethod
    def transition_residual(system, previous: JointStates, current: JointStates, inputs, dt,
                            measured_angles, locked):
        """The momentum residuals, weighted at the recorded angles of the step's end.

        A ``locked`` joint is held by a torque nobody recorded: its momentum residuals, where
        that torque acts, weigh :data:`LOCKED_TORQUE_WEIGHT` of the others' (that torque is
        force noise a thousand times larger), so they shape its momenta, not the parameters.
        """
        weights = body_impulse_norm_weights(system, measured_angles) * jnp.where(
            locked > 0.5, LOCKED_TORQUE_WEIGHT, 1.0)[None, :]
        return variational_residuals(system, previous, current, inputs, dt, weights)

    @staticmethod
    def observe(system, state: JointStates):
        return state.angles

    @staticmethod
    def moved(state: JointStates, delta_configuration, delta_velocity) -> JointStates:
        return JointStates(state.angles + delta_configuration, state.momenta + delta_velocity)

    @staticmethod
    def boxplus(states: JointStates, step) -> JointStates:
        """All states moved by ``step [n, 2 n_joints]`` (``[δθ, δp]``)."""
        half = states.angles.shape[-1]
        return JointStates(states.angles + step[:, :half], states.momenta + step[:, half:])

    @staticmethod
    def start_rates(filtered_angles, dt) -> np.ndarray:
        """The filtered angles' central differences (one-sided at the ends) [rad/s]."""
        return np.gradient(np.asarray(filtered_angles, dtype=np.float64), dt, axis=0)

    @staticmethod
    def initial_states(system, filtered_angles, rates, dt) -> JointStates:
        """The filtered angles moving with ``rates`` (the driver's, or :meth:`start_rates`)."""
        return jax.vmap(lambda a, r: joint_states(system, a, r))(jnp.asarray(filtered_angles),
                                                                  jnp.asarray(rates))

    @staticmethod
    def shadow(system, states: JointStates):
        rates = jax.vmap(lambda s: joint_space.joint_rates(system, s))(states)
        bodies = jax.vmap(lambda a, r: states_from_joints(system, a, r))(states.angles, rates)
        return states.angles, rates, bodies


def tangent_columns(formulation: Formulation, configuration, velocity):
    """The state's Jacobian columns ``[..., s]`` in the formulation's ⊞ layout.

    From the columns of its two parts, ``configuration`` and ``velocity`` ``[..., s/2]``: groups
    of ``formulation.tangent_group`` configuration columns, each followed by as many velocity
    columns.
    """
    lead, group = configuration.shape[:-1], formulation.tangent_group(configuration.shape[-1])
    return jnp.concatenate([configuration.reshape(*lead, -1, group),
                            velocity.reshape(*lead, -1, group)], axis=-1).reshape(*lead, -1)


FORMULATIONS: dict[str, Formulation] = {f.name: f() for f in (MaximalCoordinates,
                                                                JointCoordinates)}


def formulation_named(name: str) -> Formulation:
    """The formulation called ``maximal`` or ``joint``."""
    try:
        return FORMULATIONS[name]
    except KeyError:
        raise ValueError(f"unknown formulation {name!r}; choose one of "
                         f"{', '.join(FORMULATIONS)}") from None


def joint_motion_on(time_s, angles, rates, new_time_s):
    """Joint angles [rad] and rates [rad/s] carried to other times (warm starts).

    Cubic Hermite interpolation of the angles with the rates as slopes, linear interpolation
    of the rates; outside ``time_s`` the nearest values are held. Returns ``(angles, rates)``.
    """
    time_s, new_time_s = np.asarray(time_s), np.asarray(new_time_s)
    angles, rates = np.asarray(angles), np.asarray(rates)
    index = np.clip(np.searchsorted(time_s, new_time_s, side="right") - 1, 0, len(time_s) - 2)
    step = time_s[index + 1] - time_s[index]
    s = np.clip((new_time_s - time_s[index]) / step, 0.0, 1.0)[:, None]
    h00, h10 = 2 * s**3 - 3 * s**2 + 1, s**3 - 2 * s**2 + s
    h01, h11 = -2 * s**3 + 3 * s**2, s**3 - s**2
    new_angles = (h00 * angles[index] + h10 * step[:, None] * rates[index]
                  + h01 * angles[index + 1] + h11 * step[:, None] * rates[index + 1])
    new_rates = (1 - s) * rates[index] + s * rates[index + 1]
    return new_angles, new_rates
