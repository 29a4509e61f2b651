"""Cross-validation across synthetic scenarios (issue 3, DM3).

Run::

    python benchmarks/bench_crossval.py [--json FILE]

Four 10 s recordings (release, swing-up, pulse, multisine) are simulated with the estimation
model itself: ``config/furuta_synthetic.yaml`` with every compliance 1e-4, SPOOK step = grid
step h = 0.01, samples at 100 Hz, angle noise 0.001 rad (seed 0). On each recording the 13
parameter dimensions of ``config/furuta.yaml`` are fitted from its initial values (Table 1);
then every fitted parameter set scores each of the other recordings by state-only estimation
(χ = ∅, §4.5): the CV score is that fit's cost (MSE per step). The same scores are computed for
the initial values and for the truth. As in §4.6, a fit on the release (no input) leaves the
motor gain K where it started; it is scored with K set to the simulated value.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from bench_monte_carlo import configs  # truth and fit configs, the "model" data

from mb_estimation import pipeline
from mb_estimation.config import apply_overrides
from mb_estimation.rigs import get_rig
from mb_estimation.signals import Recording
from mb_estimation.simulation import simulate_recording

SCENARIOS = ("release", "swingup", "pulse", "multisine")
GRID_STEP = 0.01  # h [s]
DURATION_S = 10.0
NOISE_RAD = 1e-3


def recording(truth, scenario: str):
    """The scenario simulated with the truth, on the estimation grid."""
    sim = simulate_recording(get_rig("furuta"), truth.parameters, scenario,
                             duration_s=DURATION_S, dt=GRID_STEP, rate_hz=1.0 / GRID_STEP,
                             noise_rad=NOISE_RAD, seed=0)
    raw = Recording(scenario, sim.time_s, sim.measured_angles, sim.time_s, sim.inputs)
    return pipeline.prepare(truth, [raw])[0]


def score(config, values, grid) -> float:
    """State-only estimation of ``grid`` with the parameters ``values``: its cost (MSE)."""
    fixed = apply_overrides(config, set_values=values)
    return pipeline.calibrate(fixed, [grid], estimate_parameters=False).cost


def main() -> None:
    """Fit on each scenario, score on the others; print (and save) the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    truth, fit = configs("model")
    started = time.perf_counter()
    grids = {name: recording(truth, name) for name in SCENARIOS}
    initial = {name: fit.parameters[name] for name in fit.free}
    true_values = {name: truth.parameters[name] for name in fit.free}

    fitted, fit_cost, converged = {}, {}, {}
    for name, grid in grids.items():
        result = pipeline.calibrate(fit, [grid])
        values = {p: result.parameters[p].tolist() for p in fit.free}
        if not result.excited["K"]:
            values["K"] = truth.parameters["K"]
        fitted[name], fit_cost[name], converged[name] = values, result.cost, result.converged
        print(f"fit on {name:9s}: cost {result.cost:.3e}, {result.iterations} iterations, "
              f"{result.message.split(';')[0]}", flush=True)

    rows = {}
    for name, values in [*fitted.items(), ("initial (Table 1)", initial),
                         ("truth", true_values)]:
        rows[name] = {other: score(fit, values, grids[other])
                      for other in SCENARIOS if other != name}
        print(f"{name:>18}: " + "  ".join(f"{other} {cost:.3e}"
                                          for other, cost in rows[name].items()), flush=True)

    print(f"\n{'fitted on':>18} {'fit cost':>10} {'mean CV':>10} {'CV / fit':>9} "
          f"{'initial CV / CV':>16}")
    summary = {}
    for name in SCENARIOS:
        mean_cv = float(np.mean(list(rows[name].values())))
        mean_initial = float(np.mean([rows["initial (Table 1)"][o] for o in rows[name]]))
        summary[name] = {"fit_cost": fit_cost[name], "converged": converged[name],
                         "mean_cv": mean_cv, "cv_over_fit": mean_cv / fit_cost[name],
                         "initial_cv_over_cv": mean_initial / mean_cv}
        print(f"{name:>18} {fit_cost[name]:10.3e} {mean_cv:10.3e} "
              f"{mean_cv / fit_cost[name]:9.2f} {mean_initial / mean_cv:16.3g}")
    print(f"total {time.perf_counter() - started:.0f} s")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"scores": rows, "summary": summary, "fitted": fitted}, handle, indent=2)


if __name__ == "__main__":
    main()
