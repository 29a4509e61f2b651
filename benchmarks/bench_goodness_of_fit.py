"""Could the fit quality choose the simulation refinement? Issue 14, seventh session.

Per case: the consistent path's default fit, then the same parameters run through the config's
simulator with only the 1 s segments' start states fitted (the parameters boxed at their
values): its cost per scored angle over the noise variance, χ²_c / σ². Also the noise variance
estimated from the data (third differences) and from the fit's own angle residuals. Data and
fit configurations as in bench_consistent.py::

    taskset -c 1 python benchmarks/bench_goodness_of_fit.py paper|rigid release,multisine,swingup

The refinement's own χ²_r / σ² is a column of ``bench_consistent.py recovery --estimators
simulation``. Results: benchmarks/RESULTS.md, issue 14, seventh session.
"""

from __future__ import annotations

import dataclasses
import sys
import time

import bench_consistent as bc
import numpy as np

from mb_estimation.estimation.shooting import refine_by_simulation
from mb_estimation.pipeline import calibrate_recordings, estimation_problem, simulation_refinement


def third_difference_variance(angles) -> float:
    """The white noise variance [rad²] of multi-turn angles ``[n, j]``: var(Δ³y) = 20 σ²."""
    third = np.diff(np.asarray(angles), n=3, axis=0)
    return float(np.mean(third ** 2) / 20.0)


def residual_variance(calibration) -> float:
    """The mean squared measured minus estimated angle over observed samples [rad²]."""
    parts = []
    for grid, estimate in zip(calibration.grids, calibration.result.recordings, strict=True):
        observed = np.asarray(grid.observed, dtype=bool)
        parts.append(grid.measured_angles[observed] - np.asarray(estimate.joint_angles)[observed])
    return float(np.mean(np.concatenate(parts) ** 2))


def states_only_cost(config, calibration) -> tuple[float, int]:
    """The fit's parameters through the config's simulator, 1 s segments' starts fitted only.

    Returns the cost per scored angle [rad²] and the iterations.
    """
    result = calibration.result
    simulation = simulation_refinement(config)
    problem = estimation_problem(config, calibration.grids)
    values = {name: float(np.ravel(result.parameters[name])[0]) for name in bc.FREE}
    settings = dataclasses.replace(simulation.settings, longest_segment_s=1.0)
    check = refine_by_simulation(problem.rig, result.parameters, bc.FREE, values, values,
                                 problem.recordings,
                                 [(r.joint_angles, r.joint_rates) for r in result.recordings],
                                 simulation.simulation_dt, settings)
    return check.cost, check.iterations


def main() -> None:
    """One Markdown row per scenario and pendulum length."""
    data, scenarios = sys.argv[1], sys.argv[2].split(",")
    print("| data | scenario | l2 [m] | J_Azz | J_Byy | b1 | b2 | ok | noise var: Δ³, fit "
          "[rad²] | χ²_c/σ² (true σ, Δ³ σ) | iterations | fit + check [s] |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for scenario in scenarios:
        for l2 in (0.92, 0.092):
            recording = bc.recording(data, scenario, l2)
            config = bc.fit_config(data, l2, estimator="consistent")
            started = time.perf_counter()
            calibration = calibrate_recordings(config, [recording])
            fitted = time.perf_counter() - started
            cost, iterations = states_only_cost(config, calibration)
            checked = time.perf_counter() - started - fitted
            noise = third_difference_variance(np.unwrap(recording.joint_angles, axis=0))
            result = calibration.result
            outcome = bc.Fit({n: float(np.ravel(result.parameters[n])[0]) for n in bc.FREE},
                             {n: float(np.ravel(result.std[n])[0]) for n in bc.FREE},
                             dict(result.excited), result.iterations, result.status, 0.0, 0.0,
                             None, result.refinement)
            cells, ok = bc.errors(outcome, bc.truth_of(l2))
            print(f"| {data} | {scenario} | {l2} | {cells} | {'yes' if ok else 'no'} | "
                  f"{noise:.4g}, {residual_variance(calibration):.4g} | "
                  f"{cost / bc.NOISE_RAD ** 2:.4f}, {cost / noise:.4f} | {iterations} | "
                  f"{fitted:.1f} + {checked:.1f} |", flush=True)


if __name__ == "__main__":
    main()
