"""Simulation-error refinement: the free parameters fitted through the config's own simulator.

The consistent path (:mod:`~mb_estimation.estimation.consistent`) fits the rig's rigid limit.
Where the config's hinges are themselves the physics — compliant, damped hinges that dissipate
energy in fast motion (paper §4.7: ε = 1e-6, τ = 0.02 s) — no rigid model follows the data, and
the consistent estimate keeps a bias (measured). This refinement fits
what the user will run: the SPOOK simulator (paper (2.18), (2.26)–(2.28)) with the config's
hinges at ``simulation.dt``, by *multiple shooting* on the output error (as simulation-error
identification tools do):

* the recording is cut into segments of ``segment_s``; each is simulated from its own unknown
  joint state (angles and rates at the segment's start, as
  :func:`~mb_estimation.multibody.states_from_joints` lays them out, with zero hinge violation),
  driven by the recorded input;
* the first ``lead_s`` of each segment is simulated but not scored, so that the hinges' own
  deflection (which a zero-violation start lacks) settles before the angles count (a few
  relaxation times τ);
* the residual is the wrapped difference between simulated and measured angles at the
  samples; Levenberg–Marquardt solves for the segment states and the free parameters
  together, the segments eliminated per block (Schur complement), the parameters' box kept by
  the exact box QP.

The iteration is the package's one Levenberg–Marquardt loop
(:mod:`~mb_estimation.estimation.levenberg_marquardt`) with its own linear step and chord
steps (:class:`_Shooting`). Started from the consistent fit (its parameters and joint
motion), it converges in a few linearisations. Its standard deviations come from the same
normal equations, scaled by the residual variance. Scalar free parameters only (not the tilt
quaternion).

Here: the settings, the problem (chord steps) and the continuation over segment lengths, then
over finer steps while the step biases the values; the normal equations with the segments
eliminated and the bounded step are in :mod:`~mb_estimation.estimation.shooting_normal`, the
segments themselves -- cut, simulated, linearised (JAX) -- in
:mod:`~mb_estimation.estimation.shooting_segments`.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from mb_estimation.compiled import Compiler
from mb_estimation.estimation.agreement import RecordingShare
from mb_estimation.estimation.covariance import CorrelatedCovariance
from mb_estimation.estimation.levenberg_marquardt import (
    INITIAL_DAMPING,
    Termination,
    Trial,
    solve,
)
from mb_estimation.estimation.result import FitStatus
from mb_estimation.estimation.shooting_normal import NormalEquations, step_bias_of
from mb_estimation.estimation.shooting_segments import (
    LANE_STEPS,
    Segments,
    amplification,
    chained,
    correlated_statistics,
    frictionless_while_fitting,
    lanes_of,
    linearize_segments,
    replayed_residuals,
    rigid_linearized,
    segments_of,
    segments_residuals,
)
from mb_estimation.numerics import jax
from mb_estimation.rigs import Rig

jnp = jax.numpy

__all__ = ["MAX_CHORD_STEPS", "Segments", "ShootingResult", "ShootingSettings", "amplification",
           "fit_by_shooting", "segments_of"]


@dataclass(frozen=True)
class ShootingSettings:
    """Segments [s] and the solver's limits."""

    segment_s: float = 1.0  # scored length of a segment
    lead_s: float = 0.06  # simulated before each segment's scored part (3 τ at τ = 0.02 s)
    max_iterations: int = 60  # per segment length (the 0.92 m swing-up needs 41)
    longest_segment_s: float = 4.0  # segments are lengthened up to this (fit_by_shooting)
    lengthening_cost_ratio: float = 1.2  # accepted while the cost per sample grows less
    # ... and while no segment amplifies a change of its start state more than this
    # (:func:`amplification`): beyond, the fit rests on start states known to the round-off
    # and its covariance means nothing (an unstable equilibrium followed open loop)
    max_amplification: float = 1e3
    # Stop when an iteration lowers χ² (the cost over the residual variance) by less than this:
    # what is left to gain moves the parameters by a small fraction of their std.
    chi_square_tolerance: float = 0.01
    # ... and on a length that only leads to a longer one, by less than this (the parameters
    # within about one std of that length's optimum; the longer fit goes on from there).
    continuation_chi_square_tolerance: float = 1.0
    # Simulate the rigid tree (joint coordinates, second-order variational steps) instead of
    # the config's hinges (SPOOK): a simulation-error fit of the consistent path's own model.
    rigid: bool = False
    # The kept fit (the last length, strictly converged) steps this many times finer than the
    # others: where the simulator approximates a continuous model, its error is a bias the
    # final estimate must not carry (the rigid model's second-order error at 1 ms biased the
    # 0.92 m release's J_Azz by 2.5 std; at 0.5 ms by a tenth of one). Its program is the
    # same (the step is data).
    kept_step_divisor: int = 1
    # The kept fit's step is halved again (up to this divisor in all) while its values'
    # estimated error from the step (:attr:`ShootingResult.step_bias`) exceeds
    # :data:`STEP_BIAS_STD` of their std: fast motions (a whirling pendulum's) need finer
    # steps than slow ones. 1: no check (a simulator that is the model, not an approximation
    # of one).
    max_kept_step_divisor: int = 1


@dataclass(frozen=True)
class ShootingResult:
    """The refined free parameters (scalars), their statistics and the solver's effort.

    ``cost`` is the mean squared angle error per scored sample [rad²]; ``covariance`` is over
    ``names`` in order; ``segment_s`` the segment length of this fit, ``tried`` every length
    fitted on the way (``iterations``, ``linearizations`` and the times are their sums);
    ``amplification`` the largest growth of a start-state change along a segment
    (:func:`amplification`).
    """

    names: tuple[str, ...]
    values: dict[str, float]
    std: dict[str, float]
    covariance: np.ndarray
    cost: float
    initial_cost: float
    iterations: int
    linearizations: int  # Jacobian evaluations (the cost: each simulates 2n + p tangents)
    status: FitStatus
    segments: int
    segment_s: float
    step_s: float  # the simulator's step [s]
    solve_time_s: float
    compile_time_s: float
    tried: tuple[float, ...]  # the segment lengths fitted [s]
    amplification: float
    correlated: CorrelatedCovariance | None = None  # with the residuals' correlation in time
    shares: tuple[RecordingShare, ...] = ()  # per recording, in the values' units
    # the values' estimated error from the simulator's step: the values minus their
    # extrapolation to step 0 (:func:`~.shooting_normal.step_bias_of`); None: not checked
    step_bias: dict[str, float] | None = None

    @property
    def converged(self) -> bool:
        return self.status.converged


MAX_CHORD_STEPS = 8  # per linearisation (a linearisation costs about 8 simulations)
def fit_by_shooting(rig: Rig, parameters: dict, names: Sequence[str], lower: dict,
                    upper: dict, grids: Sequence, joint_motion: Sequence, simulation_dt: float,
                    settings: ShootingSettings = ShootingSettings(),
                    progress: Callable[[int, float, dict], None] | None = None
                    ) -> ShootingResult:
    """Fit the scalar parameters ``names`` by multiple shooting on ``rig``'s simulator.

    ``parameters``: every value (the free ones: the start, e.g. the consistent fit);
    ``grids``: the recordings on the grid (one step for all); ``joint_motion``: per recording
    ``(angles [n, j], rates [n, j])`` on that grid, the start of each segment's state;
    ``simulation_dt`` [s]: the simulator's step (rounded to divide the grid step).
    ``progress(iteration, cost, values, (segment_s, step_s))`` after each accepted iterate: the
    fit's segment length and simulation step [s].

    Segments as long as the simulator follows the data: first ``settings.segment_s``, then
    twice as long, and so on up to ``longest_segment_s`` (for the rigid model, last, the
    shortest recording in one piece: a segment loses what its cut-off remainder held), each
    fit started from the last
    accepted one, accepted while it converges with a cost per sample at most
    ``lengthening_cost_ratio`` times the last one's; a length with a longer one after it is
    converged loosely (``continuation_chi_square_tolerance``), the one kept strictly. Each
    segment restarts the motion from
    free joint states, so short segments lose what only a long stretch of free motion shows
    (measured on the 0.92 m release: with 1 s segments the pendulum's damping b2 has a
    std of 36 %, with 2.5 s 10 %, with 5 s 5 %); a closed-loop recording near an unstable
    equilibrium is not followed open loop for long (the 0.92 m swing-up: J_Byy +1.4 % with
    1 s segments, −62 % with 2.5 s) and keeps short ones.
    """
    names = tuple(names)
    for name in names:
        if np.size(parameters[name]) != 1:
            raise ValueError(f"the simulation refinement fits scalar parameters only, not "
                             f"{name}")
    shortest = min(grid.num_steps - 1 for grid in grids) * float(grids[0].dt)
    lengths = [settings.segment_s]
    while (2.0 * lengths[-1] <= settings.longest_segment_s
           and 2.0 * lengths[-1] + settings.lead_s <= shortest):
        lengths.append(2.0 * lengths[-1])
    whole = shortest - settings.lead_s
    if settings.rigid and lengths[-1] < whole <= settings.longest_segment_s:
        lengths.append(whole)  # the rigid model: last, the shortest recording in one piece
    result, fitted_starts, totals = None, None, _Effort()
    for length in lengths:
        # A stage with a longer one after it only leads there: converged loosely.
        stage = dataclasses.replace(settings, segment_s=length, chi_square_tolerance=(
            settings.chi_square_tolerance if length == lengths[-1]
            else settings.continuation_chi_square_tolerance))
        start = parameters if result is None else _values_of(result, parameters)
        # A longer segment starts where every other shorter one did: from its fitted state.
        attempt, attempt_starts, attempt_finer = _shoot(
            rig, start, names, lower, upper, grids, joint_motion, simulation_dt, stage,
            progress, fitted_starts, np.inf if result is None else settings.max_amplification,
            statistics=length == lengths[-1])
        totals = totals.plus(attempt)
        if result is not None and not (
                attempt.converged
                and attempt.cost <= settings.lengthening_cost_ratio * result.cost
                and attempt.amplification <= settings.max_amplification):
            break
        result, fitted_starts, finer_start = attempt, attempt_starts, attempt_finer
        polished = length == lengths[-1]
    if not polished:  # the last accepted length converged loosely: finish it
        result, fitted_starts, finer_start = _shoot(
            rig, _values_of(result, parameters), names, lower, upper, grids, joint_motion,
            simulation_dt, dataclasses.replace(settings, segment_s=result.segment_s), progress,
            fitted_starts)
        totals = totals.plus(result)
    divisor = settings.kept_step_divisor
    while divisor < settings.max_kept_step_divisor and _step_biased(result):
        divisor *= 2  # the step's error is a bias the estimate must not carry: refine it
        finer, finer_starts, following = _shoot(
            rig, _values_of(result, parameters), names, lower, upper, grids, joint_motion,
            simulation_dt, dataclasses.replace(settings, segment_s=result.segment_s,
                                               kept_step_divisor=divisor), progress,
            fitted_starts, linearized=finer_start)
        totals = totals.plus(finer)
        if not finer.converged:
            break
        result, fitted_starts, finer_start = finer, finer_starts, following
    return dataclasses.replace(result, **dataclasses.asdict(totals))


#: The kept fit's step is fine enough where no value's estimated error from it exceeds this
#: fraction of its std.
STEP_BIAS_STD = 0.5


def _step_biased(result: ShootingResult) -> bool:
    """Whether a value of ``result`` errs by more than :data:`STEP_BIAS_STD` of its std.

    By the simulator's step (:attr:`ShootingResult.step_bias`).
    """
    return result.step_bias is not None and any(
        abs(bias) > STEP_BIAS_STD * result.std[name] for name, bias in result.step_bias.items())


def _values_of(fit: ShootingResult, parameters: dict) -> dict:
    """``parameters`` with ``fit``'s values of the parameters it fitted."""
    return {**parameters, **{name: np.asarray(value) for name, value in fit.values.items()}}


@dataclass(frozen=True)
class _Effort:
    """The solver's effort summed over the segment lengths tried."""

    tried: tuple[float, ...] = ()
    iterations: int = 0
    linearizations: int = 0
    solve_time_s: float = 0.0
    compile_time_s: float = 0.0

    def plus(self, fit: ShootingResult) -> _Effort:
        tried = self.tried if fit.segment_s in self.tried else (*self.tried, fit.segment_s)
        return _Effort(tried, self.iterations + fit.iterations,
                       self.linearizations + fit.linearizations,
                       self.solve_time_s + fit.solve_time_s,
                       self.compile_time_s + fit.compile_time_s)


@dataclass(frozen=True)
class _ShootingState:
    """One iterate of the shooting fit.

    A :class:`~mb_estimation.estimation.levenberg_marquardt.Iterate`. ``starts [S, 2
    n_joints]``: the segments' start states; ``values [p]``: the free values; ``residual [S,
    R]`` there; ``normal``: the normal equations of the last linearisation (here if
    ``fresh``, else ``chords`` steps before); ``linearizations``: so far.
    """

    starts: np.ndarray
    values: np.ndarray
    residual: np.ndarray
    normal: NormalEquations
    cost: float
    damping: float
    gradient: float
    step_norm: float
    iteration: int
    linearizations: int
    chords: int = 0
    status: FitStatus | None = None

    @property
    def fresh(self) -> bool:
        return self.chords == 0


@dataclass(frozen=True)
class _Shooting:
    """The shooting fit as a least-squares problem of the one loop.

    A :class:`~mb_estimation.estimation.levenberg_marquardt.LeastSquaresProblem`.
    ``linearize(starts, values)`` → ``(residual, jac_state, jac_values)`` (unscaled values);
    ``residual_at(starts, values)``: one simulation of every segment; ``scale``: the values'
    Jacobi scaling; ``lower``/``upper``: their box. Each linearisation (a simulation carrying
    ``2·n_joints + p`` tangents) costs about eight simulations, so after an accepted step the
    next is taken from the same Jacobian with the new residual (a chord step) while the
    linear model predicts the gain (ρ ≥ 1/4), at most :data:`MAX_CHORD_STEPS` times. Without
    ``statistics`` (a fit that only leads to a longer one) a chord step that gains below the
    tolerance ends the fit; otherwise a step from a fresh linearisation must confirm it.
    """

    linearize: Callable
    residual_at: Callable
    scale: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    termination: Termination
    statistics: bool

    def state_at(self, starts, values, linearized, damping, iteration, step_norm,
                 linearizations) -> _ShootingState:
        residual, jac_state, jac_values = linearized
        normal = NormalEquations.of(jac_state, jac_values * self.scale)
        return _ShootingState(
            starts, values, residual, normal, float(np.sum(residual ** 2)), damping,
            normal.gradient_norm(residual, values, self.scale, self.lower, self.upper),
            step_norm, iteration, linearizations)

    def trial(self, state: _ShootingState, damping: float) -> Trial | None:
        try:
            point, step_norm, model_cost = state.normal.step(
                damping, state.residual, state.starts, state.values, self.scale, self.lower,
                self.upper)
        except np.linalg.LinAlgError:
            return None
        residual = self.residual_at(*point)
        return Trial((*point, residual), float(np.sum(residual ** 2)), model_cost, step_norm)

    def accept(self, state: _ShootingState, trial: Trial, damping: float, ratio: float
               ) -> _ShootingState:
        starts, values, residual = trial.point
        small = state.cost - trial.cost <= self.termination.cost_tolerance * state.cost
        if ratio >= 0.25 and (small and not self.statistics
                              or not small and state.chords + 1 < MAX_CHORD_STEPS):
            return dataclasses.replace(
                state, starts=starts, values=values, residual=residual, cost=trial.cost,
                damping=damping, step_norm=trial.step_norm, iteration=state.iteration + 1,
                chords=state.chords + 1,
                gradient=state.normal.gradient_norm(residual, values, self.scale, self.lower,
                                                    self.upper),
                status=FitStatus.COST if small else None)
        return self.state_at(starts, values, self.linearize(starts, values), damping,
                             state.iteration + 1, trial.step_norm, state.linearizations + 1)

    def relinearized(self, state: _ShootingState) -> _ShootingState:
        return self.state_at(state.starts, state.values,
                             self.linearize(state.starts, state.values), state.damping,
                             state.iteration, state.step_norm, state.linearizations + 1)


def _shoot(rig: Rig, parameters: dict, names: tuple[str, ...], lower: dict, upper: dict,
           grids: Sequence, joint_motion: Sequence, simulation_dt: float,
           settings: ShootingSettings, progress, fitted_starts: dict | None = None,
           max_amplification: float = np.inf, statistics: bool = True,
           linearized: tuple | None = None
           ) -> tuple[ShootingResult, dict, tuple | None]:
    """One multiple-shooting fit with segments of ``settings.segment_s``.

    A segment starts from ``fitted_starts[(recording, begin)]`` where an earlier fit has one,
    else from ``joint_motion``. Returns the result and this fit's segment start states, keyed
    the same way. Where the segments amplify start-state changes by more than
    ``max_amplification`` at the start, gives up at once (not converged, no iteration).
    Without ``statistics`` (a fit that only leads to a longer one) convergence may be read
    from a chord step and the covariance from the last linearisation rather than the last
    iterate.

    ``linearized = (residual, jac_state, jac_values)``: this step's residuals at the start
    with another step's Jacobians there (unscaled values), the first iterate's model instead of
    a linearisation; a fresh one must confirm convergence. Returns besides, where the kept
    fit's step is checked, such a triple for half its step at the fitted point (else None):
    where a refit at that step starts (one simulation instead of a linearisation).
    """
    segments = segments_of(grids, settings.segment_s, settings.lead_s, remainder=statistics)
    substeps = max(1, int(round(segments.dt / simulation_dt)))
    if statistics:  # the fit that is kept
        substeps *= settings.kept_step_divisor
    step = (np.asarray(segments.dt / substeps, dtype=np.float64), np.asarray(substeps))
    fixed = {name: jnp.asarray(value, dtype=jnp.float64) for name, value in parameters.items()
             if name not in names}
    keys = list(zip(segments.recording.tolist(), segments.begin.tolist(), strict=True))
    fitted_starts = fitted_starts or {}
    starts = np.stack([
        fitted_starts[(r, b)] if (r, b) in fitted_starts
        else np.concatenate([joint_motion[r][0][b], joint_motion[r][1][b]]) for r, b in keys])
    values = np.array([float(np.ravel(parameters[name])[0]) for name in names])
    low = np.array([lower[name] for name in names], dtype=float)
    high = np.array([upper[name] for name in names], dtype=float)
    static = (rig, names, frictionless_while_fitting(rig, parameters, names))
    # a joint a recording holds still is held in the simulation at its median: its samples
    # are no observations (their residuals are zero) and its start is not estimated
    observed_joints = segments.measured.shape[-1] - np.sum(segments.locked, axis=1)
    scored = float(np.sum(np.sum(segments.weights, axis=1) * observed_joints))
    dof = max(scored - 2.0 * float(np.sum(observed_joints)) - values.size, 1.0)

    started, compiler = time.perf_counter(), Compiler()

    # Rigid segments in lanes chained on the host (one program for every length); compliant
    # ones whole, since their state between lanes is more than the joints' angles and rates.
    lanes = lanes_of(segments, LANE_STEPS) if settings.rigid else lanes_of(segments)

    def linearize(at_starts, at_values):
        if settings.rigid:  # the replays' program, then the sensitivities along its states
            return rigid_linearized(compiler, static, step, fixed, lanes, at_starts, at_values)
        return chained(functools.partial(compiler, linearize_segments, static, step, fixed),
                       lanes, at_starts, at_values)

    def simulated(at_step, at_starts, at_values):
        """The residuals of a plain simulation with steps ``at_step``."""
        if settings.rigid:  # through the replays' program
            return replayed_residuals(compiler, static, at_step, fixed, lanes, at_starts,
                                      at_values)
        return chained(functools.partial(compiler, segments_residuals, static, at_step, fixed),
                       lanes, at_starts, at_values, derivatives=False)[0]

    def residual_at(at_starts, at_values):
        return simulated(step, at_starts, at_values)

    # A start from another step's Jacobians: one chord step from them, then a linearisation.
    fresh = linearized is None
    residual, jac_state, jac_values = linearize(starts, values) if fresh else linearized
    initial_cost = float(np.sum(residual ** 2))
    joints = segments.measured.shape[-1]
    allowed = settings.max_iterations if amplification(jac_state, joints) <= max_amplification \
        else 0
    # Each parameter in units of its first sensitivity (Jacobi scaling): a value at 0 or at a
    # bound keeps a well-scaled column.
    column_norms = np.sqrt(np.einsum("sri,sri->i", jac_values, jac_values))
    scale = np.where(column_norms > 0, 1.0 / np.where(column_norms > 0, column_norms, 1.0), 1.0)
    problem = _Shooting(
        linearize, residual_at, scale, low, high,
        # a decrease of χ² (the cost over the residual variance) below the tolerance
        Termination(allowed, cost_tolerance=settings.chi_square_tolerance / dof), statistics)
    state = dataclasses.replace(
        problem.state_at(starts, values, (residual, jac_state, jac_values), INITIAL_DAMPING, 0,
                         float("nan"), int(fresh)), chords=0 if fresh else MAX_CHORD_STEPS - 1)

    def record(iterate: _ShootingState):
        if progress is not None and iterate.iteration > 0:
            progress(iterate.iteration, iterate.cost / scored,
                     dict(zip(names, iterate.values.tolist(), strict=True)),
                     (settings.segment_s, segments.dt / substeps))

    state, status = solve(problem, state, record)
    if not state.fresh and statistics:  # the covariance at the last iterate, not an earlier one
        state = problem.relinearized(state)
    starts, values, cost, normal = state.starts, state.values, state.cost, state.normal

    # Linearised covariance (Gauss–Newton, undamped), scaled by the residual variance.
    information = normal.parameter_information
    covariance = np.linalg.pinv(information) * (cost / dof) * np.outer(scale, scale)
    std = np.sqrt(np.maximum(np.diag(covariance), 0.0))
    correlated, shares = correlated_statistics(normal.jac_state, normal.jac_values,
                                               state.residual, lanes.weights, segments,
                                               cost / dof, scale, names)
    step_bias, refit_start = None, None
    if statistics and settings.max_kept_step_divisor > 1:
        finer = (np.asarray(step[0] / 2.0), np.asarray(2 * step[1]))
        finer_residual = simulated(finer, starts, values)
        step_bias = step_bias_of(normal, state.residual, finer_residual, starts, values,
                                 scale, low, high, names)
        refit_start = (finer_residual, normal.jac_state, normal.jac_values / scale)
    result = ShootingResult(
        names=names, values=dict(zip(names, values.tolist(), strict=True)),
        std=dict(zip(names, std.tolist(), strict=True)), covariance=covariance, cost=cost / scored,
        initial_cost=initial_cost / scored, iterations=state.iteration,
        linearizations=state.linearizations, status=status,
        segments=int(starts.shape[0]), segment_s=settings.segment_s, step_s=float(step[0]),
        solve_time_s=time.perf_counter() - started - compiler.seconds,
        compile_time_s=compiler.seconds,
        tried=(settings.segment_s,), amplification=amplification(normal.jac_state, joints),
        correlated=correlated, shares=shares, step_bias=step_bias)
    return result, dict(zip(keys, starts, strict=True)), refit_start

