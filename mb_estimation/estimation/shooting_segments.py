"""The segments of the simulation refinement (:mod:`~mb_estimation.estimation.shooting`).

The recordings cut into shooting segments (:func:`segments_of`) and the segments into lanes
(:func:`lanes_of`). The rigid tree's segments run through the replays' plain program, lane
after lane (:func:`replayed_residuals`), and are linearised along the states that run stored
(:func:`rigid_linearized`, :func:`rigid_lane_sensitivities`); the compliant model's lanes are
simulated, their weighted wrapped angle errors and end states (:func:`segment_residuals`),
and linearised by forward-mode AD, a lane a call (:func:`linearize_segments`,
:func:`segments_residuals`: JAX, compiled by the solver), their derivatives multiplied out
on the host (:func:`chained`); and how much a segment amplifies a change of its start state
(:func:`amplification`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mb_estimation.errors import RecordingError
from mb_estimation.estimation.agreement import RecordingShare
from mb_estimation.estimation.covariance import (
    CorrelatedCovariance,
    correlated_middle,
    correlation_lags,
    parameter_covariance,
)
from mb_estimation.multibody import (
    frictionless_hinges,
    joint_angles,
    joint_rates,
    rollout,
    states_from_joints,
    without_dry_friction,
)
from mb_estimation.multibody.joint_space import JointStates, rigid_start, rigid_state
from mb_estimation.multibody.variational import rigid_chunk, step_jacobian
from mb_estimation.numerics import jax
from mb_estimation.rigs import Rig, built_system, parameter_arrays

jnp = jax.numpy


@dataclass(frozen=True)
class Segments:
    """Every recording cut into shooting segments (host arrays).

    ``recording [S]`` and ``begin [S]`` (grid index where the simulation starts); ``measured
    [S, m+1, n_joints]`` angles [rad]; ``weights [S, m+1]`` (1 where a sample is scored, 0 in
    the lead and at unobserved steps); ``inputs [S, m, n_inputs]``; ``locked [S, n_joints]``
    (1 where the recording holds a joint still); ``dt`` the grid step [s].
    """

    recording: np.ndarray
    begin: np.ndarray
    measured: np.ndarray
    weights: np.ndarray
    inputs: np.ndarray
    locked: np.ndarray
    dt: float


#: The kept fit's remainder of a recording after its whole segments is fitted as one more,
#: shorter segment (its end padded and unscored) when it holds at least this fraction of a
#: segment: else that much of a long recording would go unscored (60 s in 16 s segments:
#: 12 s).
REMAINDER_FRACTION = 0.25


def segments_of(grids: Sequence, segment_s: float, lead_s: float,
                remainder: bool = False) -> Segments:
    """Cut recordings on a common grid into segments of ``lead_s + segment_s`` [s].

    Each recording into whole segments from its start; with ``remainder`` (the fit that is
    kept), a remainder of at least :data:`REMAINDER_FRACTION` of a segment after them becomes
    one more segment, its samples past the recording's end unscored (weight 0, input 0). A
    fit that only leads to a longer one goes without: it decides no std, and the remainder
    would cost it a whole segment's simulation.
    """
    dt = float(grids[0].dt)
    lead, length = int(round(lead_s / dt)), max(1, int(round(segment_s / dt)))
    parts = {"recording": [], "begin": [], "measured": [], "weights": [], "inputs": [],
             "locked": []}
    for index, grid in enumerate(grids):
        usable = grid.num_steps - 1 - lead
        count = usable // length
        if remainder and count and usable - count * length >= REMAINDER_FRACTION * length:
            count += 1
        for segment in range(count):
            begin = segment * length
            window = slice(begin, begin + lead + length + 1)
            weights = np.asarray(grid.observed[window], dtype=float).copy()
            weights[:lead] = 0.0
            missing = lead + length + 1 - len(weights)  # past the recording's end
            parts["recording"].append(index)
            parts["begin"].append(begin)
            parts["measured"].append(np.pad(np.asarray(grid.measured_angles[window]),
                                            ((0, missing), (0, 0))))
            parts["weights"].append(np.pad(weights, (0, missing)))
            parts["inputs"].append(np.pad(np.asarray(grid.inputs[begin:begin + lead + length]),
                                          ((0, missing), (0, 0))))
            parts["locked"].append(grid.locked_mask)
    if not parts["begin"]:
        raise RecordingError(f"the recordings are shorter than one shooting segment "
                             f"({lead_s + segment_s:g} s)")
    return Segments(**{key: np.stack(value) for key, value in parts.items()}, dt=dt)


def segment_residuals(rig: Rig, names: tuple[str, ...], frictionless: tuple[bool, ...], h,
                      substeps, fixed, joint_state, free_values, measured, weights, inputs,
                      locked):
    """Weighted wrapped angle errors ``[(m+1)·n_joints]`` [rad] of one compliant lane, its end.

    Simulated by the SPOOK stepper with the config's hinges from ``joint_state = (angles,
    rates)`` with the free values ``[p]``, steps ``h`` [s], ``substeps`` per grid step (both
    traced: one program serves every step), without the dry friction rows of the
    ``frictionless`` hinges (the rigid tree's lanes: :func:`replayed_residuals`,
    :func:`rigid_linearized`); ``locked`` as the lanes carry it, not read. The end state ``[2
    n_joints]`` is the last sample's joint angles and rates.
    """
    system = _lane_system(rig, names, frictionless, fixed, free_values)
    joints = joint_state.shape[0] // 2
    start = states_from_joints(system, joint_state[:joints], joint_state[joints:])
    states, _ = rollout(system, start, h, inputs.shape[0], lambda k, _: inputs[k], substeps)
    angles = jax.vmap(lambda state: joint_angles(system, state))(states)
    last = jax.tree_util.tree_map(lambda leaf: leaf[-1], states)
    end = jnp.concatenate([joint_angles(system, last), joint_rates(system, last)])
    error = jnp.angle(jnp.exp(1j * (angles - measured)))
    return (error * weights[:, None]).reshape(-1), end


def linearize_segments(static, step, fixed, joint_states, free_values, measured, weights,
                       inputs, locked):
    """Each lane's residuals and end state, and their Jacobians in its start state and values.

    ``static = (rig, names, frictionless)`` and ``step = (h, substeps)`` as
    :func:`segment_residuals` takes them; the compliant model's lanes (the rigid tree's:
    :func:`rigid_linearized`), by forward-mode AD of :func:`segment_residuals`. Returns
    ``(residuals, d residuals/d start, d residuals/d values, end, d end/d start, d end/d
    values)``, each batched over lanes.
    """
    h, substeps = step

    def one(lane):
        joint_state, y, w, u, lock = lane

        def simulated(state, values):
            value = segment_residuals(*static, h, substeps, fixed, state, values, y, w, u, lock)
            return value, value  # the value as auxiliary output: simulated once, not twice

        ((residual_state, residual_values), (end_state, end_values)), (residual, end) = \
            jax.jacfwd(simulated, argnums=(0, 1), has_aux=True)(joint_state, free_values)
        return residual, residual_state, residual_values, end, end_state, end_values

    lanes = (joint_states, measured, weights, inputs, locked)
    if joint_states.shape[0] == 1:  # one lane: no batching to trace
        return tuple(part[None] for part in one(tuple(data[0] for data in lanes)))
    return jax.vmap(one)(lanes)


def rigid_lane_sensitivities(static, h, fixed, free_values, start, carried, first, before,
                             path: JointStates, inputs, locked):
    """The angles' Jacobians along a stored rigid run, and the sensitivity at its end.

    ``static = (rig, names, frictionless)``; the run: ``path`` the tree's states
    :class:`JointStates` ``[n, n_joints]`` after each step of ``h`` [s] from ``before`` under
    ``inputs [n, c]`` (:func:`~mb_estimation.multibody.variational.rigid_chunk` with one
    step an input). The sensitivity ``S = ∂(θ, p)/∂(start, values)`` ``[2 n_joints, 2 n_joints
    + p]`` of the segment's start joint state ``start`` (angles, rates) and the free values is
    ``carried`` in, or where ``first`` (1.0) made from ``start``'s map to the tree's state;
    each step's Jacobian (:func:`~mb_estimation.multibody.variational.step_jacobian`)
    applied to it. Returns ``(S after the last step, ∂θ/∂(start, values) after each step [n,
    n_joints, 2 n_joints + p])``: forward sensitivities, the same derivatives as forward-mode
    AD through the simulation.
    """
    rig, names, frictionless = static
    joints = start.shape[0] // 2

    def system_of(values):
        return _lane_system(rig, names, frictionless, fixed, values)

    def start_of(joint_state, values):
        state = rigid_state(system_of(values), joint_state, locked)
        return jnp.concatenate([state.angles, state.momenta])

    at_start = jnp.concatenate(jax.jacfwd(start_of, argnums=(0, 1))(start, free_values), axis=1)
    sensitivity = jnp.where(first > 0.5, at_start, carried)
    starts = jax.tree_util.tree_map(lambda first_one, rest: jnp.concatenate(
        [first_one[None], rest[:-1]]), before, path)

    def one_step(sensitivity, step):
        state, solved, held = step
        jacobian = step_jacobian(system_of, free_values, state, solved, held, h, locked)
        sensitivity = (jacobian[:, :2 * joints] @ sensitivity
                       + jnp.pad(jacobian[:, 2 * joints:], ((0, 0), (2 * joints, 0))))
        return sensitivity, sensitivity[:joints]

    return jax.lax.scan(one_step, sensitivity, (starts, path, inputs))


def segments_residuals(static, step, fixed, joint_states, free_values, measured, weights,
                       inputs, locked):
    """The residuals and end states of :func:`linearize_segments` alone (plain simulations)."""
    h, substeps = step

    def one(lane):
        joint_state, y, w, u, lock = lane
        return segment_residuals(*static, h, substeps, fixed, joint_state, free_values, y, w,
                                 u, lock)

    return jax.vmap(one)((joint_states, measured, weights, inputs, locked))


def frictionless_while_fitting(rig: Rig, parameters: dict, names: tuple[str, ...]
                               ) -> tuple[bool, ...]:
    """Hinges without dry friction at ``parameters`` and with every value of ``names`` moved.

    The ``frictionless`` flags of :func:`segment_residuals`: a hinge listed has no dry friction
    whatever a fit of ``names`` does.
    """
    moved = {**parameters, **{name: 2.0 * np.asarray(parameters[name]) + 1.0 for name in names}}
    return frictionless_hinges(built_system(rig, parameter_arrays(parameters)),
                               built_system(rig, parameter_arrays(moved)))


def _lane_system(rig: Rig, names, frictionless, fixed, free_values):
    """``rig`` with the ``fixed`` values and ``free_values [p]`` (by ``names``).

    Without the dry friction rows of the ``frictionless`` hinges.
    """
    values = {**fixed, **{name: free_values[i] for i, name in enumerate(names)}}
    return without_dry_friction(rig.build(parameter_arrays(values)), frictionless)


def built_lane_system(static, fixed, values: np.ndarray):
    """:func:`_lane_system` of ``static = (rig, names, frictionless)``, the replays' build.

    Built by the program the replays build their tree with
    (:func:`~mb_estimation.rigs.built_system`).
    """
    rig, names, frictionless = static
    return without_dry_friction(built_system(rig, parameter_arrays(
        {**fixed, **dict(zip(names, values, strict=True))})), frictionless)


def replayed_residuals(compiler, static, step, fixed, lanes: Lanes, starts: np.ndarray,
                       values: np.ndarray) -> np.ndarray:
    """The rigid tree's residuals ``[S, R]`` of each segment in ``lanes``, through its plain run.

    Each segment from its start, lane after lane, through
    :func:`~mb_estimation.multibody.variational.rigid_chunk` (the program the open-loop
    replays and predictions run: one fewer to compile and load) with the tree's state carried
    from lane to lane; the wrapped, weighted angle errors on the host. For rigid fits (their
    lanes run one per call: :func:`lanes_of`). The tree and its start states are built by the
    programs the replays build theirs with (:func:`~mb_estimation.rigs.built_system`,
    :data:`~mb_estimation.multibody.joint_space.rigid_start`).
    """
    joints = starts.shape[1] // 2
    system = built_lane_system(static, fixed, values)
    residuals = []
    for segment, start in enumerate(starts):
        state = rigid_start(system, start, lanes.locked[segment])
        first, parts = start[:joints], []
        for lane in range(lanes.count):
            state, path = compiler(rigid_chunk, None, step, system, state,
                                   lanes.inputs[segment, lane], lanes.locked[segment])
            simulated = np.concatenate([first[None], np.asarray(path.angles)])
            error = np.angle(np.exp(1j * (simulated - lanes.measured[segment, lane])))
            parts.append((error * lanes.weights[segment, lane][:, None]).reshape(-1))
            first = simulated[-1]
        residuals.append(np.concatenate(parts))
    return np.stack(residuals)


def rigid_sensitivities(compiler, static, step, fixed, system, start: np.ndarray,
                        inputs: np.ndarray, locked: np.ndarray, values: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]:
    """The rigid tree's angles at each grid sample and their Jacobians in the start and values.

    From the joint state ``start`` (angles, rates) driven by ``inputs [m, c]``, each held for
    ``step = (h, substeps)``: run one step an input through
    :func:`~mb_estimation.multibody.variational.rigid_chunk` (the replays' program; each input
    repeated for its ``substeps`` steps, in runs of :data:`LANE_STEPS` steps, the last one
    padded), then the sensitivities along the stored states (:func:`rigid_lane_sensitivities`,
    carried from run to run in the program). ``system``: :func:`built_lane_system`'s tree.
    Returns ``(angles [m'+1, n_joints], ∂θ/∂(start, values) [m'+1, n_joints, 2 n_joints +
    p])`` from the start's sample on, ``m' ≥ m`` (the padding's samples last).
    """
    h, substeps = step
    repeat, joints, count = int(substeps), start.shape[0] // 2, len(values)
    one_step = (np.asarray(h), np.asarray(1))
    held = np.repeat(inputs, repeat, axis=0)
    held = np.pad(held, ((0, -len(held) % LANE_STEPS), (0, 0)))
    state = rigid_start(system, start, locked)
    sensitivity = np.zeros((2 * joints, 2 * joints + count))
    angles, rows = [start[None, :joints]], [np.eye(joints, 2 * joints + count)[None]]
    for first in range(0, len(held), LANE_STEPS):
        run = held[first:first + LANE_STEPS]
        last, path = compiler(rigid_chunk, None, one_step, system, state, run, locked)
        sensitivity, in_angles = compiler(
            rigid_lane_sensitivities, static, np.asarray(h), fixed, values, start, sensitivity,
            np.asarray(float(first == 0)), state, path, run, locked)
        angles.append(np.asarray(path.angles))
        rows.append(np.asarray(in_angles))
        state = last
    # the grid's samples: every ``repeat``-th step
    return np.concatenate(angles)[::repeat], np.concatenate(rows)[::repeat]


def rigid_linearized(compiler, static, step, fixed, lanes: Lanes, starts: np.ndarray,
                     values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rigid tree's :func:`chained` linearisation: residuals and their Jacobians.

    Each segment from its start ``starts [S, 2 n_joints]`` (angles, rates) through
    :func:`rigid_sensitivities`. Returns ``(residuals [S, R], ∂/∂start [S, R, 2 n_joints],
    ∂/∂values [S, R, p])`` in the rows ``lanes`` lays out, as :func:`chained` does; the
    residuals equal :func:`replayed_residuals`'.
    """
    joints = starts.shape[1] // 2
    system = built_lane_system(static, fixed, values)
    count, lane_steps = lanes.inputs.shape[1:3]
    samples = np.arange(count)[:, None] * lane_steps + np.arange(lane_steps + 1)
    residuals, in_start, in_values = [], [], []
    for segment, start in enumerate(starts):
        angles, rows = rigid_sensitivities(
            compiler, static, step, fixed, system, start,
            lanes.inputs[segment].reshape(count * lane_steps, -1), lanes.locked[segment], values)
        weights = lanes.weights[segment][..., None]
        error = np.angle(np.exp(1j * (angles[samples] - lanes.measured[segment]))) * weights
        jacobian = (rows[samples] * weights[..., None]).reshape(-1, rows.shape[-1])
        residuals.append(error.reshape(-1))
        in_start.append(jacobian[:, :2 * joints])
        in_values.append(jacobian[:, 2 * joints:])
    return np.stack(residuals), np.stack(in_start), np.stack(in_values)


#: Rigid segments are simulated in lanes of this many grid steps (linearised in runs of this
#: many steps), each from the state the one before it ended in: one compiled program serves
#: every segment length and count. Compliant segments are one lane each. Every lane runs in a
#: call of its own: its loop then compiles into one function
#: (:data:`~mb_estimation.numerics.XLA_FLAGS`), so a call costs its arithmetic. Several lanes
#: a call (vmapped) compiled whole took longer for no gain: four rigid lanes ran as fast per
#: lane on 60 s of data and compiled in 14 s instead of 5 s; the compliant stage of the 10 s
#: release with its segments all in one call compiled in 45 s and solved in 19 s, one a call
#: 33 s and 13 s (measured).
LANE_STEPS = 128


@dataclass(frozen=True)
class Lanes:
    """Every segment cut into ``count`` lanes of ``steps`` grid steps (host arrays).

    ``measured [S, count, steps+1, n_joints]``, ``weights [S, count, steps+1]`` (a lane's first
    sample, the last one's end, unscored; samples past the segment's end unscored), ``inputs
    [S, count, steps, n_inputs]``, ``locked [S, n_joints]`` (as :class:`Segments`).
    """

    measured: np.ndarray
    weights: np.ndarray
    inputs: np.ndarray
    locked: np.ndarray

    @property
    def count(self) -> int:
        return self.inputs.shape[1]


def lanes_of(segments: Segments, steps: int | None = None) -> Lanes:
    """``segments`` in lanes of ``steps`` grid steps (None: one lane per segment)."""
    length = segments.inputs.shape[1]
    steps = length if steps is None else steps
    count = -(-length // steps)
    extra = count * steps - length
    measured = np.pad(segments.measured, ((0, 0), (0, extra), (0, 0)))
    weights = np.pad(segments.weights, ((0, 0), (0, extra)))
    inputs = np.pad(segments.inputs, ((0, 0), (0, extra), (0, 0)))
    samples = np.arange(count)[:, None] * steps + np.arange(steps + 1)
    lane_weights = weights[:, samples]
    lane_weights[:, 1:, 0] = 0.0
    return Lanes(measured[:, samples], lane_weights, inputs[:, samples[:, :-1]],
                 segments.locked)


def _one_by_one(run, states: np.ndarray, values, *data):
    """``run(states, values, *data)`` a row of the first axis at a time (:data:`LANE_STEPS`)."""
    parts = [[np.asarray(out) for out in run(states[row:row + 1], values,
                                              *(d[row:row + 1] for d in data))]
             for row in range(len(states))]
    return [np.concatenate(outs) for outs in zip(*parts, strict=True)]


def chained(run, lanes: Lanes, starts: np.ndarray, values: np.ndarray,
            derivatives: bool = True) -> tuple[np.ndarray, ...]:
    """Each segment's residuals ``[S, R]`` from its lanes, run one after the other.

    ``run(states, values, measured, weights, inputs, locked)``: :func:`linearize_segments` (with
    ``derivatives``) or :func:`segments_residuals`, compiled. Lane ``r + 1`` of a segment
    starts from the end of lane ``r``; with ``derivatives`` the Jacobians in the segment's
    start ``[S, R, 2 n_joints]`` and in the values ``[S, R, p]`` follow by the chain rule.
    """
    state = starts
    to_start = np.broadcast_to(np.eye(starts.shape[1]), (len(starts),) + 2 * starts.shape[1:])
    to_values = np.zeros((len(starts), starts.shape[1], len(values)))
    residuals, in_start, in_values = [], [], []
    for lane in range(lanes.count):
        data = (lanes.measured[:, lane], lanes.weights[:, lane], lanes.inputs[:, lane],
                lanes.locked)
        if not derivatives:
            residual, state = _one_by_one(run, state, values, *data)
            residuals.append(residual)
            continue
        residual, r_state, r_values, end, e_state, e_values = _one_by_one(
            run, state, values, *data)
        residuals.append(residual)
        in_start.append(np.einsum("srk,skj->srj", r_state, to_start))
        in_values.append(r_values + np.einsum("srk,skp->srp", r_state, to_values))
        to_values = e_values + np.einsum("sik,skp->sip", e_state, to_values)
        to_start = np.einsum("sik,skj->sij", e_state, to_start)
        state = end
    if not derivatives:
        return (np.concatenate(residuals, axis=1),)
    return (np.concatenate(residuals, axis=1), np.concatenate(in_start, axis=1),
            np.concatenate(in_values, axis=1))


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


def correlated_statistics(jac_state, jac_values, residual, lane_weights, segments: Segments,
                          variance: float, scale, names
                          ) -> tuple[CorrelatedCovariance, tuple[RecordingShare, ...]]:
    """A shooting fit's covariance with its residuals' correlation in time, and the shares.

    Per recording, its share of the fit's normal equations, in the values' units (``names``).

    ``jac_state [S, R, n]``, ``jac_values [S, R, p]`` (in the values scaled by ``scale``),
    ``residual [S, R]``, ``lane_weights`` (:class:`Lanes`); ``variance``: the residuals' (the
    independent middle is ``variance · TᵀT``). ``T = J_v - J_s (J_sᵀJ_s)⁺ J_sᵀJ_v`` per
    segment: the values' Jacobian with the segment's start state eliminated (3.32). The
    correlated middle takes the recording's segments' scored samples in time order: the scores
    ``T_kᵀ r_k`` summed per sample over the joints, over the lags its angle errors stay
    positively correlated (:func:`correlation_lags`); the longest of those is the covariance's
    ``correlation_s``.
    """
    eliminated = np.einsum("sij,sjk->sik", np.linalg.pinv(np.einsum(
        "sri,srj->sij", jac_state, jac_state)), np.einsum("sri,srk->sik", jac_state, jac_values))
    projected = jac_values - np.einsum("sri,sik->srk", jac_state, eliminated)
    count, joints = len(residual), segments.measured.shape[-1]
    per_sample = (projected * residual[:, :, None]).reshape(count, -1, joints,
                                                             projected.shape[-1]).sum(axis=2)
    errors = residual.reshape(count, -1, joints)
    scored = lane_weights.reshape(count, -1) > 0.0
    unscale = np.outer(scale, scale)
    shares, longest = [], 0
    for recording in np.unique(segments.recording):
        order = [i for i in np.argsort(segments.begin) if segments.recording[i] == recording]
        lags = correlation_lags(np.concatenate([errors[i][scored[i]] for i in order]))
        scores = np.concatenate([per_sample[i][scored[i]] for i in order])
        information = np.einsum("srk,srl->kl", projected[order], projected[order])
        shares.append(RecordingShare(information / unscale, variance * information / unscale,
                                     correlated_middle(scores, lags) / unscale,
                                     scores.sum(axis=0) / scale))
        longest = max(longest, lags)
    covariance = parameter_covariance(sum(share.information for share in shares),
                                      sum(share.correlated_middle for share in shares))
    std = np.sqrt(np.diag(covariance))
    return CorrelatedCovariance(covariance, dict(zip(names, std.tolist(), strict=True)),
                                longest * float(segments.dt)), tuple(shares)
