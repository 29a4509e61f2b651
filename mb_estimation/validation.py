"""Validation of a fitted model: open-loop replays and short-horizon predictions of recordings.

Through the model the config declares: the compliant hinges' SPOOK step
(:func:`prediction_check`, :func:`open_loop_check`) or the rigid tree in joint coordinates
(:func:`rigid_prediction_check`, :func:`rigid_open_loop_check`), and the rigid tree's
simulated angles' sensitivities to the parameters and the start (:func:`recording_sensitivities`:
the Cramér–Rao bound's, the experiment design's and the rigid replay's start). Pure numerics
(no files).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from mb_estimation.compiled import Compiler
from mb_estimation.estimation.shooting_segments import (
    LANE_STEPS,
    built_lane_system,
    frictionless_while_fitting,
    rigid_sensitivities,
    segments_of,
)
from mb_estimation.multibody import (
    BodyStates,
    frictionless_hinges,
    joint_angles,
    rollout,
    without_dry_friction,
)
from mb_estimation.multibody.joint_space import JointStates, joint_states, rigid_start
from mb_estimation.multibody.variational import rigid_chunk
from mb_estimation.numerics import jax
from mb_estimation.rigs import Rig, built_system, parameter_arrays
from mb_estimation.simulation import step_arguments

jnp = jax.numpy


#: An open-loop replay follows a recording while every angle stays this close [rad].
FOLLOWED_RAD = 0.1


@dataclass(frozen=True)
class OpenLoopCheck:
    """A recording replayed open loop through the model (the paper's Figure 5 view).

    ``time_s [n]``; ``measured``/``simulated`` joint angles ``[n, n_joints]`` [rad]; RMS of the
    wrapped angle error per joint [rad] over the first ``first_s`` seconds and over all of it;
    ``followed_s``: how long the replay stays within :data:`FOLLOWED_RAD` of every measured
    angle [s] (an unstable or closed-loop motion is not followed open loop for long, however
    right the model).
    """

    name: str
    time_s: np.ndarray
    measured: np.ndarray
    simulated: np.ndarray
    first_s: float
    rms_first: np.ndarray
    rms_all: np.ndarray
    followed_s: float = float("nan")


@dataclass(frozen=True)
class PredictionCheck:
    """Short-horizon predictions of a fitted model against a recording (validation).

    From estimated states every ``stride_s`` the model is simulated for ``horizon_s`` on the
    recorded input and compared with the measured angles. ``horizons_s [H]`` are the lead
    times scored; ``rms [H, n_joints]`` the RMS wrapped angle error [rad] over all starts at
    each lead time (observed samples only); ``starts`` how many predictions were made.
    """

    name: str
    horizons_s: np.ndarray
    rms: np.ndarray
    starts: int
    simulation_dt: float


def _angles_on_the_way(system, initial: BodyStates, inputs, h: float, substeps: int = 1):
    """The last state and the joint angles ``[n+1, n_joints]`` of a run open loop.

    ``system`` from ``initial``, each row of ``inputs [n, c]`` held for ``substeps`` SPOOK steps
    of ``h``; the angles at ``initial`` and after each input.
    """
    states, _ = rollout(system, initial, h, inputs.shape[0], lambda k, _: inputs[k], substeps)
    angles = jax.vmap(lambda s: joint_angles(system, s))(states)
    return jax.tree_util.tree_map(lambda a: a[-1], states), angles


# An open-loop replay runs in chunks of this many held inputs (the last one padded with its
# final input, the padding's angles dropped), so one compiled rollout serves every recording
# length: one per length compiled for ~3 s each (five peer-rig recordings: 15 s). The rigid
# model's predictions (0.5 s each) run through the same chunks, short enough to waste little,
# and so do the simulation-error stage's plain runs: its lanes' length, one program for all.
REPLAY_CHUNK = LANE_STEPS


#: The checks' programs, compiled once per key in the process (and kept on disk with the
#: compiled-code cache: :mod:`~mb_estimation.program_store`).
_COMPILED = Compiler()


def _driven_chunk(step, system, initial: BodyStates, inputs):
    """One chunk of a replay: :func:`_angles_on_the_way` with ``step = (h, substeps)``."""
    return _angles_on_the_way(system, initial, inputs, *step)

# The compliant model's predictions run this many starts at once (the last batch padded by
# repeating its final start): 2.5× faster than one start after the other (swing-up, 20 starts:
# 1.39 -> 0.56 s), and one compiled program serves every number of starts.
PREDICTION_BATCH = 8


def _predicted_angles(step, system, initials: BodyStates, inputs):
    """:func:`_angles_on_the_way`'s angles ``[B, n+1, n_joints]`` from ``B`` starts at once.

    ``step = (h, substeps)``.
    """
    h, substeps = step
    return jax.vmap(lambda initial, held: _angles_on_the_way(system, initial, held, h,
                                                             substeps)[1])(initials, inputs)


def _padded(inputs) -> np.ndarray:
    """``inputs [n, c]`` padded with its last row to whole chunks of :data:`REPLAY_CHUNK`."""
    inputs = np.asarray(inputs, dtype=np.float64)
    count = inputs.shape[0]
    total = max(1, -(-count // REPLAY_CHUNK)) * REPLAY_CHUNK
    last = inputs[-1:] if count else np.zeros((1, inputs.shape[1]))
    return np.concatenate([inputs, np.repeat(last, total - count, axis=0)])


def _replayed_angles(system, initial: BodyStates, inputs, h: float, substeps: int = 1):
    """Joint angles ``[n+1, n_joints]`` of ``system`` driven open loop by ``inputs [n, c]``.

    :func:`_angles_on_the_way` with ``substeps`` steps of ``h`` per input, run in chunks of
    :data:`REPLAY_CHUNK` with the state carried from one chunk to the next.
    """
    held, step = _padded(inputs), step_arguments(h, substeps)
    pieces, state = [], initial
    for start in range(0, len(held), REPLAY_CHUNK):
        state, angles = _COMPILED(_driven_chunk, None, step, system, state,
                                  held[start:start + REPLAY_CHUNK])
        pieces.append(np.asarray(angles)[1 if start else 0:])
    return np.concatenate(pieces)[:len(inputs) + 1]


def _in_batches(starts, run):
    """``run(batch)`` over :data:`PREDICTION_BATCH` starts at a time; the starts' rows, in order.

    The last batch is padded by repeating its final start, so ``run`` compiles once whatever
    the number of starts; the padding's rows are dropped.
    """
    predicted = []
    for first in range(0, len(starts), PREDICTION_BATCH):
        batch = starts[first:first + PREDICTION_BATCH]
        padded = np.concatenate([batch, np.repeat(batch[-1:], PREDICTION_BATCH - len(batch))])
        predicted.extend(np.asarray(run(padded))[:len(batch)])
    return predicted


def _held(grid, starts, steps: int):
    """The inputs ``[S, steps, c]`` held from each of ``starts`` on."""
    return np.stack([grid.inputs[start:start + steps] for start in starts])


def _substeps(grid, simulation_dt: float) -> int:
    """Simulator steps per grid step: ``simulation_dt`` [s] rounded to divide the grid's step."""
    return max(1, int(round(grid.dt / simulation_dt)))


def _prediction_starts(grid, horizon_s: float, stride_s: float | None):
    """Grid indices the predictions start from, and the steps each one runs."""
    steps = max(1, int(round(horizon_s / grid.dt)))
    stride = steps if stride_s is None else max(1, int(round(stride_s / grid.dt)))
    return np.arange(0, grid.num_steps - 1 - steps + 1, stride), steps


def _scored_prediction(grid, starts, steps: int, predicted, simulation_dt: float
                       ) -> PredictionCheck:
    """RMS error per lead time of ``predicted [S, steps, n_joints]`` angles against ``grid``."""
    errors = np.full((len(starts), steps, grid.measured_angles.shape[1]), np.nan)
    for row, start in enumerate(starts):
        measured = grid.measured_angles[start + 1:start + 1 + steps]
        error = np.angle(np.exp(1j * (predicted[row] - measured)))
        observed = grid.observed[start + 1:start + 1 + steps] > 0
        errors[row][observed] = error[observed]
    lead = (np.arange(steps) + 1) * grid.dt
    keep = np.unique(np.clip(np.round(np.linspace(0.1, 1.0, 10) * steps).astype(int) - 1, 0,
                             steps - 1))
    with warnings.catch_warnings():  # a lead time no start observes (or no start): NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        rms = np.sqrt(np.nanmean(errors[:, keep] ** 2, axis=0))
    return PredictionCheck(name=grid.name, horizons_s=lead[keep], rms=rms,
                           starts=len(starts), simulation_dt=simulation_dt)


def prediction_check(rig: Rig, values: Mapping[str, object], grid, estimate, *,
                     horizon_s: float = 0.5, stride_s: float | None = None,
                     simulation_dt: float = 1e-4) -> PredictionCheck:
    """Predict ``grid`` from ``estimate``'s states every ``stride_s`` over ``horizon_s`` [s].

    The default stride is the horizon: the predictions tile the recording.
    ``estimate`` is the recording's :class:`~mb_estimation.estimation.RecordingEstimate` (its
    body states on the grid); the model steps with ``simulation_dt`` (rounded to divide the
    grid step), holding each grid step's input. Unlike the fit's residuals this measures what a
    user sees: how well the fitted model, run as a simulator, follows the rig for a while.
    """
    system = built_system(rig, parameter_arrays(values))
    substeps = _substeps(grid, simulation_dt)
    starts, steps = _prediction_starts(grid, horizon_s, stride_s)

    step = step_arguments(grid.dt / substeps, substeps)

    def run(batch):
        initials = BodyStates(*(np.asarray(getattr(estimate, part))[batch] for part in (
            "position", "orientation", "linear_velocity", "angular_velocity")))
        return np.asarray(_COMPILED(_predicted_angles, None, step, system,
                                    initials, _held(grid, batch, steps)))[:, 1:]

    return _scored_prediction(grid, starts, steps, _in_batches(starts, run),
                              grid.dt / substeps)


#: The longest step [s] of the rigid model's validation runs (replay, predictions): its
#: second-order error over 8 s of the 0.92 m release is 9e-6 rad RMS (against an independent
#: DOP853 integration of the same equations; 1.4e-4 rad at 1 ms).
RIGID_VALIDATION_DT = 2.5e-4


def rigid_systems(rig: Rig, *values: Mapping[str, object]) -> list:
    """``rig`` built with each of ``values`` for the rigid model's runs, one structure for all.

    The dry friction rows of the hinges whose friction is zero in every one of them are
    dropped (:func:`~mb_estimation.multibody.without_dry_friction`): they carry no impulse, and
    without them the step iterates on the joint angles alone, as the simulation-error stage's
    does, through the same program (:func:`~mb_estimation.multibody.variational.rigid_chunk`).
    """
    systems = [built_system(rig, parameter_arrays(each)) for each in values]
    idle = frictionless_hinges(*systems)
    return [without_dry_friction(system, idle) for system in systems]


def rigid_substeps(grid, simulation_dt: float) -> int:
    """Rigid-model steps per grid step: at most ``simulation_dt`` [s] each."""
    return max(1, int(np.ceil(grid.dt / simulation_dt * (1 - 1e-9))))


#: The sensitivities' longest simulation step [s]: derivatives need less accuracy than a replay
#: (a replay's start refined with them reaches the same start as with the replay's own step).
SENSITIVITY_DT = 2e-3


def recording_sensitivities(rig: Rig, values: Mapping[str, object], names: tuple[str, ...],
                            grid, start: np.ndarray, simulation_dt: float = SENSITIVITY_DT,
                            frictionless: tuple[bool, ...] | None = None) -> np.ndarray:
    """``∂θ_k/∂(values of names, start)`` of the rigid model's simulated angles on ``grid``.

    ``[samples, n_joints, p + 2 n_joints]`` [rad per unit], zero at the samples the recording
    does not observe; from the joint state ``start`` (angles, rates) at its first point, steps
    of at most ``simulation_dt`` [s]. The recording as one segment in the simulation-error
    stage, its forward sensitivities along the replay's states
    (:func:`~mb_estimation.estimation.shooting_segments.rigid_sensitivities`).
    ``frictionless``: the hinges simulated without dry friction rows (None: those that have
    none while ``names`` move,
    :func:`~mb_estimation.estimation.shooting_segments.frictionless_while_fitting`).
    """
    if frictionless is None:
        frictionless = frictionless_while_fitting(rig, dict(values), names)
    joints = start.shape[0] // 2
    segments = segments_of([grid], (grid.num_steps - 1) * grid.dt, 0.0)
    substeps = rigid_substeps(grid, simulation_dt)
    step = (np.asarray(grid.dt / substeps, dtype=np.float64), np.asarray(substeps))
    fixed = {name: np.asarray(value, dtype=np.float64) for name, value in values.items()
             if name not in names}
    free = np.array([float(np.ravel(values[name])[0]) for name in names])
    static = (rig, names, frictionless)
    _, rows = rigid_sensitivities(_COMPILED, static, step, fixed,
                                  built_lane_system(static, fixed, free),
                                  np.asarray(start, dtype=np.float64), segments.inputs[0],
                                  segments.locked[0], free)
    rows = rows[:grid.num_steps] * segments.weights[0][:, None, None]
    return np.concatenate([rows[..., 2 * joints:], rows[..., :2 * joints]], axis=-1)


def rigid_prediction_check(rig: Rig, values: Mapping[str, object], grid, estimate, *,
                           horizon_s: float = 0.5, stride_s: float | None = None,
                           simulation_dt: float = RIGID_VALIDATION_DT) -> PredictionCheck:
    """:func:`prediction_check` through the rig's rigid limit (the consistent path's model).

    The hinges rigid, the motion stepped by the second-order variational step in joint
    coordinates (steps of at most ``simulation_dt``, converged: :data:`RIGID_VALIDATION_DT`)
    from ``estimate``'s joint angles and rates, one start after the other through the open-loop
    replay's program (:func:`rigid_replay`'s chunks): one program fewer to compile and load.
    """
    (system,) = rigid_systems(rig, values)
    substeps = rigid_substeps(grid, simulation_dt)
    starts, steps = _prediction_starts(grid, horizon_s, stride_s)
    step = step_arguments(grid.dt / substeps, substeps)
    locked = grid.locked_mask
    angles, rates = np.asarray(estimate.joint_angles), np.asarray(estimate.joint_rates)
    predicted = [_rigid_run(system, rigid_start(system, np.concatenate([
        angles[start], rates[start]]), locked), grid.inputs[start:start + steps], step, locked)
                 for start in starts]
    return _scored_prediction(grid, starts, steps, predicted, grid.dt / substeps)


def _rigid_run(system, state: JointStates, inputs, step, locked) -> np.ndarray:
    """Joint angles ``[n, n_joints]`` after each of ``inputs [n, c]``, from ``state``.

    In chunks of :data:`REPLAY_CHUNK` held inputs (the last padded, its padding's rows cut):
    one compiled program (:func:`~mb_estimation.multibody.variational.rigid_chunk`) for every
    length; ``step = (h, substeps)``.
    """
    held, pieces = _padded(inputs), []
    for first in range(0, len(held), REPLAY_CHUNK):
        state, chunk = _COMPILED(rigid_chunk, None, step, system, state,
                                 held[first:first + REPLAY_CHUNK], locked)
        pieces.append(np.asarray(chunk.angles))
    return np.concatenate(pieces)[:len(inputs)]


def rigid_replay(system, grid, start, simulation_dt: float = RIGID_VALIDATION_DT,
                 chunks: int | None = None) -> np.ndarray:
    """Joint angles ``[n+1, n_joints]`` of the rigid tree ``system`` driven by ``grid``'s input.

    From the joint state ``start`` = (angles, rates) [rad, rad/s] at the grid's first point
    (the joints the recording holds still at rest there, and kept there); second-order steps of
    at most ``simulation_dt``, run in chunks of :data:`REPLAY_CHUNK` held inputs (one compiled
    program for every recording length); only the first ``chunks`` of them when given (the
    rest of the rows then repeat nothing: they are cut).
    """
    substeps = rigid_substeps(grid, simulation_dt)
    locked, joints = grid.locked_mask, start.shape[0] // 2
    state = rigid_start(system, np.asarray(start, dtype=np.float64), locked)
    inputs = grid.inputs if chunks is None else grid.inputs[:chunks * REPLAY_CHUNK]
    angles = _rigid_run(system, state, inputs, step_arguments(grid.dt / substeps, substeps),
                        locked)
    return np.concatenate([np.asarray(start[None, :joints]), angles])


def rigid_open_loop_check(rig: Rig, values: Mapping[str, object], grid, angles, rates,
                          first_s: float = 1.0,
                          simulation_dt: float = RIGID_VALIDATION_DT,
                          free: Sequence[str] = ()) -> OpenLoopCheck:
    """:func:`open_loop_check` through the rig's rigid limit, from joint ``angles``, ``rates``.

    Converged steps (:func:`rigid_replay`). The start is the estimated state refined to the
    recording's first ``first_s`` (:func:`replay_start`): the fit's states at a recording's
    edge are its least certain, and the replay amplifies their error over the whole recording.
    With scalar ``free`` parameters the refinement's sensitivities are the simulation-error
    stage's (:func:`recording_sensitivities`, the program the stage and the bound compiled for
    that free set, at the bound's step), else finite differences.
    """
    (system,) = rigid_systems(rig, values)

    def replay(start, chunks=None):
        return rigid_replay(system, grid, start, simulation_dt, chunks)

    names = tuple(name for name in free if np.size(values[name]) == 1)
    frictionless = frictionless_while_fitting(rig, dict(values), names) if names else None

    def in_start(candidate, count):
        first = dataclasses.replace(
            grid, time_s=grid.time_s[:count], measured_angles=grid.measured_angles[:count],
            filtered_angles=grid.filtered_angles[:count], inputs=grid.inputs[:count - 1],
            observed=grid.observed[:count], initial_rates=None)
        return recording_sensitivities(rig, values, names, first, candidate,
                                       frictionless=frictionless)[..., len(names):]

    start = np.concatenate([np.asarray(angles, dtype=np.float64),
                            np.asarray(rates, dtype=np.float64)])
    refined = replay_start(grid, replay, start, first_s,
                           sensitivities=in_start if names else None)
    return _scored_replay(grid, replay(refined), first_s)


def replay_start(grid, replay, start, first_s: float, iterations: int = 4,
                 sensitivities=None):
    """The joint state ``start`` that best replays the recording's first ``first_s`` [s].

    Gauss–Newton on the observed angles of that stretch; ``sensitivities(start, count)``: the
    replayed angles' derivatives in the start ``[count, n_joints, 2 n_joints]`` over its
    first ``count`` samples, or (None) finite differences of ``replay(start, chunks)`` (the
    replay's own compiled chunks). A step is kept only when it lowers the squared error.
    """
    count = min(int(round(first_s / grid.dt)) + 1, grid.num_steps)
    chunks = -(-max(count - 1, 1) // REPLAY_CHUNK)
    observed = np.asarray(grid.observed[:count]) > 0
    measured = np.asarray(grid.measured_angles[:count])[observed]

    def error(candidate):
        return (replay(candidate, chunks)[:count][observed] - measured).ravel()

    current = error(start)
    joints = start.shape[0] // 2
    deltas = np.concatenate([np.full(joints, 1e-6), np.full(joints, 1e-5)])
    for _ in range(iterations):
        if sensitivities is not None:
            jacobian = sensitivities(start, count)[observed].reshape(-1, 2 * joints)
        else:
            jacobian = np.stack([
                (error(start + delta * unit) - current) / delta
                for delta, unit in zip(deltas, np.eye(len(start)), strict=True)], axis=1)
        step, *_ = np.linalg.lstsq(jacobian, -current, rcond=None)
        trial = error(start + step)
        if not np.all(np.isfinite(trial)) or trial @ trial >= current @ current:
            break
        start, current = start + step, trial
    return start


def compile_validation(rig: Rig, values: Mapping[str, object], grid, *,
                       horizon_s: float = 0.5, simulation_dt: float = 1e-4,
                       rigid: bool = False) -> None:
    """Compile what the predictions and the open-loop replay run on ``grid``.

    Nothing is run: the programs depend on the rig, the grid's step and the horizon, not on
    the estimate, so a thread can compile them while the fit that gives the estimate runs.
    ``values``: any parameter values of the rig (their shapes count, and for the rigid model
    which hinges have no dry friction: :func:`rigid_systems`). ``rigid``:
    :func:`rigid_prediction_check` and :func:`rigid_open_loop_check`; else
    :func:`prediction_check` and :func:`open_loop_check` at ``simulation_dt``.
    """
    system = built_system(rig, parameter_arrays(values))
    _, steps = _prediction_starts(grid, horizon_s, None)
    bodies, inputs = system.num_bodies, np.shape(grid.inputs)[1]
    joints = len(rig.spec.joints)

    def arrays(*shape):
        return jax.ShapeDtypeStruct(shape, jnp.float64)

    if rigid:  # the structure of rigid_systems': which hinges' friction is idle counts
        (system,) = rigid_systems(rig, values)
        substeps = rigid_substeps(grid, RIGID_VALIDATION_DT)
        step = step_arguments(grid.dt / substeps, substeps)
        state = jax.eval_shape(joint_states, system, arrays(joints), arrays(joints))
        _COMPILED.executable(rigid_chunk, None, step, system, state,
                             arrays(REPLAY_CHUNK, inputs), arrays(joints))
        return

    substeps = _substeps(grid, simulation_dt)

    def states(*batch):
        return BodyStates(arrays(*batch, bodies, 3), arrays(*batch, bodies, 4),
                          arrays(*batch, bodies, 3), arrays(*batch, bodies, 3))

    step = step_arguments(grid.dt / substeps, substeps)
    _COMPILED.executable(_predicted_angles, None, step, system, states(PREDICTION_BATCH),
                         arrays(PREDICTION_BATCH, steps, inputs))
    _COMPILED.executable(_driven_chunk, None, step, system, states(),
                         arrays(REPLAY_CHUNK, inputs))


def open_loop_check(rig: Rig, values: Mapping[str, object], grid, initial: BodyStates,
                    first_s: float = 1.0, simulation_dt: float | None = None) -> OpenLoopCheck:
    """Replay ``grid`` open loop: ``rig`` with parameter ``values``, from ``initial``.

    ``initial`` holds the body states at the grid's first point (e.g. the estimated ones); the
    model runs SPOOK steps of ``simulation_dt`` (rounded to divide the grid step; default the
    grid's step) on its held inputs and is compared with its angles. Grid points without
    observation (gaps) are left out of the RMS.
    """
    system = built_system(rig, parameter_arrays(values))
    substeps = 1 if simulation_dt is None else _substeps(grid, simulation_dt)
    return _scored_replay(grid, _replayed_angles(system, initial, grid.inputs,
                                                 grid.dt / substeps, substeps), first_s)


def _scored_replay(grid, simulated, first_s: float) -> OpenLoopCheck:
    """The RMS error of replayed angles ``[n, n_joints]`` against ``grid``'s measured ones."""
    simulated = np.unwrap(simulated, axis=0)  # multi-turn, like the recording
    simulated = simulated + np.round((grid.measured_angles[0] - simulated[0]) / (2 * np.pi)) \
        * 2 * np.pi  # same turn as the recording at the start
    error = np.angle(np.exp(1j * (simulated - grid.measured_angles)))
    observed = grid.observed > 0
    early = observed & (grid.time_s < grid.time_s[0] + first_s)
    off = np.flatnonzero(observed & np.any(np.abs(error) > FOLLOWED_RAD, axis=1))
    followed = grid.time_s[off[0] if len(off) else -1] - grid.time_s[0]
    return OpenLoopCheck(
        name=grid.name, time_s=grid.time_s, measured=grid.measured_angles, simulated=simulated,
        first_s=first_s,
        rms_first=np.sqrt(np.mean(error[early] ** 2, axis=0)),
        rms_all=np.sqrt(np.mean(error[observed] ** 2, axis=0)), followed_s=float(followed))
