"""The pipeline shared by the command line and the node: config + recordings → estimate.

recording → signals (grid) → estimation problem → result (DESIGN §2: data flows one way).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from mb_estimation.estimation import (
    EstimationProblem,
    EstimationResult,
    IterationRecord,
    SolverSettings,
    estimate,
)
from mb_estimation.io.config import Config, apply_overrides
from mb_estimation.multibody import BodyStates
from mb_estimation.rigs import get_rig
from mb_estimation.signals import GridData, Recording, prepare_recording
from mb_estimation.simulation import OpenLoopCheck, open_loop_check


def prepare(config: Config, recordings: Sequence[Recording], *, start_s: float | None = None,
            end_s: float | None = None) -> tuple[GridData, ...]:
    """Every recording on the config's estimation grid."""
    method = config.method
    return tuple(prepare_recording(r, method.dt, method.filter_cutoff_hz, start_s=start_s,
                                   end_s=end_s) for r in recordings)


def solver_settings(config: Config) -> SolverSettings:
    """The LM settings of the config's method section."""
    method = config.method
    return SolverSettings(kappa=method.kappa, max_iterations=method.max_iterations,
                          gradient_tolerance=method.gradient_tolerance,
                          step_tolerance=method.step_tolerance)


def calibrate(config: Config, grids: Sequence[GridData], *, estimate_parameters: bool = True,
              progress: Callable[[IterationRecord], None] | None = None) -> EstimationResult:
    """Estimate the config's free parameters and the states from recordings on the grid.

    With ``estimate_parameters=False`` only the states (cross-validation, §4.5).
    """
    problem = estimation_problem(config, grids, estimate_parameters=estimate_parameters)
    return estimate(problem, solver_settings(config), progress=progress)


def open_loop_checks(config: Config, grids: Sequence[GridData], result: EstimationResult,
                     first_s: float = 1.0) -> tuple[OpenLoopCheck, ...]:
    """Each recording replayed open loop with the result's parameters.

    From each recording's estimated initial state (validation: does the model reproduce the
    recording by itself?).
    """
    rig = get_rig(config.rig, config.friction, config.drift_correction)
    return tuple(
        open_loop_check(rig, result.parameters, grid, BodyStates(
            estimate.position[0], estimate.orientation[0], estimate.linear_velocity[0],
            estimate.angular_velocity[0]), first_s)
        for grid, estimate in zip(grids, result.recordings, strict=True))


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
        rig=get_rig(config.rig, config.friction, config.drift_correction),
        parameters=config.parameters,
        free=free,
        lower={name: config.free[name].lower for name in free},
        upper={name: config.free[name].upper for name in free},
        recordings=tuple(grids),
    )


def method_summary(config: Config) -> dict:
    """The method settings as written into parameters.yaml."""
    return asdict(config.method)


@dataclass(frozen=True)
class SweepPoint:
    """One fit of a method-parameter sweep: step h [s], κ, hinge compliance and the result."""

    dt: float
    kappa: float
    compliance: float | None  # None: the config's own hinge compliances
    result: EstimationResult


def sweep(config: Config, recordings: Sequence[Recording], *, dts: Sequence[float],
          kappas: Sequence[float], compliances: Sequence[float | None],
          start_s: float | None = None, end_s: float | None = None,
          progress: Callable[[SweepPoint], None] | None = None) -> tuple[SweepPoint, ...]:
    """Fit the config's free parameters at every (h, κ, compliance) of the grid (paper §4.7).

    Every fit starts from the config's values, so the points differ only in the method
    parameter. The recordings are put on each step's grid once; a new h compiles anew, κ and
    the compliance do not.
    """
    points = []
    for dt in dts:
        on_grid = apply_overrides(config, dt=dt)
        grids = prepare(on_grid, recordings, start_s=start_s, end_s=end_s)
        for compliance, kappa in itertools.product(compliances, kappas):
            point_config = apply_overrides(on_grid, kappa=kappa, compliance=compliance)
            point = SweepPoint(dt, kappa, compliance, calibrate(point_config, grids))
            points.append(point)
            if progress is not None:
                progress(point)
    return tuple(points)
