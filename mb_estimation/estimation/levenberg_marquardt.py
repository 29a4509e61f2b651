"""Levenberg–Marquardt (§3.4, Algorithm 1): one loop for every fit in the package.

The loop in the shape of optimistix's and jaxls's solvers: a problem holds what stays fixed
during a solve, the iterate is an immutable state, and

* :func:`step` tries damped steps from the state's linearisation (damping α, 2α, 8α, …)
  until the gain ratio ρ is positive, accepts it and rescales α by
  ``max(1/3, 1 - (2ρ - 1)³)`` (Nielsen), or marks the state :attr:`FitStatus.NO_PROGRESS`;
* :func:`terminate` says whether and why to stop (:class:`Termination`);
* :func:`solve` runs the two.

A problem (:class:`LeastSquaresProblem`) supplies the damped, box-constrained linear step and
its trial, and decides whether an accepted iterate is linearised afresh. Two problems use it:

* the recording fit's problem, :class:`RecordingProblem` here: per trial damping the
  block-tridiagonal elimination, the exact box QP in χ, the state back-substitution and the
  linearisation at ``(x ⊞ δx, χ ⊞ δχ)``, whose residuals give the trial's cost and which the
  next iterate keeps (one model program for both). Each recording's blocks run as compiled
  programs (:mod:`~mb_estimation.estimation.recording_blocks`); what a finished solve
  reports is computed apart, in :func:`~mb_estimation.estimation.solver.estimate`;
* the simulation-error fit (:mod:`~mb_estimation.estimation.shooting`): the segments
  eliminated per block, and chord steps (a linearisation serves several steps while the
  linear model predicts the gain).

The gain ratio compares the cost reduction with the reduction the linear model predicts,
``‖r‖² - ‖r + Jδ‖²``, which stays exact when the box cuts the step.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from mb_estimation.compiled import Compiler
from mb_estimation.estimation.linear_algebra import (
    NormalEquations,
    damping_scale,
    eliminate_states,
    normal_equations,
    solve_box_qp,
)
from mb_estimation.estimation.parameters import (
    FreeParameters,
    clip_to_box,
    parameters_boxplus,
    tangent_bounds,
)
from mb_estimation.estimation.recording_blocks import (
    bucket_length,
    cut,
    linearization,
    padded,
    trial_states,
)
from mb_estimation.estimation.residuals import Linearization, ModelStructure, StepData
from mb_estimation.estimation.result import FitStatus
from mb_estimation.signals import GridData

MAX_DAMPING = 2.0**32  # Algorithm 1
# Damping α·diag(H) (Marquardt's scaling, invariant to the units of states and parameters);
# the diagonal is floored at DAMPING_FLOOR·max(diag H) for directions the data cannot see.
# Algorithm 1 starts at 1e-6·max(diag H)·I; relative to each direction's own diagonal that is
# far too strong for the weak directions, and 1e-6·diag(H) makes the 13-parameter swing-up
# crawl (40 iterations, not converged); 1e-9·diag(H) reaches ‖g‖ < 10 in 4 (measured).
INITIAL_DAMPING = 1e-9
DAMPING_FLOOR = 1e-12


@dataclass(frozen=True)
class Termination:
    """When a solve stops, besides :attr:`FitStatus.NO_PROGRESS` (a tolerance of 0: unused).

    ``max_iterations``: accepted iterates; ``gradient_tolerance``: on the projected gradient
    norm ``‖Jᵀr‖``; ``step_tolerance``: on the last accepted step's norm;
    ``cost_tolerance``: on a step from a fresh linearisation that lowers the cost ``‖r‖²`` by
    at most this fraction of it (the step is not taken: :attr:`FitStatus.COST`).
    """

    max_iterations: int
    gradient_tolerance: float = 0.0
    step_tolerance: float = 0.0
    cost_tolerance: float = 0.0


@dataclass(frozen=True)
class Trial:
    """A damped step tried from an iterate.

    ``cost``: ``‖r‖²`` at the trial point; ``model_cost``: what the linearisation predicted;
    ``step_norm``: ``‖δ‖``; ``point``: what the problem needs to accept it.
    """

    point: object
    cost: float
    model_cost: float
    step_norm: float


class Iterate(Protocol):
    """What the loop reads of a problem's state (frozen dataclasses with these fields).

    ``fresh``: linearised at this iterate (not an earlier one's Jacobian).
    """

    cost: float
    damping: float
    gradient: float
    step_norm: float
    iteration: int
    status: FitStatus | None
    fresh: bool


class LeastSquaresProblem(Protocol):
    """A problem :func:`step` solves: the linear step differs, the loop does not."""

    termination: Termination

    def trial(self, state, damping: float) -> Trial | None:
        """The damped linearised problem's step inside the box, and its cost.

        None: no step at this damping (e.g. a singular system).
        """

    def accept(self, state, trial: Trial, damping: float, ratio: float):
        """The next iterate at ``trial``'s point, with ``damping`` for its next step."""

    def relinearized(self, state):
        """``state`` linearised afresh (only asked of a state that is not ``fresh``)."""


def terminate(termination: Termination, state: Iterate) -> FitStatus | None:
    """Why to stop at ``state`` (None: go on): no progress, step, gradient or iteration limit."""
    if state.status is not None:
        return state.status
    if state.iteration > 0 and state.step_norm <= termination.step_tolerance:
        return FitStatus.STEP
    if state.gradient <= termination.gradient_tolerance:
        return FitStatus.GRADIENT
    if state.iteration >= termination.max_iterations:
        return FitStatus.MAX_ITERATIONS
    return None


def step(problem: LeastSquaresProblem, state: Iterate):
    """One accepted iterate, or ``state`` with its final status (no progress, cost).

    Tries dampings α, 2α, 8α, … (Algorithm 1) until the gain ratio ρ is positive; on success
    α is rescaled by ``max(1/3, 1 - (2ρ - 1)³)`` (Nielsen). A failed step from an earlier
    iterate's Jacobian is retried from a fresh linearisation before α grows.
    """
    damping, growth = state.damping, 2.0
    while True:
        trial = problem.trial(state, damping)
        if trial is not None:
            gain, predicted = state.cost - trial.cost, state.cost - trial.model_cost
            ratio = gain / predicted if predicted > 0 else -1.0
            if np.isfinite(trial.cost) and np.isfinite(ratio) and ratio > 0:
                if state.fresh and gain <= problem.termination.cost_tolerance * state.cost:
                    return dataclasses.replace(state, status=FitStatus.COST)
                return problem.accept(state, trial,
                                      damping * max(1.0 / 3.0, 1.0 - (2.0 * ratio - 1.0) ** 3),
                                      ratio)
        if not state.fresh:
            state = problem.relinearized(state)
            continue
        growth = min(2.0 * growth, MAX_DAMPING)
        damping = min(growth * damping, MAX_DAMPING)
        if damping >= MAX_DAMPING:
            return dataclasses.replace(state, damping=damping, status=FitStatus.NO_PROGRESS)


def solve(problem: LeastSquaresProblem, state: Iterate,
          record: Callable[[Iterate], None] | None = None,
          out_of_time: Callable[[], bool] = lambda: False):
    """Steps from ``state`` until :func:`terminate` (or ``out_of_time()``) says stop.

    ``record(state)`` for the start and each accepted iterate. Returns the last state and its
    :class:`FitStatus`.
    """
    if record is not None:
        record(state)
    while (status := terminate(problem.termination, state)) is None:
        if out_of_time():
            return state, FitStatus.TIME_LIMIT
        following = step(problem, state)
        if record is not None and following.iteration > state.iteration:
            record(following)
        state = following
    return state, status


@dataclass(frozen=True)
class SolverSettings:
    """Method settings of one solve (paper §3.4, §4.4).

    ``kappa``: state error weight κ (``Ω⁻¹ = κI``); ``max_iterations``; stop when the projected
    gradient norm ``‖Jᵀr‖ ≤ gradient_tolerance`` or the step norm ``‖δ‖ ≤ step_tolerance``;
    ``time_limit_s``: no new iteration once the solve has run this long [s], compiling not
    counted (None: no limit).
    """

    kappa: float = 100.0
    max_iterations: int = 60
    gradient_tolerance: float = 1e-2
    step_tolerance: float = 1e-6
    time_limit_s: float | None = None


@dataclass(frozen=True)
class RecordingProblem:
    """The recording fit's problem: what stays fixed while its recordings are solved.

    ``structure``: the rig and free set (static); ``fixed``: the values of the other
    parameters; ``grids`` and ``data``: the recordings on the grid and their device data;
    ``lower``/``upper``: the free parameters' box; ``compiler``: the solve's program cache
    (it counts the compile time); ``padded_steps``: as :attr:`bucket` takes it.
    """

    structure: ModelStructure
    fixed: Mapping[str, object]
    grids: tuple[GridData, ...]
    data: tuple[StepData, ...]
    lower: Mapping[str, float]
    upper: Mapping[str, float]
    settings: SolverSettings
    compiler: Compiler = field(default_factory=Compiler)
    padded_steps: int = 0

    @property
    def free(self) -> FreeParameters:
        return self.structure.free

    @property
    def bucket(self) -> int:
        """The length every recording's whole-recording algebra is padded to.

        The longest recording's :func:`bucket_length` (at least ``padded_steps``'s): the
        recordings of one solve share one set of programs whatever their lengths (the five
        peer-rig recordings compiled nine sets); a shorter one pays for its padding in those
        programs only.
        """
        return bucket_length(max(self.padded_steps, *(grid.num_steps for grid in self.grids)))

    @property
    def termination(self) -> Termination:
        return Termination(self.settings.max_iterations, self.settings.gradient_tolerance,
                           self.settings.step_tolerance)

    def trial(self, state: LMState, damping: float) -> Trial | None:
        return _recording_trial(self, state, damping)

    def accept(self, state: LMState, trial: Trial, damping: float, ratio: float) -> LMState:
        values, states, lins = trial.point
        return _linearized_state(self, values, states, damping, trial.step_norm,
                                 state.iteration + 1, lins)

    def relinearized(self, state: LMState) -> LMState:
        return state  # every iterate is linearised where it is


@dataclass(frozen=True)
class LMState:
    """One iterate of the recording fit and what the next step needs from it.

    ``free_values``: the free parameters χ; ``states``: per recording its states (cut to its
    length); ``linearizations`` and ``normals``: per recording its blocks on its bucket;
    ``residuals``: per recording its residual blocks ``[n, m]`` (host, cut); ``cost`` ``‖r‖²``;
    ``damping`` α; ``state_scales``/``parameter_scale``: the diagonals α multiplies;
    ``gradient``: the projected gradient norm; ``step_norm``: the last accepted ``‖δ‖``;
    ``iteration``: accepted iterates so far; ``status``: None while running. Every iterate
    is linearised (``fresh``).
    """

    free_values: dict
    states: list
    linearizations: list
    normals: list
    residuals: list
    state_scales: list
    parameter_scale: np.ndarray
    cost: float
    damping: float
    gradient: float
    step_norm: float
    iteration: int
    status: FitStatus | None = None
    fresh: bool = True


def init(solver: RecordingProblem, free_values: dict, states: Sequence) -> LMState:
    """The state at the start point: linearised, damping at :data:`INITIAL_DAMPING`."""
    return _linearized_state(solver, free_values, list(states), INITIAL_DAMPING,
                             float("nan"), 0)


def _recording_trial(solver: RecordingProblem, state: LMState, damping: float
                     ) -> Trial | None:
    """The damped step of the recording fit and its linearisation (None: singular).

    The states eliminated per recording, the exact box QP in χ, the states moved back; the
    trial's cost is read from its linearisation's residuals (padded steps have zero
    residuals), which the next iterate keeps when the trial is accepted.
    """
    compiler, free = solver.compiler, solver.free
    eliminations = [compiler(eliminate_states, None, n, np.asarray(damping), scale)
                    for n, scale in zip(state.normals, state.state_scales, strict=True)]
    schur = (sum(np.asarray(n.parameter_matrix) for n in state.normals)
             + sum(np.asarray(e.schur) for e in eliminations)
             + damping * np.diag(state.parameter_scale))
    reduced_gradient = (sum(np.asarray(n.parameter_gradient) for n in state.normals)
                        + sum(np.asarray(e.schur_gradient) for e in eliminations))
    low, high = tangent_bounds(free, state.free_values, solver.lower, solver.upper)
    try:
        parameter_step = solve_box_qp(schur, reduced_gradient, low, high)
    except np.linalg.LinAlgError:
        return None
    delta = np.asarray(parameter_step, dtype=np.float64)
    box = (free, tuple(solver.lower.items()), tuple(solver.upper.items()))
    values = compiler(_moved_parameters, box, state.free_values, delta)
    trials = []
    for grid, x, lin, elimination in zip(solver.grids, state.states, state.linearizations,
                                         eliminations, strict=True):
        moved, model, size = compiler(trial_states, solver.structure, padded(
            x, lin.residuals.shape[0], "edge"), lin, elimination, delta)
        trials.append((cut(moved, grid.num_steps), model, size))
    lins = [linearization(compiler, solver.structure, solver.fixed, values, t[0], d,
                          solver.bucket) for t, d in zip(trials, solver.data, strict=True)]
    return Trial(point=(values, [t[0] for t in trials], lins),
                 cost=sum(float(np.sum(np.asarray(lin.residuals)**2)) for lin in lins),
                 model_cost=sum(float(t[1]) for t in trials),
                 step_norm=float(np.sqrt(sum(float(t[2]) for t in trials) + np.sum(delta**2))))


def _moved_parameters(box, values, delta):
    """``χ ⊞ δχ`` clipped to the box ``(free, lower items, upper items)``: one small program.

    On the host as single operations it compiled one program per operation and shape
    (about 0.35 s of a cold solve, the tilt's exponential map alone 15 of them).
    """
    free, lower, upper = box
    return clip_to_box(free, parameters_boxplus(free, values, delta), dict(lower), dict(upper))


def _linearized_state(solver: RecordingProblem, free_values: dict, states: list,
                      damping: float, step_norm: float, iteration: int,
                      lins: list[Linearization] | None = None) -> LMState:
    """The state at ``(states, free_values)``: blocks, normal equations, scales, gradient.

    ``lins``: the recordings' linearisations there, if the trial already made them.
    """
    compiler = solver.compiler
    if lins is None:
        lins = [linearization(compiler, solver.structure, solver.fixed, free_values, x, d,
                              solver.bucket) for x, d in zip(states, solver.data, strict=True)]
    normals = [compiler(normal_equations, None, lin) for lin in lins]
    residuals = [np.asarray(lin.residuals)[:grid.num_steps]
                 for lin, grid in zip(lins, solver.grids, strict=True)]
    state_scales, parameter_scale = _damping_scales(compiler, normals)
    return LMState(
        free_values=free_values, states=states, linearizations=lins, normals=normals,
        residuals=residuals, state_scales=state_scales, parameter_scale=parameter_scale,
        cost=sum(float(np.sum(r**2)) for r in residuals),
        damping=damping,
        gradient=_gradient_norm(solver, normals, free_values), step_norm=step_norm,
        iteration=iteration)


def _gradient_norm(solver: RecordingProblem, normals: Sequence[NormalEquations],
                   free_values) -> float:
    """``‖Jᵀr‖`` with the parameter part projected on the box (no push out of it)."""
    state_part = sum(float(np.sum(np.asarray(n.state_gradient)**2)) for n in normals)
    gradient = np.sum([np.asarray(n.parameter_gradient) for n in normals], axis=0)
    low, high = tangent_bounds(solver.free, free_values, solver.lower, solver.upper)
    gradient = np.where((low >= 0) & (gradient > 0) | (high <= 0) & (gradient < 0), 0.0,
                        gradient)
    return float(np.sqrt(state_part + np.sum(gradient**2)))


def _damping_scales(compiler: Compiler, normals: Sequence[NormalEquations]):
    """The diagonals the damping multiplies, floored at ``DAMPING_FLOOR · max(diag H)``."""
    parameter_diagonal = np.sum([np.diag(np.asarray(n.parameter_matrix)) for n in normals],
                                axis=0)
    largest = max(max(float(np.max(np.diagonal(np.asarray(n.diagonal), axis1=1, axis2=2)))
                      for n in normals), float(np.max(parameter_diagonal, initial=0.0)))
    floor = DAMPING_FLOOR * largest
    return ([compiler(damping_scale, None, n, np.asarray(floor)) for n in normals],
            np.maximum(parameter_diagonal, floor))
