"""Joint state and parameter estimation by Levenberg–Marquardt (§3.4, Algorithm 1).

:func:`estimate` takes an :class:`EstimationProblem` (rig, parameter values, which are free and
their box, recordings on the grid) and returns one
:class:`~mb_estimation.estimation.result.EstimationResult`. With no free parameters it is the
state-only estimation used for cross-validation (§4.5).

Per iteration: residual and Jacobian blocks per recording (compiled once for a chunk of
:data:`CHUNK_TRANSITIONS` steps, run chunk by chunk), the whole-recording algebra on the
recording zero-padded to its length bucket (:func:`bucket_length`: compiled once per bucket,
so other lengths and other numbers of recordings reuse it), then for each trial damping α the
block-tridiagonal elimination, the exact box QP in χ, the state
back-substitution and the cost at ``(x ⊞ δx, χ ⊞ δχ)``. The gain ratio ρ compares the cost
reduction with the reduction the linear model predicts, ``‖r‖² - ‖r + Jδ‖²``, which stays exact
when the box cuts the step. Compiled functions are cached by problem shape and shared by all
solves in the process (:mod:`~mb_estimation.estimation.compiled`); compilation time is
reported separately.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from mb_estimation.estimation.compiled import Compiler
from mb_estimation.estimation.covariance import (
    parameter_covariance,
    parameter_std,
    projected_blocks,
    residual_covariances,
)
from mb_estimation.estimation.formulations import formulation_named
from mb_estimation.estimation.linear_algebra import (
    damping_scale,
    eliminate_states,
    linearized_change,
    normal_equations,
    solve_box_qp,
    state_step,
)
from mb_estimation.estimation.parameters import (
    FreeParameters,
    clip_to_box,
    parameters_boxplus,
    tangent_bounds,
)
from mb_estimation.estimation.residuals import (
    Linearization,
    ModelStructure,
    StepData,
    first_jacobians,
    initial_block,
    transition_jacobians,
    transition_residuals,
)
from mb_estimation.estimation.result import (
    EstimationResult,
    FitStatus,
    IterationRecord,
    RecordingEstimate,
)
from mb_estimation.multibody import BodyStates
from mb_estimation.multibody.joint_space import JointStates
from mb_estimation.numerics import jax
from mb_estimation.rigs import Rig, parameter_arrays
from mb_estimation.signals import GridData

jnp = jax.numpy

MAX_DAMPING = 2.0**32  # Algorithm 1
# Damping α·diag(H) (Marquardt's scaling, invariant to the units of states and parameters);
# the diagonal is floored at DAMPING_FLOOR·max(diag H) for directions the data cannot see.
# Algorithm 1 starts at 1e-6·max(diag H)·I; relative to each direction's own diagonal that is
# far too strong for the weak directions, and 1e-6·diag(H) makes the 13-parameter swing-up
# crawl (40 iterations, not converged); 1e-9·diag(H) reaches ‖g‖ < 10 in 4 (RESULTS.md).
INITIAL_DAMPING = 1e-9
DAMPING_FLOOR = 1e-12
COVARIANCE_REGULARIZATION = 1e-12
# The model's residuals and Jacobian blocks are evaluated in chunks of this many transitions
# (the last one padded), so one compiled program serves every recording length; the cheap
# linear algebra over whole recordings is compiled per length bucket (bucket_length).
CHUNK_TRANSITIONS = 256


def bucket_length(num_steps: int) -> int:
    """The length a recording of ``num_steps`` is padded to for the whole-recording algebra.

    ``256 · 2^k`` times 1, 1.25, 1.5 or 1.75 (four sizes per doubling, at most a fifth of it
    padding): the normal equations, block elimination and state maps compile once per bucket,
    and every recording length in it reuses them. Their cost grows with the padding (measured
    in RESULTS.md, issue 16).
    """
    size = CHUNK_TRANSITIONS
    while True:
        for quarters in (4, 5, 6, 7):
            if size * quarters // 4 >= num_steps:
                return size * quarters // 4
        size *= 2


def _padded(tree, length: int, mode: str):
    """Every leaf padded along its first axis to ``length``, on the host, then on the device.

    ``mode``: ``zeros`` (residual and Jacobian blocks: padded steps add nothing to any sum,
    and their states decouple), ``edge`` (states: the last one repeated) or ``linear`` (angles
    extrapolated along the last difference, so that a central difference at the last real
    sample is the one-sided difference it would be without padding). Host arrays and one
    transfer: device-side padding would compile a small program for every length.
    """
    def pad(leaf):
        leaf = np.asarray(leaf)
        extra = length - leaf.shape[0]
        if mode == "zeros":
            tail = np.zeros((extra, *leaf.shape[1:]), leaf.dtype)
        elif mode == "edge":
            tail = np.repeat(leaf[-1:], extra, axis=0)
        else:  # linear
            ramp = np.arange(1, extra + 1).reshape((-1,) + (1,) * (leaf.ndim - 1))
            tail = leaf[-1] + ramp * (leaf[-1] - leaf[-2])
        return jax.device_put(np.concatenate([leaf, tail]))

    return jax.tree_util.tree_map(pad, tree)


def _cut(tree, length: int):
    """Every leaf's first ``length`` entries, as host arrays."""
    return jax.tree_util.tree_map(lambda leaf: np.asarray(leaf)[:length], tree)


def _on_bucket(compiler, function, static, length: int, *args):
    """``function`` over a recording's steps, run on its bucket and cut back to ``length``.

    ``args`` are ``(value, padding mode or None)``: per-step arrays are padded, others (None)
    passed as they are.
    """
    size = bucket_length(length)
    padded = [value if mode is None else _padded(value, size, mode) for value, mode in args]
    return _cut(compiler(function, static, *padded), length)


@dataclass(frozen=True)
class SolverSettings:
    """Method settings of one solve (paper §3.4, §4.4).

    ``kappa``: state error weight κ (``Ω⁻¹ = κI``); ``max_iterations``; stop when the projected
    gradient norm ``‖Jᵀr‖ ≤ gradient_tolerance`` or the step norm ``‖δ‖ ≤ step_tolerance``.
    """

    kappa: float = 100.0
    max_iterations: int = 60
    gradient_tolerance: float = 1e-2
    step_tolerance: float = 1e-6


@dataclass(frozen=True)
class EstimationProblem:
    """What to estimate from which data.

    ``parameters``: every model parameter's value (the free ones: initial guesses) by name;
    ``free``: names of the estimated parameters; ``lower``/``upper``: their box (scalars);
    ``recordings``: the data on the grid, all with the same step ``dt``; ``formulation``:
    ``maximal`` (the paper's states and residuals) or ``joint`` (the rigid limit in joint
    coordinates, :mod:`mb_estimation.estimation.formulations`).
    """

    rig: Rig
    parameters: Mapping[str, object]
    free: tuple[str, ...]
    lower: Mapping[str, float]
    upper: Mapping[str, float]
    recordings: tuple[GridData, ...]
    formulation: str = "maximal"

    @property
    def dt(self) -> float:
        return self.recordings[0].dt


def states_from_angles(structure: ModelStructure, fixed, free_values, filtered_angles, dt):
    """States from filtered angles (§4.4): zero-violation configurations, velocities (4.3)."""
    return structure.formulation.initial_states(structure.system(fixed, free_values),
                                                filtered_angles, None, dt)


def states_from_angles_and_rates(structure: ModelStructure, fixed, free_values, angles,
                                 rates):
    """States from filtered angles and driver joint rates [rad/s] (initial states, §4.4)."""
    return structure.formulation.initial_states(structure.system(fixed, free_values), angles,
                                                rates, None)


def _transition_chunks(states, data: StepData, size: int):
    """A recording's transitions as host arrays in chunks of ``size``, and their number.

    Each chunk is ``(previous, current, inputs, measured_angles, observed)``; the last one is
    padded by repeating its final transition (the padding's results are dropped).
    """
    count = int(np.shape(data.observed)[0]) - 1
    padded = -(-count // size) * size

    def pad(array):
        array = np.asarray(array)
        return np.concatenate([array, np.repeat(array[-1:], padded - count, axis=0)])

    host = jax.tree_util.tree_map(np.asarray, states)
    previous = jax.tree_util.tree_map(lambda a: pad(a[:-1]), host)
    current = jax.tree_util.tree_map(lambda a: pad(a[1:]), host)
    inputs, measured, observed = (pad(data.inputs), pad(np.asarray(data.measured_angles)[1:]),
                                  pad(np.asarray(data.observed)[1:]))
    chunks = []
    for start in range(0, padded, size):
        window = slice(start, start + size)
        chunks.append((jax.tree_util.tree_map(lambda a, w=window: a[w], previous),
                       jax.tree_util.tree_map(lambda a, w=window: a[w], current),
                       inputs[window], measured[window], observed[window]))
    return chunks, count


def _first_state(states):
    return jax.tree_util.tree_map(lambda a: np.asarray(a)[0], states)


def _in_chunks(compiler, first_function, transition_function, structure, fixed, free_values,
               states, data: StepData):
    """Block 0 by ``first_function`` and the transitions by ``transition_function``.

    The transitions go chunk by chunk; their outputs (a tuple or one array) are concatenated
    and cut to the recording's length on the host (no program per length).
    """
    first = compiler(first_function, structure, fixed, free_values, _first_state(states),
                     data.measured_angles[0], data.observed[0], data.dt, data.sqrt_kappa)
    chunks, count = _transition_chunks(states, data, CHUNK_TRANSITIONS)
    parts = [compiler(transition_function, structure, fixed, free_values, *chunk, data.dt,
                      data.sqrt_kappa) for chunk in chunks]
    transitions = jax.tree_util.tree_map(
        lambda *pieces: np.concatenate([np.asarray(piece) for piece in pieces])[:count], *parts)
    return jax.tree_util.tree_map(np.asarray, first), transitions


def _linearization(compiler, structure, fixed, free_values, states, data: StepData):
    """:class:`Linearization` of one recording, chunk by chunk, zero-padded to its bucket."""
    (value0, current0, parameters0), (value, previous, current, parameters) = _in_chunks(
        compiler, first_jacobians, transition_jacobians, structure, fixed, free_values, states,
        data)
    size = bucket_length(value.shape[0] + 1)

    def blocks(first, rest):  # block 0, the transitions', then zeros up to the bucket
        return _padded(np.concatenate([first[None], rest]), size, "zeros")

    return Linearization(residuals=blocks(value0, value),
                         previous=blocks(np.zeros_like(current0), previous),
                         current=blocks(current0, current),
                         parameters=blocks(parameters0, parameters))


def _residuals(compiler, structure, fixed, free_values, states, data: StepData):
    """All residual blocks ``[n, m]`` of one recording, chunk by chunk."""
    first, transitions = _in_chunks(compiler, initial_block, transition_residuals, structure,
                                    fixed, free_values, states, data)
    return np.concatenate([first[None], transitions])


def _trial_states(structure, states, lin: Linearization, elimination, parameter_step):
    """Trial states of one recording and the sums the gain ratio needs (model cost, ‖δx‖²).

    On the padded length of ``lin`` (``states`` padded likewise; the padded steps do not move).
    """
    step = state_step(elimination, parameter_step)
    moved = structure.formulation.boxplus(states, step)
    model = lin.residuals + linearized_change(lin, step, parameter_step)
    return moved, jnp.sum(model**2), jnp.sum(step**2)


def _shadow(structure, fixed, free_values, states):
    return structure.formulation.shadow(structure.system(fixed, free_values), states)


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


def excited_by_data(kind: str, std: np.ndarray, value: np.ndarray, initial: np.ndarray) -> bool:
    """Whether the data determines the parameter.

    A scalar is excited when its standard deviation is at most ``max(|value|, |initial|)``:
    like Table 4's ``J_Axx = 0(200)`` a parameter the data leaves free is not, while one that
    the data pins at its bound 0 with a small standard deviation is.
    A quaternion (``tilt``) acts only through the direction of gravity, two degrees of
    freedom: it is excited when at least two tangent directions are known within 0.1 rad.
    """
    if kind == "quaternion":
        return int(np.sum(np.asarray(std) <= 0.1)) >= 2
    scale = max(abs(float(value)), abs(float(initial)))
    return bool(np.isfinite(std).all() and float(std[0]) <= scale)


def estimate(problem: EstimationProblem, settings: SolverSettings = SolverSettings(), *,
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
    compiler = Compiler()
    rig = problem.rig
    free = FreeParameters.of(rig.spec, problem.free)
    structure = ModelStructure(rig, free, formulation_named(problem.formulation))
    values = parameter_arrays(problem.parameters)
    fixed = {k: v for k, v in values.items() if k not in free.names}
    free_values = {k: values[k] for k in free.names}
    initial_free = {k: np.asarray(v) for k, v in free_values.items()}
    datas = [
        StepData(np.asarray(r.measured_angles), np.asarray(r.inputs), np.asarray(r.observed),
                 jnp.asarray(r.dt), jnp.asarray(np.sqrt(settings.kappa)))
        for r in problem.recordings
    ]
    if initial_states is None:
        states = [_on_bucket(compiler, states_from_angles, structure, r.num_steps,
                             (fixed, None), (free_values, None), (r.filtered_angles, "linear"),
                             (jnp.asarray(r.dt), None))
                  if r.initial_rates is None else
                  _on_bucket(compiler, states_from_angles_and_rates, structure, r.num_steps,
                             (fixed, None), (free_values, None), (r.filtered_angles, "linear"),
                             (r.initial_rates, "edge"))
                  for r in problem.recordings]
    else:
        states = list(initial_states)
    num_steps = sum(r.num_steps for r in problem.recordings)

    def linearize_all(free_values, states):
        lins = [_linearization(compiler, structure, fixed, free_values, x, d)
                for x, d in zip(states, datas, strict=False)]
        return lins, [compiler(normal_equations, None, lin) for lin in lins]

    def gradient_norm(normals, free_values):
        state_part = sum(float(jnp.sum(n.state_gradient**2)) for n in normals)
        gradient = np.sum([np.asarray(n.parameter_gradient) for n in normals], axis=0)
        low, high = tangent_bounds(free, free_values, problem.lower, problem.upper)
        # the projected gradient: no component that would push χ out of the box
        gradient = np.where((low >= 0) & (gradient > 0) | (high <= 0) & (gradient < 0), 0.0,
                            gradient)
        return float(np.sqrt(state_part + np.sum(gradient**2)))

    def damping_scales(normals):
        parameter_diagonal = np.sum([np.diag(np.asarray(n.parameter_matrix)) for n in normals],
                                    axis=0)
        largest = max(max(float(jnp.max(jnp.diagonal(n.diagonal, axis1=1, axis2=2)))
                          for n in normals), float(np.max(parameter_diagonal, initial=0.0)))
        floor = DAMPING_FLOOR * largest
        return ([compiler(damping_scale, None, n, jnp.asarray(floor)) for n in normals],
                np.maximum(parameter_diagonal, floor))

    def record(iteration, residuals, damping, gradient, step):
        impulse, observation = _cost_parts(residuals, num_impulse_rows)
        entry = IterationRecord(
            iteration=iteration, cost=(impulse + observation) / num_steps,
            observation_mse=observation / num_steps, impulse_mse=impulse / num_steps,
            parameters={k: np.asarray(v) for k, v in free_values.items()}, damping=damping,
            gradient_norm=gradient, step_norm=step, elapsed_s=time.perf_counter() - started,
            dt=problem.dt)
        history.append(entry)
        if progress is not None:
            progress(entry)

    lins, normals = linearize_all(free_values, states)
    residuals = [np.asarray(lin.residuals)[:r.num_steps]
                 for lin, r in zip(lins, problem.recordings, strict=True)]
    num_impulse_rows = residuals[0].shape[1] - datas[0].measured_angles.shape[1]
    cost = sum(float(np.sum(r**2)) for r in residuals)
    state_scales, parameter_scale = damping_scales(normals)
    damping = INITIAL_DAMPING
    history: list[IterationRecord] = []
    gradient = gradient_norm(normals, free_values)
    record(0, residuals, damping, gradient, float("nan"))
    status = FitStatus.MAX_ITERATIONS
    iteration = 0
    while iteration < settings.max_iterations:
        if gradient <= settings.gradient_tolerance:
            status = FitStatus.GRADIENT
            break
        # independent of the damping: summed once per linearisation
        parameter_matrix = sum(np.asarray(n.parameter_matrix) for n in normals)
        parameter_gradient = sum(np.asarray(n.parameter_gradient) for n in normals)
        low, high = tangent_bounds(free, free_values, problem.lower, problem.upper)
        growth = 2.0
        while True:
            eliminations = [compiler(eliminate_states, None, n, jnp.asarray(damping), scale)
                            for n, scale in zip(normals, state_scales, strict=False)]
            schur = (parameter_matrix + sum(np.asarray(e.schur) for e in eliminations)
                     + damping * np.diag(parameter_scale))
            reduced_gradient = parameter_gradient + sum(np.asarray(e.schur_gradient)
                                                        for e in eliminations)
            try:
                parameter_step = solve_box_qp(schur, reduced_gradient, low, high)
            except np.linalg.LinAlgError:
                parameter_step = None
            accepted = False
            if parameter_step is not None:
                delta = jnp.asarray(parameter_step)
                trial_values = clip_to_box(free, parameters_boxplus(free, free_values, delta),
                                           problem.lower, problem.upper)
                trials = []
                for grid, x, lin, e in zip(problem.recordings, states, lins, eliminations,
                                           strict=True):
                    moved, model, size = compiler(_trial_states, structure, _padded(
                        x, lin.residuals.shape[0], "edge"), lin, e, delta)
                    trials.append((_cut(moved, grid.num_steps), model, size))
                trial_residuals = [
                    np.asarray(_residuals(compiler, structure, fixed, trial_values, t[0], d))
                    for t, d in zip(trials, datas, strict=False)]
                trial_cost = sum(float(np.sum(r**2)) for r in trial_residuals)
                model_cost = sum(float(t[1]) for t in trials)
                step_norm = float(np.sqrt(sum(float(t[2]) for t in trials)
                                          + np.sum(parameter_step**2)))
                predicted = cost - model_cost
                ratio = (cost - trial_cost) / predicted if predicted > 0 else -1.0
                accepted = bool(np.isfinite(trial_cost) and np.isfinite(ratio) and ratio > 0)
            if accepted:
                break
            growth = min(2.0 * growth, MAX_DAMPING)
            damping = min(growth * damping, MAX_DAMPING)
            if damping >= MAX_DAMPING:
                break
        if not accepted:
            status = FitStatus.NO_PROGRESS
            break
        iteration += 1
        free_values = trial_values
        states = [t[0] for t in trials]
        cost = trial_cost
        lins, normals = linearize_all(free_values, states)
        state_scales, parameter_scale = damping_scales(normals)
        residuals = [np.asarray(lin.residuals)[:r.num_steps]
                     for lin, r in zip(lins, problem.recordings, strict=True)]
        damping *= max(1.0 / 3.0, 1.0 - (2.0 * ratio - 1.0) ** 3)
        gradient = gradient_norm(normals, free_values)
        record(iteration, residuals, damping, gradient, step_norm)
        if step_norm <= settings.step_tolerance:
            status = FitStatus.STEP
            break
    else:
        if gradient <= settings.gradient_tolerance:
            status = FitStatus.GRADIENT

    impulse_cov, observation_cov = residual_covariances(
        residuals, num_impulse_rows, [np.asarray(r.observed) for r in problem.recordings])
    blocks = [compiler(_covariance_blocks, num_impulse_rows, lin, n, scale,
                       jnp.asarray(impulse_cov), jnp.asarray(observation_cov))
              for lin, n, scale in zip(lins, normals, state_scales, strict=False)]
    information = sum(np.asarray(b.information) for b in blocks)
    middle = sum(np.asarray(b.middle) for b in blocks)
    covariance = parameter_covariance(information, middle)
    std = parameter_std(information, middle, free,
                        np.asarray(structure.system(fixed, free_values).gravity))
    excited = {name: excited_by_data(kind, std[name], np.asarray(free_values[name]),
                                     initial_free[name])
               for name, kind in zip(free.names, free.kinds, strict=True)}

    estimates = []
    for grid, x, r in zip(problem.recordings, states, residuals, strict=False):
        angles, rates, bodies = _on_bucket(compiler, _shadow, structure, grid.num_steps,
                                           (fixed, None), (free_values, None), (x, "edge"))
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

    converged = status.converged
    final = history[-1]
    descriptions = {
        FitStatus.GRADIENT: "converged: gradient norm below tolerance",
        FitStatus.STEP: "converged: step below tolerance",
        FitStatus.NO_PROGRESS: "stopped: no damping gives a decrease (a local minimum to working "
                       "precision, or a poorly scaled problem)",
        FitStatus.MAX_ITERATIONS: f"stopped at the iteration limit ({settings.max_iterations}) "
                          "before a tolerance was met",
    }
    message = (f"{descriptions[status]}; {iteration} iterations, cost {final.cost:.4g} "
               f"(observation {final.observation_mse:.4g}, impulse {final.impulse_mse:.4g})")
    total = time.perf_counter() - started
    parameters = {k: np.asarray(v) for k, v in {**fixed, **free_values}.items()}
    return EstimationResult(
        parameters=parameters, free=free.names, std=std, excited=excited, covariance=covariance,
        recordings=tuple(estimates), cost=final.cost, observation_mse=final.observation_mse,
        impulse_mse=final.impulse_mse, iterations=iteration, converged=converged, status=status,
        message=message, history=tuple(history), compile_time_s=compiler.seconds,
        solve_time_s=total - compiler.seconds,
        settings={"dt": problem.dt, "kappa": settings.kappa,
                  "max_iterations": settings.max_iterations,
                  "gradient_tolerance": settings.gradient_tolerance,
                  "step_tolerance": settings.step_tolerance},
    )
