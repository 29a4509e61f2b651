"""The segments of the simulation refinement (:mod:`~mb_estimation.estimation.shooting`).

The recordings cut into shooting segments (:func:`segments_of`); one segment simulated with
the config's SPOOK stepper from its own start state, driven by the recorded input, and its
weighted wrapped angle errors (:func:`segment_residuals`); every segment's residuals and their
Jacobians in its start state and in the free values, all segments in one batch
(:func:`linearize_segments`, :func:`segments_residuals`: JAX, compiled by the solver); and how
much a segment amplifies a change of its start state (:func:`amplification`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mb_estimation.errors import RecordingError
from mb_estimation.multibody import (
    joint_angles,
    rollout,
    states_from_joints,
    without_dry_friction,
)
from mb_estimation.multibody.joint_space import joint_states, variational_step
from mb_estimation.numerics import jax
from mb_estimation.rigs import Rig, parameter_arrays

jnp = jax.numpy


@dataclass(frozen=True)
class Segments:
    """Every recording cut into shooting segments (host arrays).

    ``recording [S]`` and ``begin [S]`` (grid index where the simulation starts); ``measured
    [S, m+1, n_joints]`` angles [rad]; ``weights [S, m+1]`` (1 where a sample is scored, 0 in
    the lead and at unobserved steps); ``inputs [S, m, n_inputs]``; ``dt`` the grid step [s].
    """

    recording: np.ndarray
    begin: np.ndarray
    measured: np.ndarray
    weights: np.ndarray
    inputs: np.ndarray
    dt: float


def segments_of(grids: Sequence, segment_s: float, lead_s: float) -> Segments:
    """Cut recordings on a common grid into segments of ``lead_s + segment_s`` [s]."""
    dt = float(grids[0].dt)
    lead, length = int(round(lead_s / dt)), max(1, int(round(segment_s / dt)))
    parts = {"recording": [], "begin": [], "measured": [], "weights": [], "inputs": []}
    for index, grid in enumerate(grids):
        count = (grid.num_steps - 1 - lead) // length
        for segment in range(count):
            begin = segment * length
            window = slice(begin, begin + lead + length + 1)
            weights = np.asarray(grid.observed[window], dtype=float).copy()
            weights[:lead] = 0.0
            parts["recording"].append(index)
            parts["begin"].append(begin)
            parts["measured"].append(np.asarray(grid.measured_angles[window]))
            parts["weights"].append(weights)
            parts["inputs"].append(np.asarray(grid.inputs[begin:begin + lead + length]))
    if not parts["begin"]:
        raise RecordingError(f"the recordings are shorter than one shooting segment "
                             f"({lead_s + segment_s:g} s)")
    return Segments(**{key: np.stack(value) for key, value in parts.items()}, dt=dt)


def segment_residuals(rig: Rig, names: tuple[str, ...], frictionless: tuple[bool, ...],
                      rigid: bool, h, substeps, fixed, joint_state, free_values, measured,
                      weights, inputs):
    """Weighted wrapped angle errors ``[(m+1)·n_joints]`` [rad] of one simulated segment.

    Simulated from ``joint_state = (angles, rates)`` with the free values ``[p]``, steps
    ``h`` [s], ``substeps`` per grid step (both traced: one program serves every step),
    without the dry friction rows of the ``frictionless``
    hinges: the SPOOK stepper with the config's hinges, or (``rigid``) the rigid tree's
    second-order variational step in joint coordinates
    (:func:`~mb_estimation.multibody.joint_space.variational_step`).
    """
    values = {**fixed, **{name: free_values[i] for i, name in enumerate(names)}}
    system = without_dry_friction(rig.build(parameter_arrays(values)), frictionless)
    joints = joint_state.shape[0] // 2
    if rigid:
        def sample(state, u):
            state = jax.lax.fori_loop(0, substeps,
                                      lambda _, s: variational_step(system, s, u, h), state)
            return state, state.angles

        _, angles = jax.lax.scan(
            sample, joint_states(system, joint_state[:joints], joint_state[joints:]), inputs)
        angles = jnp.concatenate([joint_state[None, :joints], angles])
    else:
        start = states_from_joints(system, joint_state[:joints], joint_state[joints:])
        states, _ = rollout(system, start, h, inputs.shape[0], lambda k, _: inputs[k],
                            substeps)
        angles = jax.vmap(lambda state: joint_angles(system, state))(states)
    error = jnp.angle(jnp.exp(1j * (angles - measured)))
    return (error * weights[:, None]).reshape(-1)


def linearize_segments(static, step, fixed, joint_states, free_values, measured, weights,
                       inputs):
    """Residuals and their Jacobians in each segment's state and in the free values.

    ``static = (rig, names, frictionless, rigid)`` and ``step = (h, substeps)`` as
    :func:`segment_residuals` takes them.
    """
    h, substeps = step

    def one(segment):
        joint_state, y, w, u = segment

        def residual(state, values):
            value = segment_residuals(*static, h, substeps, fixed, state, values, y, w, u)
            return value, value  # the value as auxiliary output: simulated once, not twice

        (jac_state, jac_values), value = jax.jacfwd(residual, argnums=(0, 1), has_aux=True)(
            joint_state, free_values)
        return value, jac_state, jac_values

    # Every segment in one batch: the stepper's solve is plain array operations (no LAPACK),
    # so the step's many small operations run once for all segments.
    return jax.vmap(one)((joint_states, measured, weights, inputs))


def segments_residuals(static, step, fixed, joint_states, free_values, measured, weights,
                       inputs):
    """The residuals of :func:`linearize_segments` alone (one plain simulation of each segment)."""
    h, substeps = step

    def one(segment):
        joint_state, y, w, u = segment
        return segment_residuals(*static, h, substeps, fixed, joint_state, free_values, y, w,
                                 u)

    return jax.vmap(one)((joint_states, measured, weights, inputs))


def amplification(jac_state: np.ndarray, joints: int, rate_scale_s: float = 1.0) -> float:
    """How much the segments amplify a change of their start state: ``max ‖∂θ(t)/∂x₀‖``.

    ``jac_state [S, (m+1)·joints, 2·joints]``: the weighted angle residuals' derivatives in the
    start angles and rates; the rate columns are scaled by ``rate_scale_s`` [s] (a start-rate
    change of 1 rad/s over that time) and each sample's block is measured against the first
    scored sample's. A stable or neutral motion grows it linearly in time (a few units for
    seconds-long segments); an unstable one exponentially (a pendulum balanced upright:
    e^(λt), λ ≈ √(g/l)).
    """
    scaled = jac_state * np.concatenate([np.ones(joints), np.full(joints, rate_scale_s)])
    blocks = scaled.reshape(scaled.shape[0], -1, joints, scaled.shape[-1])
    norms = np.sqrt(np.einsum("skij,skij->sk", blocks, blocks))  # per segment and sample
    scored = norms > 0.0
    first = np.where(scored.any(axis=1), norms[np.arange(len(norms)), scored.argmax(axis=1)],
                     1.0)
    return float(np.max(norms / first[:, None]))
