"""Joint state and parameter estimation (§3, Algorithm 1): the problem, the solve, its result.

:func:`estimate` takes an :class:`EstimationProblem` (rig, parameter values, which are free and
their box, recordings on the grid) and returns one
:class:`~mb_estimation.estimation.result.EstimationResult`. With no free parameters it is the
state-only estimation used for cross-validation (§4.5). The iteration is
:mod:`~mb_estimation.estimation.levenberg_marquardt` (``init``/``step``/``terminate`` over one
state); each recording's blocks are :mod:`~mb_estimation.estimation.recording_blocks`
(model in chunks, whole-recording algebra on length buckets); what a finished solve reports —
covariance (§3.7), excitation flags, shadow states — is computed here, apart from the loop.
Compiled programs are cached by problem shape and shared by all solves in the process
(:mod:`~mb_estimation.compiled`); compilation time is reported separately.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from mb_estimation.estimation.agreement import RecordingShare
from mb_estimation.estimation.covariance import (
    CorrelatedCovariance,
    correlated_middle,
    correlation_lags,
    parameter_covariance,
    parameter_std,
    projected_blocks,
    residual_covariances,
)
from mb_estimation.estimation.formulations import formulation_named
from mb_estimation.estimation.identifiability import NOT_DETERMINED_RELATIVE_STD
from mb_estimation.estimation.levenberg_marquardt import (
    LMState,
    RecordingProblem,
    SolverSettings,
    init,
    solve,
)
from mb_estimation.estimation.linear_algebra import eliminate_states
from mb_estimation.estimation.parameters import FreeParameters
from mb_estimation.estimation.recording_blocks import linearization, on_bucket, per_state
from mb_estimation.estimation.residuals import ModelStructure, StepData
from mb_estimation.estimation.result import (
    EstimationResult,
    FitStatus,
    IterationRecord,
    RecordingEstimate,
)
from mb_estimation.multibody import BodyStates
from mb_estimation.multibody.joint_space import JointStates
from mb_estimation.numerics import jax, run_once
from mb_estimation.rigs import Rig, parameter_arrays
from mb_estimation.signals import GridData

jnp = jax.numpy

DEFAULT_SETTINGS = SolverSettings()

__all__ = ["EstimationProblem", "SolverSettings", "estimate", "excited_by_data",
           "states_from_angles", "states_from_angles_and_rates"]

COVARIANCE_REGULARIZATION = 1e-12


@dataclass(frozen=True)
class EstimationProblem:
    """What to estimate from which data.

    ``parameters``: every model parameter's value (the free ones: initial guesses) by name;
    ``free``: names of the estimated parameters; ``lower``/``upper``: their box (scalars);
    ``recordings``: the data on the grid, all with the same step ``dt``; ``formulation``:
    ``maximal`` (the paper's states and residuals) or ``joint`` (the rigid limit in joint
    coordinates, :mod:`mb_estimation.estimation.formulations`); ``padded_steps``: the
    whole-recording algebra padded as for recordings of at least this many steps (a coarse
    level of the consistent path takes the finest level's, so both share one set of programs).
    """

    rig: Rig
    parameters: Mapping[str, object]
    free: tuple[str, ...]
    lower: Mapping[str, float]
    upper: Mapping[str, float]
    recordings: tuple[GridData, ...]
    formulation: str = "maximal"
    padded_steps: int = 0

    @property
    def dt(self) -> float:
        return self.recordings[0].dt


@run_once
def states_from_angles(structure: ModelStructure, fixed, free_values, filtered_angles, dt):
    """States from filtered angles (§4.4): zero-violation configurations, velocities (4.3)."""
    return structure.formulation.initial_states(structure.system(fixed, free_values),
                                                filtered_angles, None, dt)


@run_once
def states_from_angles_and_rates(structure: ModelStructure, fixed, free_values, angles,
                                 rates):
    """States from filtered angles and driver joint rates [rad/s] (initial states, §4.4)."""
    return structure.formulation.initial_states(structure.system(fixed, free_values), angles,
                                                rates, None)


@run_once
def _shadow(structure, fixed, free_values, states):
    return structure.formulation.shadow(structure.system(fixed, free_values), states)


@run_once
def _gravity(structure, fixed, free_values):
    """The system's gravity vector [m/s²] (for the tilt's std): one small compiled program."""
    return structure.system(fixed, free_values).gravity


@run_once
def _covariance_blocks(num_impulse_rows, lin, normal, scale, impulse_covariance,
                       observation_covariance):
    # (J_xᵀJ_x)⁻¹ with a regularisation far below the data's information (§3.7)
    elimination = eliminate_states(normal, COVARIANCE_REGULARIZATION, scale)
    return projected_blocks(lin, elimination, num_impulse_rows, impulse_covariance,
                            observation_covariance)


def _cost_parts(residuals: Sequence[np.ndarray], num_impulse_rows: int):
    impulse = sum(float(np.sum(r[:, :num_impulse_rows] ** 2)) for r in residuals)
    observation = sum(float(np.sum(r[:, num_impulse_rows:] ** 2)) for r in residuals)
    return impulse, observation


def excited_by_data(kind: str, std: np.ndarray, value: np.ndarray) -> bool:
    """Whether the data determine the parameter.

    A scalar is determined when its standard deviation is at most half its value
    (:data:`~mb_estimation.estimation.identifiability.NOT_DETERMINED_RELATIVE_STD`; like Table
    4's ``J_Axx = 0(200)``, a parameter the data leave free is not, and neither is one at 0).
    A quaternion (``tilt``) acts only through the direction of gravity, two degrees of freedom:
    it is determined when at least two tangent directions are known within 0.1 rad.
    """
    if kind == "quaternion":
        return int(np.sum(np.asarray(std) <= 0.1)) >= 2
    spread = float(np.ravel(std)[0])
    return bool(np.isfinite(spread)
                and spread <= NOT_DETERMINED_RELATIVE_STD * abs(float(np.ravel(value)[0])))


def estimate(problem: EstimationProblem, settings: SolverSettings = DEFAULT_SETTINGS, *,
             initial_states: Sequence[BodyStates | JointStates] | None = None,
             progress: Callable[[IterationRecord], None] | None = None) -> EstimationResult:
    """Estimate the free parameters and all states of ``problem`` (Algorithm 1).

    ``initial_states`` (one stacked :class:`BodyStates`, or :class:`JointStates` for the joint
    formulation, per recording) warm-starts the states;
    by default they come from the filtered angles (§4.4). ``progress`` is called with every
    accepted iterate.
    """
    if not problem.recordings:
        raise ValueError("no recordings to estimate from")
    dts = {round(r.dt, 12) for r in problem.recordings}
    if len(dts) != 1:
        raise ValueError(f"all recordings must share one grid step, got {sorted(dts)}")
    started = time.perf_counter()
    solver, free_values = _solver(problem, settings)
    if initial_states is None:
        initial_states = [_initial_states(solver, free_values, r) for r in problem.recordings]
    num_steps = sum(r.num_steps for r in problem.recordings)
    history: list[IterationRecord] = []

    def record(state: LMState):
        impulse, observation = _cost_parts(state.residuals, _impulse_rows(solver, state))
        entry = IterationRecord(
            iteration=state.iteration, cost=(impulse + observation) / num_steps,
            observation_mse=observation / num_steps, impulse_mse=impulse / num_steps,
            parameters={k: np.asarray(v) for k, v in state.free_values.items()},
            damping=state.damping, gradient_norm=state.gradient, step_norm=state.step_norm,
            elapsed_s=time.perf_counter() - started, dt=problem.dt)
        history.append(entry)
        if progress is not None:
            progress(entry)

    state, status = solve(solver, init(solver, free_values, initial_states), record,
                          lambda: _out_of_time(solver, started))
    return _result(solver, state, status, history, started)


def _out_of_time(solver: RecordingProblem, started: float) -> bool:
    """Whether the solve has used its time limit [s] (compiling, counted apart, excluded)."""
    limit = solver.settings.time_limit_s
    return limit is not None and time.perf_counter() - started - solver.compiler.seconds > limit


def _solver(problem: EstimationProblem, settings: SolverSettings
            ) -> tuple[RecordingProblem, dict]:
    """What stays fixed while ``problem`` is solved, and the free parameters' start values."""
    rig = problem.rig
    free = FreeParameters.of(rig.spec, problem.free)
    structure = ModelStructure(rig, free, formulation_named(problem.formulation))
    values = parameter_arrays(problem.parameters)
    fixed = {k: v for k, v in values.items() if k not in free.names}
    free_values = {k: values[k] for k in free.names}
    solver = RecordingProblem(
        structure, fixed, tuple(problem.recordings),
        tuple(StepData(np.asarray(r.measured_angles), np.asarray(r.inputs),
                       np.asarray(r.observed), np.asarray(r.dt, dtype=np.float64),
                       np.asarray(np.sqrt(settings.kappa)), r.locked_mask)
              for r in problem.recordings),
        problem.lower, problem.upper, settings, padded_steps=problem.padded_steps)
    return solver, free_values


def compile_model(problem: EstimationProblem,
                  settings: SolverSettings = DEFAULT_SETTINGS) -> float:
    """Compile the model's programs for ``problem``'s rig, free set and formulation; no solve.

    The model's blocks (the first block's and the transitions' Jacobians) and the shadow states
    are compiled per chunk of steps, whatever the recordings' lengths and grid step
    (:mod:`~mb_estimation.estimation.recording_blocks`): compiled from a short problem, they
    serve a long one with the same rig, free set and formulation. For a thread to compile them
    while the data are still being read or simulated (``compiled.Compiler`` makes a solve that
    needs one of them meanwhile wait for it). Returns the seconds spent compiling.
    """
    solver, free_values = _solver(problem, settings)
    grid = problem.recordings[0]
    # states of the right shapes (zeros: what they hold does not matter to the compiler)
    shapes = jax.eval_shape(functools.partial(states_from_angles_and_rates, solver.structure),
                            solver.fixed, free_values, grid.filtered_angles,
                            np.zeros_like(grid.filtered_angles))
    states = jax.tree_util.tree_map(lambda s: np.zeros(s.shape, s.dtype), shapes)
    linearization(solver.compiler, solver.structure, solver.fixed, free_values, states,
                  solver.data[0], solver.bucket)
    per_state(solver.compiler, _shadow, solver.structure, solver.fixed, free_values, states)
    return solver.compiler.seconds


def _impulse_rows(solver: RecordingProblem, state: LMState) -> int:
    """How many of a residual block's rows are impulses (the rest: angle observations)."""
    return state.residuals[0].shape[1] - solver.grids[0].measured_angles.shape[1]


def _initial_states(solver: RecordingProblem, free_values, grid: GridData):
    """A recording's start states from its filtered angles (and driver rates, if any), §4.4.

    Where the recording has no driver rates the formulation may give some from the angles
    (:meth:`~mb_estimation.estimation.formulations.Formulation.start_rates`): then the levels
    of the consistent path share one program.
    """
    common = ((solver.fixed, None), (free_values, None), (grid.filtered_angles, "linear"))
    rates = grid.initial_rates
    if rates is None:
        rates = solver.structure.formulation.start_rates(grid.filtered_angles, grid.dt)
    if rates is None:
        return on_bucket(solver.compiler, states_from_angles, solver.structure, grid.num_steps,
                         solver.bucket, *common, (np.asarray(grid.dt, dtype=np.float64), None))
    return on_bucket(solver.compiler, states_from_angles_and_rates, solver.structure,
                     grid.num_steps, solver.bucket, *common, (rates, "edge"))


def _result(solver: RecordingProblem, state: LMState, status: FitStatus,
            history: Sequence[IterationRecord], started: float) -> EstimationResult:
    """What a finished solve reports: covariance (§3.7), excitation, shadow states, message."""
    compiler, structure, free, settings = (solver.compiler, solver.structure, solver.free,
                                           solver.settings)
    grids, fixed, free_values = solver.grids, solver.fixed, state.free_values
    num_impulse_rows = _impulse_rows(solver, state)
    impulse_cov, observation_cov = residual_covariances(
        state.residuals, num_impulse_rows, [np.asarray(r.observed) for r in grids])
    blocks = [compiler(_covariance_blocks, num_impulse_rows, lin, n, scale,
                       impulse_cov, observation_cov)
              for lin, n, scale in zip(state.linearizations, state.normals,
                                       state.state_scales, strict=True)]
    information = sum(np.asarray(b.information) for b in blocks)
    middle = sum(np.asarray(b.middle) for b in blocks)
    covariance = parameter_covariance(information, middle)
    gravity = np.asarray(compiler(_gravity, structure, fixed, free_values))
    std = parameter_std(information, middle, free, gravity)
    # per recording, its share; the middle again with the residuals' correlation in time
    lags = [correlation_lags(r) for r in state.residuals]
    scores = [np.asarray(b.scores)[:grid.num_steps] for b, grid in zip(blocks, grids,
                                                                         strict=True)]
    shares = tuple(RecordingShare(np.asarray(b.information), np.asarray(b.middle),
                                  correlated_middle(s, lag), s.sum(axis=0))
                   for b, s, lag in zip(blocks, scores, lags, strict=True))
    correlated = sum(share.correlated_middle for share in shares)
    with_correlation = CorrelatedCovariance(
        parameter_covariance(information, correlated),
        parameter_std(information, correlated, free, gravity),
        max(lag * grid.dt for lag, grid in zip(lags, grids, strict=True)))
    excited = {name: excited_by_data(kind, std[name], np.asarray(free_values[name]))
               for name, kind in zip(free.names, free.kinds, strict=True)}

    estimates = []
    for grid, x, r in zip(grids, state.states, state.residuals, strict=True):
        angles, rates, bodies = per_state(compiler, _shadow, structure, fixed, free_values, x)
        angles = np.asarray(angles)
        # continue the measured (multi-turn) angles rather than wrap to (-π, π]
        angles = grid.measured_angles + np.arctan2(np.sin(angles - grid.measured_angles),
                                                   np.cos(angles - grid.measured_angles))
        impulse, observation = _cost_parts([r], num_impulse_rows)
        estimates.append(RecordingEstimate(
            name=grid.name, time_s=grid.time_s, joint_angles=angles,
            joint_rates=np.asarray(rates), position=np.asarray(bodies.position),
            orientation=np.asarray(bodies.orientation),
            linear_velocity=np.asarray(bodies.linear_velocity),
            angular_velocity=np.asarray(bodies.angular_velocity),
            observation_mse=observation / grid.num_steps, impulse_mse=impulse / grid.num_steps))

    final = history[-1]
    limits = {FitStatus.MAX_ITERATIONS: f" ({settings.max_iterations}) before a tolerance was met",
              FitStatus.TIME_LIMIT: f" ({settings.time_limit_s} s of solving) before a "
                                    "tolerance was met"}
    message = (f"{status.description}{limits.get(status, '')}; {state.iteration} iterations, "
               f"cost {final.cost:.4g} (observation {final.observation_mse:.4g}, impulse "
               f"{final.impulse_mse:.4g})")
    total = time.perf_counter() - started
    parameters = {k: np.asarray(v) for k, v in {**fixed, **free_values}.items()}
    return EstimationResult(
        parameters=parameters, free=free.names, std=std, excited=excited, covariance=covariance,
        correlated=with_correlation, shares=shares, recordings=tuple(estimates),
        cost=final.cost, observation_mse=final.observation_mse, impulse_mse=final.impulse_mse,
        iterations=state.iteration, status=status, message=message, history=tuple(history),
        compile_time_s=compiler.seconds, solve_time_s=total - compiler.seconds)
