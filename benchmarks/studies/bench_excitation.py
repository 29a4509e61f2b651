"""The designed experiment realised: the design against the multisine, over noise seeds.

    python benchmarks/studies/bench_excitation.py --rig synthetic|peer [--seeds 10]
        [--first-seed 0] [--evaluations N] [--work DIR] [--json FILE] [--linear DRAWS]

For the rig (``synthetic``: §4.7's ``furuta_synthetic.yaml`` on rigid hinges, bound 0.4;
``peer``: the shipped ODrive example config, bound 2 command units, the arm within ±π), J_Azz,
J_Byy, b1, b2 free, 8 s from rest: ``design_excitation`` designs the input (as ``mb-estimation
excite`` does), and both it and the plain multisine at the same bound (the ``multisine``
scenario's tones, within the same limits) drive the **independent rigid reference model**
(test/reference_furuta.py, RK4 at 1e-4 s), sampled at 1 kHz with 1e-3 rad of angle noise, one
recording per noise seed. Each is calibrated through the default path (``api.calibrate``, the
config's values ×1.5 as the start). Printed per input: the mean over seeds of the worst
reported relative std and of the worst relative error, each parameter's mean reported std,
and the ratios design / multisine (benchmarks/RESULTS.md quotes them).

``--linear DRAWS`` calibrates nothing: it predicts each seed's errors as the linearised fit
(model right, start state fitted) would make them, ``(WᵀW)⁻¹Wᵀe`` with ``W`` the package's
rigid model's sensitivities (the Cramér–Rao bound's forward sensitivities, at
0.25 ms) and ``e`` the seed's noise, for seeds 0 … DRAWS − 1: the seeds' z per parameter (to
set beside the calibrations'), the worst relative error's mean over all draws and the ratios
design / multisine of means over ``--seeds`` consecutive seeds (how far one batch of seeds
strays from the expectation).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "test"))
FREE = ("J_Azz", "J_Byy", "b1", "b2")
DURATION_S = 8.0
RATE_HZ = 1000.0
NOISE_RAD = 1e-3
START_FACTOR = 1.5
RIGS = {  # config, input bound, arm limit [rad]
    "synthetic": ("furuta_synthetic", 0.4, None),
    "peer": (str(REPO / "config" / "examples" / "odrive_furuta.yaml"), 2.0, np.pi),
}


def _config(rig: str):
    from mb_estimation.config import apply_overrides, load_config

    path, _, _ = RIGS[rig]
    return apply_overrides(load_config(path), hinges="rigid", free=FREE)


def designed_inputs(rig: str, evaluations: int | None) -> dict:
    """``{"design": inputs, "multisine": inputs}`` at 1 kHz, and the design's prediction."""
    from mb_estimation.excitation import MAX_EVALUATIONS, Limits, design_excitation
    from mb_estimation.report.excitation import multisine_input
    from mb_estimation.setup import rig_of

    config = _config(rig)
    _, bound, arm = RIGS[rig]
    started = time.perf_counter()
    design = design_excitation(rig_of(config), config.parameters, FREE, duration_s=DURATION_S,
                               rate_hz=RATE_HZ, limits=Limits(bound, max_arm_rad=arm),
                               start=np.zeros(4), noise_rad=NOISE_RAD,
                               max_evaluations=evaluations or MAX_EVALUATIONS)
    elapsed = time.perf_counter() - started
    plain = multisine_input(design)
    predicted = {label: {"worst_relative_std": response.worst_relative_std,
                         "relative_std": response.relative_std}
                 for label, response in (("design", design.design),
                                         ("multisine", design.multisine))}
    return {"time_s": design.time_s, "design": design.inputs, "multisine": plain,
            "predicted": predicted, "design_s": elapsed}


def reference_bag(config, folder: Path, time_s, inputs, seed: int) -> Path:
    """The reference model driven by ``inputs``, noise of ``seed``, as a bag of the config."""
    from reference_furuta import simulate_reference

    from mb_estimation.io.bags import write_rig_bag

    values = {name: (list(np.ravel(v)) if name == "tilt" else float(np.ravel(v)[0]))
              for name, v in config.parameters.items()}
    run = simulate_reference(values, (0.0, 0.0), (0.0, 0.0), time_s,
                             voltage=(time_s, inputs), method="rk4", step=1e-4)
    angles = run["theta"] + NOISE_RAD * np.random.default_rng(seed).standard_normal(
        run["theta"].shape)
    recording = config.recording
    mappings = [recording.joints[joint] for joint in config.rig_spec.joints]
    positions = np.stack([m.to_recorded(angles[:, i]) for i, m in enumerate(mappings)], 1)
    stamps = 1_700_000_000 * 10**9 + np.round(time_s * 1e9).astype(np.int64)
    return write_rig_bag(folder / f"seed{seed}", joint_time_ns=stamps,
                         joint_names=[m.name for m in mappings], joint_positions=positions,
                         joint_states_topic=recording.joint_states_topic,
                         voltage_time_ns=stamps, voltage=inputs,
                         voltage_topic=recording.voltage_topic,
                         voltage_type=recording.voltage_type,
                         voltage_index=recording.voltage_index, overwrite=True)


def calibrated(config, bag: Path, output: Path) -> dict:
    """Value, std and verdict of one calibration through the default path."""
    from mb_estimation.api import calibrate
    from mb_estimation.config import apply_overrides

    start = {name: START_FACTOR * float(np.ravel(config.parameters[name])[0]) for name in FREE}
    run = calibrate(apply_overrides(config, set_values=start), [bag], output)
    parameters, std = run.result.parameters, run.result.std
    return {"value": {n: float(np.ravel(parameters[n])[0]) for n in FREE},
            "std": {n: float(np.ravel(std[n])[0]) for n in FREE},
            "trustworthy": bool(run.verdict.trustworthy)}


LINEAR_DT = 2.5e-4


def linear_errors(rig: str, time_s, inputs, draws: int) -> tuple[np.ndarray, np.ndarray]:
    """Each seed's parameter errors ``[draws, p]`` under the linearised fit, and the std ``[p]``.

    From rest at the config's values, ``inputs`` at 1 kHz; the start state's four components
    fitted too (eliminated).
    """
    from mb_estimation.setup import rig_of
    from mb_estimation.signals import Recording, prepare_recording
    from mb_estimation.validation import recording_sensitivities

    config = _config(rig)
    values = dict(config.parameters)
    inputs = np.asarray(inputs).reshape(len(time_s), -1)
    grid = prepare_recording(Recording("input", time_s, np.zeros((len(time_s), 2)), time_s,
                                       inputs), 1.0 / RATE_HZ, 100.0)
    sensitivity = recording_sensitivities(rig_of(config), values, FREE, grid, np.zeros(4),
                                          LINEAR_DT)
    samples = sensitivity.shape[0]
    sensitivity = sensitivity.reshape(-1, sensitivity.shape[-1])
    information = sensitivity.T @ sensitivity
    std = NOISE_RAD * np.sqrt(np.diag(np.linalg.inv(information)))[:len(FREE)]
    errors = np.stack([np.linalg.solve(information, sensitivity.T @ (
        NOISE_RAD * np.random.default_rng(seed).standard_normal((samples, 2)).ravel())
    )[:len(FREE)] for seed in range(draws)])
    return errors, std


def linear_study(rig: str, inputs: dict, draws: int, batch: int) -> dict:
    """:func:`linear_errors` for both inputs: z per seed, worst relative errors, batch ratios."""
    truth = np.array([float(np.ravel(_config(rig).parameters[n])[0]) for n in FREE])
    out = {}
    for label in ("design", "multisine"):
        errors, std = linear_errors(rig, inputs["time_s"], inputs[label], draws)
        out[label] = {"z": (errors / std).tolist(),
                      "z_std": dict(zip(FREE, (errors / std).std(axis=0).tolist(), strict=True)),
                      "worst_relative_error": np.max(np.abs(errors) / truth, axis=1).tolist()}
    design, plain = (np.array(out[label]["worst_relative_error"])
                     for label in ("design", "multisine"))
    ratios = np.array([design[i:i + batch].mean() / plain[i:i + batch].mean()
                       for i in range(0, draws - batch + 1, batch)])
    out["ratios"] = {"all_draws": float(design.mean() / plain.mean()),
                     "batches": ratios.tolist(),
                     "batches_at_most_0.7": float(np.mean(ratios <= 0.7)),
                     "batches_5_50_95_percent": np.percentile(ratios, [5, 50, 95]).tolist()}
    return out


def summary(rig: str, runs: dict) -> dict:
    """Means over seeds per input, and the ratios design / multisine."""
    truth = {n: float(np.ravel(_config(rig).parameters[n])[0]) for n in FREE}
    out = {}
    for label, seeds in runs.items():
        relative_std = np.array([[r["std"][n] / abs(r["value"][n]) for n in FREE] for r in seeds])
        error = np.array([[abs(r["value"][n] / truth[n] - 1) for n in FREE] for r in seeds])
        out[label] = {
            "worst_relative_std": float(np.mean(relative_std.max(axis=1))),
            "worst_relative_error": float(np.mean(error.max(axis=1))),
            "std": {n: float(np.mean([r["std"][n] for r in seeds])) for n in FREE},
            "relative_error": {n: float(np.mean(error[:, i])) for i, n in enumerate(FREE)},
            "trustworthy": sum(r["trustworthy"] for r in seeds)}
    design, plain = out["design"], out["multisine"]
    out["ratios"] = {
        "worst_relative_std": design["worst_relative_std"] / plain["worst_relative_std"],
        "worst_relative_error": design["worst_relative_error"] / plain["worst_relative_error"],
        "std": {n: design["std"][n] / plain["std"][n] for n in FREE}}
    return out


def main() -> None:
    """Design, realise over the seeds, calibrate, print (and write) the summary."""
    from mb_estimation.numerics import configure_jax

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rig", choices=sorted(RIGS), required=True)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=0,
                        help="the noise seeds are FIRST-SEED, FIRST-SEED + 1, ... (default 0)")
    parser.add_argument("--evaluations", type=int, default=None,
                        help="the search's evaluations (default: excite's)")
    parser.add_argument("--work", type=Path)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--linear", type=int, metavar="DRAWS",
                        help="predict the linearised fit's errors over this many seeds instead")
    args = parser.parse_args()
    configure_jax()
    work = args.work or Path(tempfile.mkdtemp(prefix=f"excitation_{args.rig}_"))
    config = _config(args.rig)
    inputs = designed_inputs(args.rig, args.evaluations)
    print(f"{args.rig}: designed in {inputs['design_s']:.1f} s; predicted worst relative std "
          f"design {inputs['predicted']['design']['worst_relative_std']:.4g}, multisine "
          f"{inputs['predicted']['multisine']['worst_relative_std']:.4g}", flush=True)
    if args.linear:
        study = linear_study(args.rig, inputs, args.linear, args.seeds)
        for label in ("design", "multisine"):
            z = np.array(study[label]["z"])
            print(f"{label}: z std over {args.linear} seeds "
                  f"{ {n: round(v, 3) for n, v in study[label]['z_std'].items()} }; "
                  f"seeds {args.first_seed}-{args.first_seed + args.seeds - 1}, b2's z: "
                  f"{np.round(z[args.first_seed:args.first_seed + args.seeds, -1], 2).tolist()}")
        ratios = study["ratios"]
        print(f"worst relative error, design / multisine: {ratios['all_draws']:.3f} over all "
              f"draws; over {args.seeds} seeds at a time, 5/50/95 % "
              f"{np.round(ratios['batches_5_50_95_percent'], 3).tolist()}, at most 0.7 in "
              f"{100 * ratios['batches_at_most_0.7']:.0f} %")
        if args.json:
            args.json.write_text(json.dumps({"rig": args.rig, "linear": study}))
        return
    runs = {"design": [], "multisine": []}
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        for label in runs:
            folder = work / label
            bag = reference_bag(config, folder, inputs["time_s"], inputs[label], seed)
            run = calibrated(config, bag, folder / f"out{seed}")
            runs[label].append(run)
            worst = max(run["std"][n] / abs(run["value"][n]) for n in FREE)
            print(f"  seed {seed} {label}: worst relative std {worst:.4g}, "
                  f"{'TRUSTWORTHY' if run['trustworthy'] else 'not trusted'}", flush=True)
        result = {"rig": args.rig, "predicted": inputs["predicted"], "runs": runs,
                  "summary": summary(args.rig, runs)}
        if args.json:  # after every seed: a long run interrupted keeps what it measured
            args.json.write_text(json.dumps(result, indent=1))
    print(json.dumps(result["summary"], indent=1))


if __name__ == "__main__":
    main()
