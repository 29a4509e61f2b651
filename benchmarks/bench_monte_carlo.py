"""Monte Carlo check of the 13-parameter swing-up fit (issue 3, DM2).

Recovery, excitation flags, and the linearised standard deviations (§3.7) against the spread
over noise seeds.

Run::

    python benchmarks/bench_monte_carlo.py [--seeds 20] [--data model|paper] [--json FILE]

``--data model`` (default): the swing-up is simulated with the estimation model itself
(``config/furuta_synthetic.yaml`` with every compliance 1e-4, SPOOK step = grid step h = 0.01,
samples at 100 Hz), so the truth is the noise-free minimum and any bias is the estimator's.
``--data paper``: simulated as in §4.7 (the config as written, ε = 1e-6, step 1e-4, 1 kHz) and
fitted with compliance 1e-4 at h = 0.01, so the fit also absorbs the discretisation and
compliance mismatch (shadow parameters, §4.9). Each seed adds fresh 0.001 rad noise to the
same noise-free trajectory; the fit starts from ``config/furuta.yaml``'s values (Table 1) with
its 11 free parameters (13 tangent dimensions).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from mb_estimation import lie
from mb_estimation.config import apply_overrides, builtin_config_path, load_config
from mb_estimation.estimation import SolverSettings, estimate
from mb_estimation.estimation.covariance import gravity_frame
from mb_estimation.pipeline import estimation_problem, starting_from
from mb_estimation.rigs import get_rig
from mb_estimation.signals import Recording, prepare_recording
from mb_estimation.simulation import simulate_recording

GRID_STEP = 0.01  # h [s]
DURATION_S = 10.0
NOISE_RAD = 1e-3
COMPLIANCE = 1e-4
SETTINGS = SolverSettings(kappa=100.0, max_iterations=60, gradient_tolerance=1e-2,
                          step_tolerance=1e-9)


def configs(data: str):
    """The truth config and the fit config (Table 1 initial values, compliance 1e-4)."""
    truth = load_config(builtin_config_path("furuta_synthetic"))
    if data == "model":
        truth = apply_overrides(truth, compliance=COMPLIANCE)
    initial = load_config(builtin_config_path("furuta"))
    fit = apply_overrides(starting_from(truth, initial), compliance=COMPLIANCE)
    return truth, fit


def noise_free_recording(truth, data: str):
    """Time [s], noise-free joint angles [rad] and inputs [V] of the simulated swing-up."""
    step, rate = (GRID_STEP, 1.0 / GRID_STEP) if data == "model" else (1e-4, 1000.0)
    sim = simulate_recording(get_rig("furuta"), truth.parameters, "swingup",
                             duration_s=DURATION_S, dt=step, rate_hz=rate)
    return sim.time_s, sim.measured_angles, sim.inputs


def _tilt_row(name: str, truth, runs, seeds: int) -> dict:
    """The tilt's error about the two horizontal axes of the gravity frame, against its std."""
    target = np.asarray(truth.parameters[name], dtype=float)
    frame = gravity_frame(np.asarray(lie.quat_rotate(target, np.array([0.0, -1.0, 0.0]))))
    errors = np.array([frame.T @ np.asarray(lie.boxminus(np.asarray(r.parameters[name]), target))
                       for r in runs])[:, [0, 2]]  # [rad], about the horizontal axes
    stds = np.array([np.asarray(r.std[name])[[0, 2]] for r in runs])
    spread, mean_std = np.std(errors, axis=0, ddof=1), np.mean(stds, axis=0)
    excited = sum(bool(r.excited[name]) for r in runs)
    print(f"{name} about the horizontal axes [rad]: mean error {np.mean(errors, axis=0)}, "
          f"spread {spread}, mean std {mean_std}, std/spread {mean_std / spread}; excited "
          f"{excited}/{seeds} (the std about gravity is inf: unobservable)")
    return {"mean_error_rad": np.mean(errors, axis=0).tolist(), "spread": spread.tolist(),
            "mean_std": mean_std.tolist(), "excited_runs": excited}


def main() -> None:
    """Fit every seed, then tabulate truth, mean, spread and mean reported std."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--data", choices=("model", "paper"), default="model")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()

    truth, fit = configs(args.data)
    time_s, clean_angles, inputs = noise_free_recording(truth, args.data)
    names = fit.free_names
    runs = []
    for seed in range(args.seeds):
        noisy = clean_angles + np.random.default_rng(seed).normal(0.0, NOISE_RAD,
                                                                  clean_angles.shape)
        grid = prepare_recording(Recording(f"seed {seed}", time_s, noisy, time_s, inputs),
                                 GRID_STEP, fit.method.filter_cutoff_hz)
        problem = estimation_problem(fit, (grid,))
        started = time.perf_counter()
        result = estimate(problem, SETTINGS)
        runs.append(result)
        print(f"seed {seed:2d}: {result.status:14s} {result.iterations:2d} iterations, "
              f"cost {result.cost:.4e}, {time.perf_counter() - started:5.1f} s", flush=True)

    report = {"data": args.data, "seeds": args.seeds,
              "converged": sum(r.converged for r in runs), "parameters": {}}
    print(f"\n{report['converged']}/{args.seeds} converged. Scalar parameters:")
    print(f"{'name':6s} {'truth':>10s} {'mean':>11s} {'spread':>10s} {'mean std':>10s} "
          f"{'std/spread':>10s} {'(mean-truth)/spread':>20s} excited")
    for name in names:
        if fit.rig_spec.parameter(name).kind == "quaternion":
            report["parameters"][name] = _tilt_row(name, truth, runs, args.seeds)
            continue
        values = np.array([float(np.ravel(r.parameters[name])[0]) for r in runs])
        stds = np.array([float(r.std[name][0]) for r in runs])
        excited = sum(bool(r.excited[name]) for r in runs)
        spread = float(np.std(values, ddof=1))
        target = float(np.ravel(truth.parameters[name])[0])
        ratio = float(np.mean(stds) / spread) if spread > 0 else float("nan")
        bias = (float(np.mean(values)) - target) / spread if spread > 0 else float("nan")
        report["parameters"][name] = {
            "truth": target, "mean": float(np.mean(values)), "spread": spread,
            "mean_std": float(np.mean(stds)), "std_over_spread": ratio,
            "bias_over_spread": bias, "excited_runs": excited}
        print(f"{name:6s} {target:10.4g} {np.mean(values):11.5g} {spread:10.3g} "
              f"{np.mean(stds):10.3g} {ratio:10.2f} {bias:20.2f} {excited}/{args.seeds}")
    if args.json:
        with open(args.json, "w") as stream:
            json.dump(report, stream, indent=2)


if __name__ == "__main__":
    main()
