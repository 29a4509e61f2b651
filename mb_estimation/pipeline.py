"""What a calibration needs from the config, shared by the command line and the node.

recording → signals (grid) → estimation problem → result (data flows one way): the rig, the
grids, the steps, the problem and the solver settings a config gives; the checks that validate
a result (predictions, open-loop replays, the Cramér–Rao bound, what the data determine). The
stages a calibration runs are :mod:`mb_estimation.calibration`'s.
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
    SolverSettings,
    compile_model,
    refinement_steps,
)
from mb_estimation.estimation.identifiability import Identifiability, identifiability
from mb_estimation.estimation.input_delay import InputDelay, apparent_input_delay
from mb_estimation.multibody import BodyStates
from mb_estimation.rigs import Rig, get_rig, parameter_arrays
from mb_estimation.rigs.parameters import DRY_FRICTION_PARAMETERS
from mb_estimation.signals import GridData, Recording, prepare_recording
from mb_estimation.simulation import built_system
from mb_estimation.validation import (
    RIGID_VALIDATION_DT,
    OpenLoopCheck,
    PredictionCheck,
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
    return get_rig(config.rig, config.friction, config.advanced.drift_correction, flags)


# Bounds of the consistent path's automatic finest step (the recordings' sample period) [s].
SMALLEST_AUTOMATIC_STEP = 1e-4
LARGEST_AUTOMATIC_STEP = 0.01
#: The paper's fit's step when ``method.step_s`` is not set [s] (its §4.6 setting).
PAPER_STEP_S = 0.01


def prepare(config: Config, recordings: Sequence[Recording], *, start_s: float | None = None,
            end_s: float | None = None, dt: float | None = None) -> tuple[GridData, ...]:
    """Every recording on the estimation grid of step ``dt`` [s] (default :func:`finest_step`)."""
    step = finest_step(config, recordings) if dt is None else dt
    return tuple(prepare_recording(delayed_input(config, r), step,
                                   config.advanced.filter_cutoff_hz, start_s=start_s,
                                   end_s=end_s) for r in recordings)


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

    The finest is ``method.step_s``, or the recordings' sample period (within
    [:data:`SMALLEST_AUTOMATIC_STEP`, :data:`LARGEST_AUTOMATIC_STEP`]): every sample then has
    its own grid point, and a finer step adds no information, only cost.
    """
    method = config.method
    finest = method.step_s
    if finest is None:
        finest = min(max(sample_period(recordings), SMALLEST_AUTOMATIC_STEP),
                     LARGEST_AUTOMATIC_STEP)
    return refinement_steps(finest, config.advanced.refinement_levels)


def finest_step(config: Config, recordings: Sequence[Recording]) -> float:
    """The step [s] of the config's (final) fit.

    ``method.step_s`` (else :data:`PAPER_STEP_S`) for the paper's single fit, the finest of
    :func:`consistent_steps` for the consistent path.
    """
    if config.advanced.estimator == "paper":
        return PAPER_STEP_S if config.method.step_s is None else config.method.step_s
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
    """Compile the model programs a calibration's fit will need, before any data.

    Its fit's model blocks and shadow states compile per chunk of steps for the config's rig,
    free set and estimator, whatever the recordings (:func:`~mb_estimation.estimation.
    compile_model`), so a short :func:`warm_up_recording` compiles them: in a thread while the
    recordings are read or simulated. Returns the seconds spent compiling.
    """
    recording = warm_up_recording(config, 0.2, 1000.0)
    problem = estimation_problem(config, prepare(config, [recording],
                                                 dt=finest_step(config, [recording])))
    if config.advanced.estimator != "paper":
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


#: The least angle noise [rad] a validation is scored against: below it a run is as close as
#: the simulator that scores it (the rigid validation step's own error over 8 s of the 0.92 m
#: release is 9e-6 rad RMS), so noise-free data do not turn round-off into findings.
NOISE_FLOOR_RAD = 1e-5


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


def solver_settings(config: Config) -> SolverSettings:
    """The LM settings of the config's method and advanced sections."""
    method, advanced = config.method, config.advanced
    return SolverSettings(kappa=method.kappa, max_iterations=method.max_iterations,
                          gradient_tolerance=advanced.gradient_tolerance,
                          step_tolerance=advanced.step_tolerance,
                          time_limit_s=method.time_limit_s)


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
    compiles them while the fit runs (:func:`~mb_estimation.validation.compile_validation`).
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
    """The method settings as written into parameters.yaml (with the steps the fit used).

    The ``method`` section's keys, the ``advanced`` section under ``advanced``, then what the
    fit used: its joint levels' steps and κ per step, the rest inertia κ was scaled by.
    """
    summary = {**asdict(config.method), "advanced": asdict(config.advanced)}
    if result is not None and result.refinement:
        joint = [level for level in result.refinement if level.formulation == "joint"]
        summary["steps"] = [float(level.dt) for level in joint]
        summary["kappa_per_step"] = [float(level.kappa) for level in joint]
        if "rest_inertia" in result.settings:  # what κ was scaled by (consistent.kappa_per_step)
            summary["rest_inertia"] = float(result.settings["rest_inertia"])
            summary["kappa_reference_inertia"] = float(result.settings["kappa_reference_inertia"])
    return summary
