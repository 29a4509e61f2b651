"""The consistent estimation path: estimates that stop depending on the method's own step.

The paper's single fit (§3, :func:`~mb_estimation.estimation.estimate` in maximal coordinates)
converges to *shadow* parameters whenever the data were not produced by its own step h and
hinge compliance ε (§4.9). This path removes the three measured causes of that bias:

1. **Stiff hinges.** The joint-coordinate formulation
   (:class:`~mb_estimation.estimation.formulations.JointCoordinates`) is the rigid limit of the
   regularised model: the holonomic multipliers, whose sensitivity grows as 1/ε, are eliminated
   by projecting onto the motions the hinges allow. Nothing in it stiffens as ε → 0.
2. **The step.** Its discretisation is variational and second order, so the dynamics residuals
   of the true motion vanish as O(h²), not O(h).
3. **The weight of the dynamics.** With ``Ω⁻¹ = κ I`` per step (§4.4) the force noise the fit
   allows grows as the step shrinks (κ per step means ``1/(κ h)`` per second); refining h then
   lets the states follow the noise and biases the parameters (errors in variables). Here κ is
   read at the paper's step, ``h_ref = 0.01 s``, and used per step as ``κ h_ref / h``, a fixed
   force noise intensity whatever the step. The same holds for the rig's size: impulses scale
   with its inertia, so a κ that suits the paper's rig lets a rig a hundred times lighter follow
   its noise (and its inertias fall to their bounds: a fit whose states absorb the noise pays
   least for the dynamics with the least inertia). κ is read for a rig of
   ``I_ref = 0.04 kg m²`` about its first joint (the paper's, Table 1: 0.041) and scaled by
   ``(I_ref / I)²`` for a rig of rest inertia ``I`` (:attr:`~mb_estimation.rigs.Rig.rest_inertia`,
   from the values the fit starts from): the same force noise relative to the rig's inertia.

The fit runs on a sequence of steps, coarse to fine (by default ``2h, h``), each warm-started
from the previous (parameters, and the shadow motion carried by cubic Hermite interpolation).
The result is the finest fit; every level is kept in ``EstimationResult.refinement`` so the
output can show how far the estimate still moved with the step — a value that moves by more
than its standard deviation is still a shadow of the method.

Optionally (:func:`refined_through_simulator`) a last level fits the parameters through the
config's own simulator by multiple shooting (:mod:`~mb_estimation.estimation.shooting`),
started from the finest fit: for rigs whose hinges are themselves compliant and damped, which
no rigid model follows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mb_estimation import lie
from mb_estimation.estimation.formulations import joint_motion_on
from mb_estimation.estimation.result import EstimationResult, FitStatus, IterationRecord
from mb_estimation.estimation.shooting import ShootingSettings, refine_by_simulation
from mb_estimation.estimation.solver import (
    EstimationProblem,
    SolverSettings,
    estimate,
    excited_by_data,
)

KAPPA_REFERENCE_STEP = 0.01  # [s] the step at which κ is read (the paper's §4.6 setting)
# [kg m²] the rest inertia at which κ is read: about the paper's rig's (Table 1: 0.0407; the
# Table G.5 values of §4.7: 0.0334), for which κ = 100 was chosen (§4.6)
KAPPA_REFERENCE_INERTIA = 0.04


@dataclass(frozen=True)
class RefinementLevel:
    """One fit of the consistent path: its step, weight, estimate and effort.

    ``parameters``/``std`` hold the free parameters only (tangent std for a quaternion).
    ``formulation``: ``joint`` (the rigid limit at step ``dt``, κ per step ``kappa``) or
    ``simulation`` (multiple shooting through the simulator at step ``dt``; ``kappa`` is nan
    and ``cost`` the mean squared angle error per scored sample [rad²]; ``segment_s`` the
    accepted shooting segment length [s], ``segments_tried`` every length fitted).
    """

    dt: float
    kappa: float
    parameters: dict[str, np.ndarray]
    std: dict[str, np.ndarray]
    cost: float
    iterations: int
    status: FitStatus
    solve_time_s: float
    compile_time_s: float
    formulation: str = "joint"
    segment_s: float | None = None
    segments_tried: tuple[float, ...] = ()


def kappa_per_step(kappa: float, dt: float,
                   rest_inertia: float = KAPPA_REFERENCE_INERTIA) -> float:
    """κ per step of ``dt`` [s] on a rig of ``rest_inertia`` [kg m²] (module docstring, 3.).

    ``kappa`` is read at :data:`KAPPA_REFERENCE_STEP` on a rig of
    :data:`KAPPA_REFERENCE_INERTIA`: ``κ (h_ref / dt) (I_ref / rest_inertia)²``.
    """
    if not rest_inertia > 0.0:
        raise ValueError(f"the rig's rest inertia must be positive, got {rest_inertia!r} kg m²")
    return kappa * (KAPPA_REFERENCE_STEP / dt) * (KAPPA_REFERENCE_INERTIA / rest_inertia) ** 2


def refinement_steps(finest_dt: float, levels: int) -> tuple[float, ...]:
    """``finest·2^(levels-1), …, 2 finest, finest`` [s], coarse to fine."""
    if levels < 1:
        raise ValueError(f"the consistent path needs at least one level, got {levels}")
    return tuple(float(f"{finest_dt * 2.0 ** (levels - 1 - i):.12g}") for i in range(levels))


def fit_joint_level(problem: EstimationProblem, settings: SolverSettings,
                    previous: EstimationResult | None = None, *,
                    progress: Callable[[IterationRecord], None] | None = None
                    ) -> EstimationResult:
    """One level of the consistent path: the joint-coordinate fit on ``problem``'s grid.

    ``settings.kappa`` is read at :data:`KAPPA_REFERENCE_STEP` on a rig of
    :data:`KAPPA_REFERENCE_INERTIA` (:func:`kappa_per_step`, with the rest inertia of the values
    the first level starts from). ``previous``: the level before (coarser), whose parameters
    and states (carried by cubic Hermite interpolation) this one starts from and whose levels,
    history, iterations and times it extends; None for the first level. ``progress`` sees each
    iteration, numbered on from the levels before. Returns the fit with every level so far in
    ``refinement`` (:func:`refined_through_simulator` may add a simulation-error level after it).
    """
    problem = dataclasses.replace(problem, formulation="joint")
    dt = float(problem.recordings[0].dt)
    if previous is None:  # from the values the fit starts from, not a level's estimate
        rest_inertia = problem.rig.rest_inertia(problem.parameters)
        levels, history = (), ()
    else:
        rest_inertia = previous.settings["rest_inertia"]
        levels, history = previous.refinement, previous.history
        grids = []
        for estimate_, grid in zip(previous.recordings, problem.recordings, strict=True):
            angles, rates = joint_motion_on(estimate_.time_s, estimate_.joint_angles,
                                            estimate_.joint_rates, grid.time_s)
            grids.append(dataclasses.replace(grid, filtered_angles=angles, initial_rates=rates))
        problem = dataclasses.replace(
            problem, recordings=tuple(grids),
            parameters={**problem.parameters,
                        **{name: previous.parameters[name] for name in problem.free}})
    relayed: list[IterationRecord] = []

    def relay(entry: IterationRecord) -> None:
        entry = dataclasses.replace(entry, iteration=entry.iteration + len(history))
        relayed.append(entry)
        if progress is not None:
            progress(entry)

    kappa = kappa_per_step(settings.kappa, dt, rest_inertia)
    result = estimate(problem, dataclasses.replace(settings, kappa=kappa), progress=relay)
    levels = (*levels, RefinementLevel(
        dt=dt, kappa=kappa,
        parameters={name: np.asarray(result.parameters[name]) for name in result.free},
        std=dict(result.std), cost=result.cost, iterations=result.iterations,
        status=result.status, solve_time_s=result.solve_time_s,
        compile_time_s=result.compile_time_s))
    steps = [level.dt for level in levels]
    iterations = sum(level.iterations for level in levels)
    summary = (f"{result.message.split(';')[0]} at the finest step; {iterations} iterations "
               f"over steps {', '.join(f'{step:g}' for step in steps)} s, cost "
               f"{result.cost:.4g} (observation {result.observation_mse:.4g}, impulse "
               f"{result.impulse_mse:.4g})")
    return dataclasses.replace(
        result, refinement=levels, history=(*history, *relayed), iterations=iterations,
        message=summary,
        compile_time_s=sum(level.compile_time_s for level in levels),
        solve_time_s=sum(level.solve_time_s for level in levels),
        settings={**result.settings, "estimator": "consistent",
                  "kappa_reference": settings.kappa,
                  "kappa_reference_step": KAPPA_REFERENCE_STEP,
                  "kappa_reference_inertia": KAPPA_REFERENCE_INERTIA,
                  "rest_inertia": rest_inertia, "steps": steps})


def refined_through_simulator(result: EstimationResult, problem: EstimationProblem,
                              simulation_dt: float, settings: ShootingSettings,
                              progress: Callable[[int, float, dict], None] | None = None
                              ) -> EstimationResult:
    """A consistent ``result`` refit through the simulator, its last refinement level added.

    ``problem``: the finest level's (its rig, bounds, grids and initial values); the simulator
    steps at ``simulation_dt`` [s], the shooting as ``settings`` say. The scalar
    parameters are refit (through the config's hinges: only those the joint fit determined,
    since an undetermined one wanders off in their stiff dynamics): their values, std,
    covariance and excitation flags are the refit's; the others (a quaternion such as
    ``tilt``) keep the joint fit's value and std, without correlation with the refit ones; the
    states stay the joint fit's; iterations and times add up.
    """
    rigid = settings.rigid  # the rigid model follows what the joint fit fitted
    scalars = tuple(name for name in result.free
                    if np.size(result.parameters[name]) == 1 and (rigid or result.excited[name]))
    refined = refine_by_simulation(
        problem.rig, result.parameters, scalars, problem.lower, problem.upper,
        problem.recordings, [(r.joint_angles, r.joint_rates) for r in result.recordings],
        simulation_dt, settings, progress)
    parameters = {**result.parameters,
                  **{name: np.asarray(value) for name, value in refined.values.items()}}
    std = {**result.std, **{name: np.atleast_1d(refined.std[name]) for name in refined.names}}
    excited = {**result.excited,
               **{name: excited_by_data("scalar", std[name], parameters[name])
                  for name in refined.names}}
    rows = _tangent_rows(result)
    at = np.concatenate([rows[name] for name in scalars]).astype(int)
    covariance = np.array(result.covariance, dtype=np.float64)
    covariance[at, :] = 0.0
    covariance[:, at] = 0.0
    covariance[np.ix_(at, at)] = refined.covariance
    level = RefinementLevel(
        dt=refined.step_s, kappa=float("nan"),
        parameters={name: parameters[name] for name in refined.names}, std=std,
        cost=refined.cost, iterations=refined.iterations,
        status=refined.status,
        solve_time_s=refined.solve_time_s, compile_time_s=refined.compile_time_s,
        formulation="simulation", segment_s=refined.segment_s, segments_tried=refined.tried)
    return dataclasses.replace(
        result, parameters=parameters, std=std, excited=excited, covariance=covariance,
        refinement=(*result.refinement, level), iterations=result.iterations + level.iterations,
        compile_time_s=result.compile_time_s + level.compile_time_s,
        solve_time_s=result.solve_time_s + level.solve_time_s,
        message=(f"{result.message}; through the simulator (step {level.dt:g} s): "
                 f"{level.status} after {level.iterations} iterations, angle MSE "
                 f"{level.cost:.4g} rad²"))


def _tangent_rows(result: EstimationResult) -> dict[str, np.ndarray]:
    """Each free parameter's rows in the covariance: one per scalar, three per quaternion."""
    rows, start = {}, 0
    for name in result.free:
        size = 3 if np.size(result.parameters[name]) == 4 else 1
        rows[name] = np.arange(start, start + size)
        start += size
    return rows


@dataclass(frozen=True)
class StepDependence:
    """How far one free parameter moved between the last two refinement levels.

    ``change`` is finest minus the level before, in the parameter's tangent space (a rotation
    vector [rad] for a quaternion); ``settled`` is True when every component moved by at most
    the finest level's standard deviation (a larger move means the value still depends on the
    step: a shadow of the method rather than of the rig).
    """

    name: str
    coarse: np.ndarray
    fine: np.ndarray
    change: np.ndarray
    std: np.ndarray
    settled: bool


def step_dependence(result: EstimationResult) -> tuple[StepDependence, ...]:
    """Per free parameter, its change over the last two levels of ``result.refinement``.

    None (empty) after a simulation-error fit: its values come from a converged simulation, not
    from the joint fit's step, so a change against the joint fit says nothing about the step.
    """
    if len(result.refinement) < 2 or result.refinement[-1].formulation == "simulation":
        return ()
    coarse, fine = result.refinement[-2], result.refinement[-1]
    rows = []
    for name in result.free:
        if name not in fine.parameters or name not in coarse.parameters:
            continue
        before, after = np.asarray(coarse.parameters[name]), np.asarray(fine.parameters[name])
        if before.size == 4:  # a unit quaternion: the rotation from one to the other
            change = lie.quat_boxminus(after, before)
        else:
            change = np.atleast_1d(after - before)
        std = np.atleast_1d(np.asarray(fine.std[name], dtype=float))
        rows.append(StepDependence(name, before, after, change, std,
                                   bool(np.all(np.abs(change) <= std))))
    return tuple(rows)
