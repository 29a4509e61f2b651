"""The paper's synthetic study (§4.7, issue 3 DM1): J_Azz, J_Byy, b1, b2 from Table 1 values.

Run::

    python benchmarks/bench_synthetic_study.py [--scenarios release,multisine,swingup]
        [--steps 0.01,0.001] [--data paper|model] [--drift-correction]
        [--fit-compliance EPS] [--json FILE]

``--data paper`` (default): 10 s simulated with ``config/furuta_synthetic.yaml`` as written
(ε = 1e-6, τ = 0.02 s) at step 1e-4, sampled at 1 kHz with 0.001 rad noise (seed 0), then fitted
like ``mb-estimation calibrate --config config/furuta_synthetic.yaml --free J_Azz,J_Byy,b1,b2
--set J_Azz=0.01,J_Byy=0.01,b1=1e-4,b2=1e-4 --compliance 1e-4 --kappa 100 --dt H``.
``--data model``: the same but simulated with compliance 1e-4 at the fit's own step h (samples
at 1/h), so that only the noise separates the data from the estimation model.
``--drift-correction``: simulate and fit with drift-corrected holonomic rows
(``drift_correction: true``) instead of the paper's (2.8). ``--fit-compliance``: every compliance
of the fit (default 1e-4, DM1's ``--compliance 1e-4``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json

import numpy as np

from mb_estimation.config import apply_overrides, builtin_config_path, load_config
from mb_estimation.estimation import SolverSettings, estimate
from mb_estimation.pipeline import estimation_problem
from mb_estimation.rigs import get_rig
from mb_estimation.signals import Recording, prepare_recording
from mb_estimation.simulation import simulate_recording

FREE = ("J_Azz", "J_Byy", "b1", "b2")
START = {"J_Azz": 0.01, "J_Byy": 0.01, "b1": 1e-4, "b2": 1e-4}
SETTINGS = SolverSettings(kappa=100.0, max_iterations=60, gradient_tolerance=1e-2,
                          step_tolerance=1e-9)


def fit_one(scenario: str, step: float, data: str, drift_correction: bool = False,
            fit_compliance: float = 1e-4) -> dict:
    """Simulate ``scenario``, fit at grid step ``step`` [s]; estimates and relative errors."""
    truth = dataclasses.replace(load_config(builtin_config_path("furuta_synthetic")),
                                drift_correction=drift_correction)
    if data == "model":
        truth = apply_overrides(truth, compliance=1e-4)
        sim_step, rate = step, 1.0 / step
    else:
        sim_step, rate = 1e-4, 1000.0
    sim = simulate_recording(get_rig("furuta", None, drift_correction), truth.parameters,
                             scenario, duration_s=10.0, dt=sim_step, rate_hz=rate,
                             noise_rad=1e-3, seed=0)
    fit = apply_overrides(truth, free=list(FREE), set_values=START, compliance=fit_compliance)
    grid = prepare_recording(Recording(scenario, sim.time_s, sim.measured_angles, sim.time_s,
                                       sim.inputs), step, fit.method.filter_cutoff_hz)
    result = estimate(estimation_problem(fit, (grid,)), SETTINGS)
    row = {"scenario": scenario, "h": step, "data": data, "status": result.status,
           "iterations": result.iterations, "cost": result.cost,
           "observation_mse": result.observation_mse, "impulse_mse": result.impulse_mse,
           "solve_s": result.solve_time_s, "compile_s": result.compile_time_s}
    for name in FREE:
        value = float(np.ravel(result.parameters[name])[0])
        target = float(truth.parameters[name])
        row[name] = value
        row[f"{name}_std"] = float(result.std[name][0])
        row[f"{name}_error"] = value / target - 1.0
    return row


def main() -> None:
    """Fit every scenario at every step and print one table row per fit."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", default="release,multisine,swingup")
    parser.add_argument("--steps", default="0.01,0.001")
    parser.add_argument("--data", choices=("paper", "model"), default="paper")
    parser.add_argument("--drift-correction", action="store_true")
    parser.add_argument("--fit-compliance", type=float, default=1e-4)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    rows = []
    print("| scenario | h [s] | status, iterations | cost (obs / impulse) | "
          + " | ".join(f"{n} (error)" for n in FREE) + " |")
    print("|---|---|---|---|" + "---|" * len(FREE))
    for scenario in args.scenarios.split(","):
        for step in (float(s) for s in args.steps.split(",")):
            row = fit_one(scenario, step, args.data, args.drift_correction,
                          args.fit_compliance)
            rows.append(row)
            cells = " | ".join(
                f"{row[n]:.4g} ± {row[n + '_std']:.2g} ({100 * row[n + '_error']:+.0f} %)"
                for n in FREE)
            print(f"| {scenario} | {step:g} | {row['status']}, {row['iterations']} | "
                  f"{row['cost']:.3g} ({row['observation_mse']:.2g} / {row['impulse_mse']:.2g}) | "
                  f"{cells} |", flush=True)
    if args.json:
        with open(args.json, "w") as stream:
            json.dump(rows, stream, indent=2)


if __name__ == "__main__":
    main()
