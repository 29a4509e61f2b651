"""The pipeline shared by the command line and the node: config + recordings → estimate.

recording → signals (grid) → estimation problem → result (data flows one way).
Two estimators (``method.estimator``): the consistent path (default; joint coordinates, refined
steps, :mod:`mb_estimation.estimation.consistent`) and the paper's single fit at ``method.dt``.
The sweep over method settings, a loop over :func:`calibrate_recordings`, is
:func:`mb_estimation.workflows.sweep`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from mb_estimation.config import Config, apply_overrides
from mb_estimation.cramer_rao import CramerRao, cramer_rao_bound
from mb_estimation.estimation import (
    EstimationProblem,
    EstimationResult,
    IterationRecord,
    SolverSettings,
    compile_model,
    estimate,
    estimate_consistently,
    refinement_steps,
)
from mb_estimation.estimation.consistent import SimulationRefinement, refined_through_simulator
from mb_estimation.estimation.identifiability import Identifiability, identifiability
from mb_estimation.estimation.input_delay import InputDelay, apparent_input_delay
from mb_estimation.estimation.shooting import ShootingSettings
from mb_estimation.multibody import BodyStates
from mb_estimation.rigs import Rig, get_rig, parameter_arrays
from mb_estimation.rigs.parameters import DRY_FRICTION_PARAMETERS
from mb_estimation.signals import GridData, Recording, prepare_recording
from mb_estimation.simulation import (
    RIGID_VALIDATION_DT,
    OpenLoopCheck,
    PredictionCheck,
    built_system,
    compile_validation,
    open_loop_check,
    prediction_check,
    rigid_open_loop_check,
    rigid_prediction_check,
)


def config_rig(config: Config) -> Rig:
    """The rig a config describes: its model, its constraint rows, and its friction.

    Dry friction only on the hinges whose friction parameters are free or non-zero (the other
    hinges' friction rows would carry nothing).
    """
    flags = tuple(any(name in config.free or np.any(np.asarray(config.parameters[name]) != 0)
                      for name in names if name in config.parameters)
                  for names in DRY_FRICTION_PARAMETERS[config.rig])
    return get_rig(config.rig, config.friction, config.drift_correction, flags)


# Bounds of the consistent path's automatic finest step (the recordings' sample period) [s].
SMALLEST_AUTOMATIC_STEP = 1e-4
LARGEST_AUTOMATIC_STEP = 0.01


def prepare(config: Config, recordings: Sequence[Recording], *, start_s: float | None = None,
            end_s: float | None = None, dt: float | None = None) -> tuple[GridData, ...]:
    """Every recording on the estimation grid of step ``dt`` (default: the config's ``dt``)."""
    method = config.method
    step = method.dt if dt is None else dt
    return tuple(prepare_recording(delayed_input(config, r), step, method.filter_cutoff_hz,
                                   start_s=start_s, end_s=end_s) for r in recordings)


def delayed_input(config: Config, recording: Recording) -> Recording:
    """``recording`` with its input acting ``recording.input_delay_s`` after its stamps."""
    delay = config.recording.input_delay_s
    if not delay:
        return recording
    return dataclasses.replace(recording, input_time_s=np.asarray(recording.input_time_s) + delay)


def sample_period(recordings: Sequence[Recording]) -> float:
    """The recordings' median joint-angle sample period [s] (to 9 significant digits)."""
    period = np.median(np.concatenate([np.diff(np.sort(np.asarray(r.time_s, float)))
                                       for r in recordings]))
    return float(f"{period:.9g}")


def consistent_steps(config: Config, recordings: Sequence[Recording]) -> tuple[float, ...]:
    """The consistent path's steps [s], coarse to fine.

    The finest is ``method.refinement_dt``, or the recordings' sample period (within
    [:data:`SMALLEST_AUTOMATIC_STEP`, :data:`LARGEST_AUTOMATIC_STEP`]): every sample then has
    its own grid point, and a finer step adds no information, only cost.
    """
    method = config.method
    finest = method.refinement_dt
    if finest is None:
        finest = min(max(sample_period(recordings), SMALLEST_AUTOMATIC_STEP),
                     LARGEST_AUTOMATIC_STEP)
    return refinement_steps(finest, method.refinement_levels)


def finest_step(config: Config, recordings: Sequence[Recording]) -> float:
    """The step [s] of the config's (final) fit.

    ``method.dt`` for the paper's single fit, the finest of :func:`consistent_steps` for the
    consistent path.
    """
    if config.method.estimator == "paper":
        return config.method.dt
    return consistent_steps(config, recordings)[-1]


def warm_up_recording(config: Config, duration_s: float, rate_hz: float) -> Recording:
    """A synthetic recording of the config's joints: slow sines at ``rate_hz``, no input.

    For compiling before the data arrive: the programs depend on its shape, not its content.
    """
    time_s = np.arange(0.0, duration_s + 2.0 / rate_hz, 1.0 / rate_hz)
    angles = np.stack([0.3 * np.sin(2.0 * np.pi * 0.5 * time_s + j)
                       for j in range(len(config.rig_spec.joints))], axis=1)
    return Recording("warm-up", time_s, angles, np.array([0.0]),
                     np.zeros((1, len(config.rig_spec.inputs))))


def compile_ahead(config: Config) -> float:
    """Compile the model programs :func:`calibrate_recordings` will need, before any data.

    Its fit's model blocks and shadow states compile per chunk of steps for the config's rig,
    free set and estimator, whatever the recordings (:func:`~mb_estimation.estimation.
    compile_model`), so a short :func:`warm_up_recording` compiles them: in a thread while the
    recordings are read or simulated. Returns the seconds spent compiling.
    """
    recording = warm_up_recording(config, 0.2, 1000.0)
    problem = estimation_problem(config, prepare(config, [recording],
                                                 dt=finest_step(config, [recording])))
    if config.method.estimator != "paper":
        problem = dataclasses.replace(problem, formulation="joint")
    return compile_model(problem, solver_settings(config))


@contextlib.contextmanager
def compiling_meanwhile(compile_function: Callable, *args):
    """Run ``compile_function(*args)`` in a thread while the block runs; wait for it at the end.

    For compilations that do not need the block's results (:func:`compile_ahead`,
    :func:`compile_checks`): they take a core the block leaves idle while it simulates,
    reads or solves, and the block finds them compiled, or waits for the one it needs
    (:class:`~mb_estimation.estimation.compiled.Compiler`). An error in the thread is dropped:
    the block compiles what it needs itself and meets any real error there. With one core
    there is no idle one to use: nothing is started (the demo took 0.6 s longer with the
    thread).
    """
    if len(os.sched_getaffinity(0)) < 2:
        yield
        return

    def run():
        with contextlib.suppress(Exception):
            compile_function(*args)

    thread = threading.Thread(target=run, name="compile-ahead", daemon=True)
    thread.start()
    try:
        yield
    finally:
        thread.join()  # never leave XLA compiling while the interpreter shuts down


def recording_notes(recordings: Sequence[Recording], grids: Sequence[GridData]) -> list[str]:
    """What reading did to each recording (stamps, dropped samples, gaps, trimming).

    ``grids``: the recordings on an estimation grid (:func:`prepare`), for the steps that fall
    in gaps between samples.
    """
    notes = []
    for recording, grid in zip(recordings, grids, strict=True):
        notes += [f"{recording.name}: {note}" for note in recording.notes]
        unobserved = int(len(grid.observed) - grid.observed.sum())
        if unobserved:
            notes.append(f"{recording.name}: {unobserved} of {len(grid.observed)} estimation "
                         "steps fall in gaps between samples: bridged, without observations")
    return notes


@dataclass(frozen=True)
class Calibration:
    """A calibration's result and the recordings on the grid of its (final) fit.

    ``predictions``: the result's :func:`prediction_checks` where the calibration computed
    them (whether to keep a simulation-error fit is decided by them), else None; ``note``:
    what that decision was and why, for the user.
    """

    result: EstimationResult
    grids: tuple[GridData, ...]
    predictions: tuple[PredictionCheck, ...] | None = None
    note: str | None = None


def refinement_mode(config: Config) -> str:
    """``method.simulation_refinement`` in effect: as set, else ``on``.

    Unset, the fit goes on through the model the hinges declare: compliant hinges are the
    rig's physics, which the rigid limit lacks; through rigid ones the simulation-error fit
    takes the estimate to the Cramér–Rao bound, where the joint fit's force noise leaves the
    frictions several times wider (kept where its simulations follow the recordings, else
    only where it predicts them no worse: :func:`calibrate_recordings`).
    """
    mode = config.method.simulation_refinement
    return "on" if mode is None else mode


#: The rigid simulation-error stage's step [s] (halved for the kept fit) and longest segment
#: [s]: its second-order error over 8 s of the 0.92 m release is 1.4e-4 rad at 1 ms, a
#: seventh of 1e-3 rad noise; segments are lengthened up to whole recordings unless the
#: motion amplifies its start (unstable).
RIGID_SHOOTING_DT = 1e-3
RIGID_LONGEST_SEGMENT_S = 16.0


def simulation_refinement(config: Config) -> SimulationRefinement:
    """The consistent path's optional last level, a simulation-error fit, from the config.

    Through the model the config's hinges declare: the config's simulator for compliant ones
    (``simulation.dt``; each shooting segment starts ``3 τ``, the hinges' slowest relaxation
    time, before its scored part), the converged rigid model for rigid ones.
    """
    if config.hinges == "rigid":
        return SimulationRefinement(RIGID_SHOOTING_DT, ShootingSettings(
            segment_s=config.method.simulation_segment_s, lead_s=0.0, rigid=True,
            longest_segment_s=RIGID_LONGEST_SEGMENT_S, kept_step_divisor=2))
    taus = [float(value) for name, value in config.parameters.items() if name.startswith("tau")]
    return SimulationRefinement(config.simulation.dt, ShootingSettings(
        segment_s=config.method.simulation_segment_s, lead_s=3.0 * max(taus, default=0.0)))


def calibrate_recordings(config: Config, recordings: Sequence[Recording], *,
                         start_s: float | None = None, end_s: float | None = None,
                         estimate_parameters: bool = True,
                         progress: Callable[[IterationRecord], None] | None = None,
                         level_started: Callable[[int, float, EstimationProblem], None]
                         | None = None,
                         simulation_progress: Callable[[int, float, dict], None] | None = None
                         ) -> Calibration:
    """Estimate the config's free parameters and the states with the config's estimator.

    ``consistent``: joint coordinates over :func:`consistent_steps` (with
    ``estimate_parameters=False`` only the states, at the finest step), then a
    simulation-error fit through the model the hinges declare (:func:`simulation_refinement`)
    as ``method.simulation_refinement`` says: unset, on (for rigid hinges kept as
    :func:`_kept_if_it_follows` decides; recordings shorter than one segment keep the joint
    fit, with a note); ``auto``: when the joint fit does not predict the recordings
    (:func:`prediction_mismatch`), kept only when the refit predicts better. ``paper``: the
    single fit at ``method.dt``.
    """
    if config.method.estimator == "paper":
        grids = prepare(config, recordings, start_s=start_s, end_s=end_s)
        if level_started is not None:
            level_started(0, config.method.dt, estimation_problem(config, grids))
        return Calibration(calibrate(config, grids, estimate_parameters=estimate_parameters,
                                     progress=progress), grids)
    mode = refinement_mode(config) if estimate_parameters else "off"
    simulation = simulation_refinement(config) if mode != "off" else None
    steps = consistent_steps(config, recordings)
    if not estimate_parameters:
        steps = steps[-1:]
    prepared: dict[float, tuple[GridData, ...]] = {}

    def problem_at(dt: float) -> EstimationProblem:
        prepared[dt] = prepare(config, recordings, start_s=start_s, end_s=end_s, dt=dt)
        return estimation_problem(config, prepared[dt], estimate_parameters=estimate_parameters)

    note = None
    declared = config.method.simulation_refinement is None
    if mode == "on" and declared:
        segment_s = simulation.settings.segment_s + simulation.settings.lead_s
        shortest = min(float(np.ptp(r.time_s)) for r in recordings)
        if shortest < segment_s:  # not asked for: say so and keep the joint fit
            mode, note = "off", (
                f"the recordings ({shortest:.3g} s) are shorter than one segment of the "
                f"simulation-error fit ({segment_s:g} s): the joint fit is kept"
                + (", and its values may be shadows of the declared compliant hinges"
                   if config.hinges == "compliant" else ""))
    result = estimate_consistently(problem_at, steps, solver_settings(config), progress=progress,
                                   level_started=level_started)
    grids = prepared[steps[-1]]
    if mode == "off":
        return Calibration(result, grids, note=note)
    if mode == "auto":
        return _refined_if_mispredicted(config, grids, result, simulation, len(steps),
                                        level_started, simulation_progress)
    problem = estimation_problem(config, grids)
    if level_started is not None:
        level_started(len(steps), simulation.simulation_dt, problem)
    refined = refined_through_simulator(result, problem, simulation, simulation_progress)
    if declared and config.hinges == "rigid":
        return _kept_if_it_follows(config, grids, result, refined)
    return Calibration(refined, grids)


def _kept_if_it_follows(config: Config, grids: tuple[GridData, ...], result: EstimationResult,
                        refined: EstimationResult) -> Calibration:
    """The rigid simulation-error fit ``refined`` where the rigid model follows the recordings.

    It follows them where the stage's simulations miss the angles by at most
    :data:`FOLLOWS_NOISE_RATIO` times the joint fit's angle noise (RMS). Where they miss by
    more, it is kept only if it predicts 0.5 s ahead from the joint fit's states no worse than
    the joint fit (:func:`prediction_mismatch`): where the rigid model does not follow the rig,
    the joint fit's force noise is what keeps it robust, and a simulation-error fit through
    that model can go further astray. (The predictions alone cannot decide: on a fast, chaotic
    motion both miss by many times the noise from the joint fit's states alone.)
    """
    following = stage_following(grids, refined)
    if following.follows:
        return Calibration(refined, grids)
    before = prediction_mismatch(grids, result, prediction_checks(config, grids, result))
    after_checks = prediction_checks(config, grids, refined)
    after = prediction_mismatch(grids, refined, after_checks)
    if before is None or after is None or after.ratio <= before.ratio:
        return Calibration(refined, grids, after_checks)
    return Calibration(
        dataclasses.replace(result, compile_time_s=refined.compile_time_s,
                            solve_time_s=refined.solve_time_s),
        grids, None,
        f"the simulation-error fit through the rigid model misses the angles by "
        f"{following.rms_rad:.2g} rad RMS ({following.ratio:.1f}× the joint fit's noise) and "
        "predicts them worse "
        f"({after.ratio:.1f}× the noise at {after.horizon_s:g} s, against {before.ratio:.1f}× "
        "for the joint fit), so the joint fit is kept")


#: The rigid model follows recordings its simulation-error fit misses by at most this many
#: times the joint fit's angle noise (RMS; on the independent rigid reference: 1.0×).
FOLLOWS_NOISE_RATIO = 1.5

#: The least angle noise [rad] a validation is scored against: below it a run is as close as
#: the simulator that scores it (the rigid validation step's own error over 8 s of the 0.92 m
#: release is 9e-6 rad RMS), so noise-free data do not turn round-off into findings.
NOISE_FLOOR_RAD = 1e-5


@dataclass(frozen=True)
class StageFollowing:
    """How closely the simulation-error stage's simulations follow the recordings.

    ``rms_rad``: their angle error over the scored samples (RMS) [rad], each simulated from its
    fitted start over ``segment_s`` [s]; ``ratio``: that over the joint fit's angle noise (RMS
    over recordings and joints, at least :data:`NOISE_FLOOR_RAD`).
    """

    rms_rad: float
    ratio: float
    segment_s: float

    @property
    def follows(self) -> bool:
        return self.ratio <= FOLLOWS_NOISE_RATIO


def stage_following(grids: Sequence[GridData], result: EstimationResult
                    ) -> StageFollowing | None:
    """The last level's :class:`StageFollowing`; None unless it is a simulation-error fit.

    The result's states are the joint fit's (the stage fits segment starts of its own), so
    :func:`fit_noise_rad` of ``result`` is the joint fit's noise.
    """
    if not result.refinement or result.refinement[-1].formulation != "simulation":
        return None
    stage = result.refinement[-1]
    noise = float(np.sqrt(np.mean(np.square(fit_noise_rad(grids, result)))))
    rms = float(np.sqrt(stage.cost))
    return StageFollowing(rms, rms / max(noise, NOISE_FLOOR_RAD), float(stage.segment_s))


def fit_noise_rad(grids: Sequence[GridData], result: EstimationResult) -> np.ndarray:
    """Per recording and joint, the RMS of the measured minus the estimated angles [rad].

    Over the observed samples; shape ``[recordings, joints]``.
    """
    rows = []
    for grid, states in zip(grids, result.recordings, strict=True):
        observed = np.asarray(grid.observed) > 0
        rows.append(np.sqrt(np.mean((states.joint_angles[observed]
                                     - grid.measured_angles[observed]) ** 2, axis=0)))
    return np.array(rows)


def _refined_if_mispredicted(config: Config, grids: tuple[GridData, ...],
                             result: EstimationResult, simulation: SimulationRefinement,
                             level: int, level_started, simulation_progress) -> Calibration:
    """``method.simulation_refinement: auto`` after the joint fit ``result``.

    Refit through the simulator when the joint fit mispredicts (:func:`prediction_mismatch`),
    keep the refit when it predicts better; the calibration's note says which, and why.
    ``level``: the refit's index for ``level_started``.
    """
    predictions = prediction_checks(config, grids, result)
    mismatch = prediction_mismatch(grids, result, predictions)
    if mismatch is None or mismatch.ratio <= PREDICTION_NOISE_RATIO:
        return Calibration(result, grids, predictions)
    segment_s = simulation.settings.segment_s + simulation.settings.lead_s
    if min((grid.num_steps - 1) * grid.dt for grid in grids) < segment_s:
        return Calibration(result, grids, predictions, (
            f"{mismatch}; the recordings are shorter than one segment of the simulation "
            f"refinement ({segment_s:g} s), so it was not tried"))
    problem = estimation_problem(config, grids)
    if level_started is not None:
        level_started(level, simulation.simulation_dt, problem)
    refined = refined_through_simulator(result, problem, simulation, simulation_progress)
    refined_predictions = prediction_checks(config, grids, refined)
    after = prediction_mismatch(grids, refined, refined_predictions)
    if after is not None and after.ratio < mismatch.ratio:
        return Calibration(refined, grids, refined_predictions, (
            f"{mismatch}: refitted through the config's simulator "
            f"(method.simulation_refinement: auto), which misses by {after.ratio:.1f}×"))
    shown = "no prediction" if after is None else f"{after.ratio:.1f}×"
    return Calibration(
        dataclasses.replace(result, compile_time_s=refined.compile_time_s,
                            solve_time_s=refined.solve_time_s),
        grids, predictions,
        f"{mismatch}; refitting through the config's simulator predicted no better ({shown}), "
        "so the rigid-hinge fit is kept: look for what neither model has (friction, the input "
        "model) — or a motion too sensitive to predict that far")


def solver_settings(config: Config) -> SolverSettings:
    """The LM settings of the config's method section."""
    method = config.method
    return SolverSettings(kappa=method.kappa, max_iterations=method.max_iterations,
                          gradient_tolerance=method.gradient_tolerance,
                          step_tolerance=method.step_tolerance,
                          time_limit_s=method.time_limit_s)


def calibrate(config: Config, grids: Sequence[GridData], *, estimate_parameters: bool = True,
              progress: Callable[[IterationRecord], None] | None = None) -> EstimationResult:
    """The paper's single fit (§3, maximal coordinates) on recordings already on the grid.

    With ``estimate_parameters=False`` only the states (cross-validation, §4.5).
    :func:`calibrate_recordings` chooses by ``method.estimator`` (the node goes through it too).
    """
    problem = estimation_problem(config, grids, estimate_parameters=estimate_parameters)
    return estimate(problem, solver_settings(config), progress=progress)


def open_loop_checks(config: Config, grids: Sequence[GridData], result: EstimationResult,
                     first_s: float = 1.0) -> tuple[OpenLoopCheck, ...]:
    """Each recording replayed open loop with the result's parameters.

    From each recording's estimated initial state (validation: does the model reproduce the
    recording by itself?), through the model the config declares (:func:`validation_model`).
    """
    rig = config_rig(config)
    if config.hinges == "rigid":
        return tuple(rigid_open_loop_check(rig, result.parameters, grid, estimate.joint_angles[0],
                                           estimate.joint_rates[0], first_s)
                     for grid, estimate in zip(grids, result.recordings, strict=True))
    return tuple(
        open_loop_check(rig, result.parameters, grid, BodyStates(
            estimate.position[0], estimate.orientation[0], estimate.linear_velocity[0],
            estimate.angular_velocity[0]), first_s, simulation_dt=config.simulation.dt)
        for grid, estimate in zip(grids, result.recordings, strict=True))


def validation_model(config: Config) -> str:
    """What the replay and the predictions run, in words (for the outputs)."""
    if config.hinges == "rigid":
        return (f"the rigid model in joint coordinates, second-order steps of at most "
                f"{RIGID_VALIDATION_DT:g} s")
    return (f"the config's compliant hinges (SPOOK, steps of {config.simulation.dt:g} s)")


def compile_checks(config: Config, grids: Sequence[GridData]) -> None:
    """Compile :func:`prediction_checks` and :func:`open_loop_checks` on ``grids``, run nothing.

    They depend on the config's rig and simulator and the grid, not on the estimate: a thread
    compiles them while the fit runs (:func:`~mb_estimation.simulation.compile_validation`).
    """
    compile_validation(config_rig(config), config.parameters, grids[0],
                       simulation_dt=config.simulation.dt, rigid=config.hinges == "rigid")


def prediction_checks(config: Config, grids: Sequence[GridData], result: EstimationResult,
                      horizon_s: float = 0.5) -> tuple[PredictionCheck, ...]:
    """Each recording predicted over ``horizon_s`` from the estimated states (validation).

    The fitted parameters run in the model the config declares (:func:`validation_model`):
    rigid hinges through the converged rigid model, compliant ones through the config's own
    simulator (its hinges, rows and ``simulation.dt``), as ``simulate --parameters`` would.
    """
    rig = config_rig(config)
    if config.hinges == "rigid":
        return tuple(rigid_prediction_check(rig, result.parameters, grid, estimate,
                                            horizon_s=horizon_s)
                     for grid, estimate in zip(grids, result.recordings, strict=True))
    return tuple(prediction_check(rig, result.parameters, grid, estimate, horizon_s=horizon_s,
                                  simulation_dt=config.simulation.dt)
                 for grid, estimate in zip(grids, result.recordings, strict=True))


#: A prediction error above this many times the fit's angle noise says the model does not
#: follow the data over the horizon (the rigid limit against §4.7's damped hinges: 7×; the
#: simulation refinement on the same data: 1.5–2×).
PREDICTION_NOISE_RATIO = 5.0


@dataclass(frozen=True)
class PredictionMismatch:
    """How far a fit's prediction misses its own noise.

    ``ratio``: the prediction error at the longest lead over the fit's angle noise, for the
    worst joint of the worst recording (``name``).
    """

    ratio: float
    name: str
    horizon_s: float
    noise_rad: tuple[float, ...]  # per joint: RMS of measured minus estimated angles [rad]

    def __str__(self) -> str:
        return (f"the rigid-hinge fit, run {self.horizon_s:g} s ahead, misses the angles of "
                f"{self.name} by {self.ratio:.0f}× the fit's noise "
                f"({', '.join(f'{v:.2g}' for v in self.noise_rad)} rad)")


def prediction_mismatch(grids: Sequence[GridData], result: EstimationResult,
                        checks: Sequence[PredictionCheck]) -> PredictionMismatch | None:
    """The worst prediction error over the fit's noise (None without a prediction).

    The noise is the RMS of the measured minus the estimated angles (observed samples), per
    joint, at least :data:`NOISE_FLOOR_RAD`; the prediction error the RMS at the longest lead
    of ``checks`` (:func:`prediction_checks`). Above :data:`PREDICTION_NOISE_RATIO` the model
    does not follow the data over the horizon.
    """
    worst = None
    for noise, check in zip(fit_noise_rad(grids, result), checks, strict=True):
        if not check.starts:
            continue
        ratio = float(np.max(np.asarray(check.rms[-1]) / np.maximum(noise, NOISE_FLOOR_RAD)))
        if worst is None or ratio > worst.ratio:
            worst = PredictionMismatch(ratio, check.name, float(check.horizons_s[-1]),
                                       tuple(float(v) for v in noise))
    return worst


def starting_from(config: Config, initial: Config) -> Config:
    """``config`` with ``initial``'s free parameters, started from ``initial``'s values.

    E.g. the synthetic rig (the truth) fitted from ``furuta.yaml``'s Table 1 values.
    """
    free = list(initial.free)
    return apply_overrides(config, free=free,
                           set_values={name: initial.parameters[name] for name in free})


def estimation_problem(config: Config, grids: Sequence[GridData], *,
                       estimate_parameters: bool = True) -> EstimationProblem:
    """The config's rig, values, free parameters and their box, on recordings on the grid."""
    free = tuple(config.free) if estimate_parameters else ()
    return EstimationProblem(
        rig=config_rig(config),
        parameters=config.parameters,
        free=free,
        lower={name: config.free[name].lower for name in free},
        upper={name: config.free[name].upper for name in free},
        recordings=tuple(grids),
    )


def input_delay(config: Config, recordings: Sequence[Recording],
                result: EstimationResult) -> InputDelay | None:
    """The input's apparent delay beyond ``recording.input_delay_s``, over all recordings.

    Measured on the fit's states through the rigid model
    (:func:`~mb_estimation.estimation.input_delay.apparent_input_delay`); the recordings'
    delays are averaged by their information. None for a rig without input or an input that
    never changes.
    """
    if not config.rig_spec.inputs:
        return None
    system = built_system(config_rig(config), parameter_arrays(result.parameters))
    found = []
    for recording, states in zip(recordings, result.recordings, strict=True):
        recording = delayed_input(config, recording)
        delay = apparent_input_delay(system, states.time_s, states.joint_angles,
                                     states.joint_rates, recording.input_time_s,
                                     recording.inputs)
        if delay is not None and np.isfinite(delay.std_s) and delay.std_s > 0:
            found.append(delay)
    if not found:
        return None
    weights = np.array([1.0 / d.std_s**2 for d in found])
    mean = float(np.sum(weights * [d.delay_s for d in found]) / np.sum(weights))
    return InputDelay(mean, float(1.0 / np.sqrt(np.sum(weights))))


def cramer_rao_of(config: Config, grids: Sequence[GridData], result: EstimationResult
                  ) -> CramerRao | None:
    """The Cramér–Rao bound of the fit's scalar free parameters on its recordings.

    Through the rigid model, for rigid hinges (:mod:`mb_estimation.cramer_rao`), with each
    recording's angle noise as the fit left it; None for compliant hinges (their refinement
    is itself a simulation-error fit).
    """
    if config.hinges != "rigid":
        return None
    starts = [np.concatenate([states.joint_angles[0], states.joint_rates[0]])
              for states in result.recordings]
    return cramer_rao_bound(config_rig(config), result.parameters, result.free, grids, starts,
                            list(fit_noise_rad(grids, result)))


def identifiability_of(config: Config, result: EstimationResult,
                       bound: CramerRao | None = None) -> Identifiability:
    """What the data determine of the config's free parameters, in ``result`` (its box).

    With the Cramér–Rao ``bound`` (:func:`cramer_rao_of`) where there is one; an inertia that
    adds to the rig's rest inertia (J_Azz, J_shaft; J_P) is read in that sum.
    """
    free = tuple(result.free)
    return identifiability(free, result.parameters, result.std, result.covariance,
                           {name: config.free[name].lower for name in free},
                           {name: config.free[name].upper for name in free},
                           None if bound is None else (bound.names, bound.covariance,
                                                       bound.information),
                           _rest_inertia_offsets(config, result))


def _rest_inertia_offsets(config: Config, result: EstimationResult) -> dict[str, float]:
    """Per free parameter that adds to the rig's rest inertia, the rest of it [kg m²].

    The inertia the first joint turns with at rest (``Rig.rest_inertia``: J_shaft + J_Azz +
    m_A l1² + m_B lA² + J_Bxx for the Furuta rig); what the arm's motion sees of J_Azz.
    """
    rest_inertia = config_rig(config).rest_inertia
    values = result.parameters
    total = rest_inertia(values)
    offsets = {}
    for name in result.free:
        if np.size(values[name]) == 1:
            added = rest_inertia({**values, name: np.asarray(values[name]) + 1.0}) - total
            if abs(added - 1.0) < 1e-9:
                offsets[name] = total - float(np.asarray(values[name]))
    return offsets


def method_summary(config: Config, result: EstimationResult | None = None) -> dict:
    """The method settings as written into parameters.yaml (with the steps the fit used)."""
    summary = asdict(config.method)
    if result is not None and result.refinement:
        joint = [level for level in result.refinement if level.formulation == "joint"]
        summary["steps"] = [float(level.dt) for level in joint]
        summary["kappa_per_step"] = [float(level.kappa) for level in joint]
        if "rest_inertia" in result.settings:  # what κ was scaled by (consistent.kappa_per_step)
            summary["rest_inertia"] = float(result.settings["rest_inertia"])
            summary["kappa_reference_inertia"] = float(result.settings["kappa_reference_inertia"])
    return summary
