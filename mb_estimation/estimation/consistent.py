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
from the previous (:func:`fit_joint_level`: parameters, and the shadow motion carried by cubic
Hermite interpolation); the plan of stages that runs them and keeps each level's record is
:mod:`mb_estimation.fitting`'s. A value that moves between the last two levels by more than its
standard deviation is still a shadow of the method.

Optionally (:func:`simulation_refit`, merged by :func:`with_refit`) a last stage fits the
parameters through the model the hinges declare by multiple shooting
(:mod:`~mb_estimation.estimation.shooting`), started from the finest fit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from mb_estimation.estimation.agreement import RecordingShare
from mb_estimation.estimation.covariance import CorrelatedCovariance
from mb_estimation.estimation.formulations import joint_motion_on
from mb_estimation.estimation.result import EstimationResult, IterationRecord
from mb_estimation.estimation.shooting import (
    ShootingResult,
    ShootingSettings,
    fit_by_shooting,
)
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

    ``settings.kappa`` is the weight per step of this level (:func:`kappa_per_step`).
    ``previous``: the level before (coarser), whose free parameter values and states (carried
    by cubic Hermite interpolation onto this grid) this one starts from; None for the first
    level. ``progress`` sees each iteration. Returns this level's solve alone.
    """
    problem = dataclasses.replace(problem, formulation="joint")
    if previous is not None:
        grids = []
        for estimate_, grid in zip(previous.recordings, problem.recordings, strict=True):
            angles, rates = joint_motion_on(estimate_.time_s, estimate_.joint_angles,
                                            estimate_.joint_rates, grid.time_s)
            grids.append(dataclasses.replace(grid, filtered_angles=angles, initial_rates=rates))
        problem = dataclasses.replace(
            problem, recordings=tuple(grids),
            parameters={**problem.parameters,
                        **{name: previous.parameters[name] for name in problem.free}})
    return estimate(problem, settings, progress=progress)


def simulation_refit(result: EstimationResult, problem: EstimationProblem,
                     simulation_dt: float, settings: ShootingSettings,
                     progress: Callable[[int, float, dict], None] | None = None
                     ) -> ShootingResult:
    """The joint fit ``result``'s scalar parameters refit through the simulator (shooting).

    ``problem``: the finest level's (its rig, bounds, grids and initial values); the simulator
    steps at ``simulation_dt`` [s], the shooting as ``settings`` say, from ``result``'s
    states. Every scalar is refit, also one the joint fit did not determine: held at the joint
    fit's value, it would bias the others, and their std would leave its uncertainty out.
    """
    scalars = tuple(name for name in result.free if np.size(result.parameters[name]) == 1)
    return fit_by_shooting(
        problem.rig, result.parameters, scalars, problem.lower, problem.upper,
        problem.recordings, [(r.joint_angles, r.joint_rates) for r in result.recordings],
        simulation_dt, settings, progress)


def with_refit(result: EstimationResult, refit: ShootingResult) -> EstimationResult:
    """The joint fit ``result`` with the parameters of its :func:`simulation_refit`.

    The refit parameters' values, std, covariance (also with the residuals' correlation),
    recording shares and excitation flags are the refit's; the others (a quaternion such as
    ``tilt``, a parameter left out) keep the joint fit's value and std, without correlation
    with the refit ones; the states stay the joint fit's; iterations and times add up.
    """
    parameters = {**result.parameters,
                  **{name: np.asarray(value) for name, value in refit.values.items()}}
    std = {**result.std, **{name: np.atleast_1d(refit.std[name]) for name in refit.names}}
    excited = {**result.excited,
               **{name: excited_by_data("scalar", std[name], parameters[name])
                  for name in refit.names}}
    rows = result.tangent_rows
    at = np.array([row for name in refit.names for row in rows[name]], dtype=int)

    def merged(joint_covariance, refit_covariance):
        covariance = np.array(joint_covariance, dtype=np.float64)
        covariance[at, :] = 0.0
        covariance[:, at] = 0.0
        covariance[np.ix_(at, at)] = refit_covariance
        return covariance

    correlated = None
    if result.correlated is not None and refit.correlated is not None:
        correlated = CorrelatedCovariance(
            merged(result.correlated.covariance, refit.correlated.covariance),
            {**result.correlated.std, **{name: np.atleast_1d(refit.correlated.std[name])
                                         for name in refit.names}},
            max(result.correlated.correlation_s, refit.correlated.correlation_s))

    def merged_share(joint: RecordingShare, refitted: RecordingShare) -> RecordingShare:
        score = np.array(joint.score, dtype=np.float64)
        score[at] = refitted.score
        return RecordingShare(merged(joint.information, refitted.information),
                              merged(joint.middle, refitted.middle),
                              merged(joint.correlated_middle, refitted.correlated_middle), score)

    shares = tuple(merged_share(j, r) for j, r in zip(result.shares, refit.shares, strict=True)) \
        if result.shares and refit.shares else ()
    return dataclasses.replace(
        result, parameters=parameters, std=std, excited=excited,
        covariance=merged(result.covariance, refit.covariance), correlated=correlated,
        shares=shares,
        iterations=result.iterations + refit.iterations,
        compile_time_s=result.compile_time_s + refit.compile_time_s,
        solve_time_s=result.solve_time_s + refit.solve_time_s,
        message=(f"{result.message}; through the simulator (step {refit.step_s:g} s): "
                 f"{refit.status.description}, after {refit.iterations} iterations; angle MSE "
                 f"{refit.cost:.4g} rad²"))
