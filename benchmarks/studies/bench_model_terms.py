"""Driver and sensor terms: recovered from simulated recordings, and chosen by the data.

    python benchmarks/studies/bench_model_terms.py simulated [--seeds 1,2,3]
        [--scenario multisine|pulse] [--data-step S] [--json FILE]
    python benchmarks/studies/bench_model_terms.py compare-simulated [--duration S]
        [--simulation-refinement off] [--json FILE]
    python benchmarks/studies/bench_model_terms.py compare-real [--data DIR] [--files 2V,4V]
        [--json FILE]

``simulated``: the example ODrive rig (config/examples/odrive_furuta.yaml) with every term on —
the pendulum encoder's zero at 0.03 rad, Coulomb friction on both hinges (4e-3 and 2e-5 N m), an
8/rev torque ripple on the arm (4e-3 cos, -3e-3 sin N m) — simulated by the package's rigid
simulator (default multisine, 10 s, 1 kHz, angle noise 1e-3 rad, one recording per seed;
stepped at the config's ``simulation.dt``, 2.5e-4 s, unless ``--data-step``) and
calibrated with the config's free parameters and the five terms' parameters free; prints each
value, its std and how many std it lies from the truth.

``compare-simulated``: the same rig, two recordings (multisine seed 1, pulse seed 2, 10 s each
unless --duration); ``compare-models`` over offsets, dry, ripple from the config's values with
the terms at 0 (``--simulation-refinement off``: the joint fit alone); prints the table and the
choice.

``compare-real``: ``compare-models`` over offsets, dry, ripple on the peer rig's step responses
(PlotJuggler CSV, default 2V ... 6V) with the example config (its ripple: 8 periods per revolution).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

from mb_estimation.api import calibrate, compare_models, write_simulated_bag
from mb_estimation.config import apply_overrides, load_config

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "config" / "examples" / "odrive_furuta.yaml"
TRUTH = {"encoder_offset2": 0.03, "coulomb1": 4e-3, "coulomb2": 2e-5, "ripple_cos1": 4e-3,
         "ripple_sin1": -3e-3}


def _truth_config():
    return apply_overrides(load_config(CONFIG), set_values=TRUTH)


def simulated(seeds, work: Path, scenario: str = "multisine",
              data_step_s: float | None = None) -> list[dict]:
    """Calibrate one simulated recording per seed with every term free; value, std, z."""
    truth = _truth_config()
    free = [*truth.free_names, *TRUTH]
    rows = []
    for seed in seeds:
        bag = work / f"{scenario}{seed}"
        write_simulated_bag(truth, scenario, bag, duration_s=10.0, noise_rad=1e-3, seed=seed,
                            dt=data_step_s, overwrite=True)
        run = calibrate(apply_overrides(truth, free=free), [bag], work / f"fit{seed}")
        for stage in run.stages:
            print(f"{scenario} {seed} stage: {stage.label}, segments {stage.segment_s} s "
                  f"(tried {stage.segments_tried})", flush=True)
        for name in free:
            value = float(np.ravel(run.result.parameters[name])[0])
            std = float(np.ravel(run.result.std[name])[0])
            true = float(truth.parameters[name])
            rows.append({"scenario": scenario, "seed": seed, "name": name, "value": value,
                         "std": std, "truth": true, "z": (value - true) / std})
            print(f"{scenario} {seed} {name:16s} {value:+.6g} ± {std:.2g} (truth {true:+.6g}, "
                  f"{(value - true) / std:+.2f} std)", flush=True)
    return rows


def _print_comparison(comparison) -> dict:
    print("terms | mean | " + " | ".join(comparison.recordings))
    for candidate in comparison.candidates:
        print(f"{candidate.label} | {candidate.mean_score:.3e} | "
              + " | ".join(f"{score:.3e}" for score in candidate.scores))
    print(f"chosen: {comparison.choice.candidate.label} ({comparison.choice.reason})")
    return {"recordings": list(comparison.recordings),
            "candidates": [{"terms": list(c.terms), "scores": c.scores.tolist(),
                            "rms": c.prediction_rms_rad.tolist()} for c in comparison.candidates],
            "chosen": list(comparison.choice.candidate.terms),
            "reason": comparison.choice.reason}


def compare_simulated(work: Path, duration_s: float, refinement: str | None) -> dict:
    """compare-models on two simulated recordings of the rig with every term on."""
    truth = _truth_config()
    bags = []
    for scenario, seed in (("multisine", 1), ("pulse", 2)):
        bags.append(work / scenario)
        write_simulated_bag(truth, scenario, bags[-1], duration_s=duration_s, noise_rad=1e-3,
                            seed=seed, overwrite=True)
    nominal = apply_overrides(truth, set_values=dict.fromkeys(TRUTH, 0.0),
                              simulation_refinement=refinement)
    return _print_comparison(compare_models(nominal, bags, ("offsets", "dry", "ripple"),
                                            say=print))


def compare_real(data: Path, files) -> dict:
    """compare-models on the peer rig's step responses."""
    config = load_config(CONFIG)
    paths = [data / f"hardware_step_response_{name}.csv" for name in files]
    return _print_comparison(compare_models(config, paths, ("offsets", "dry", "ripple"),
                                            say=print))


def main() -> None:
    """Run the part asked for; its rows into --json."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=("simulated", "compare-simulated", "compare-real"))
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--scenario", default="multisine", help="simulated: the scenario")
    parser.add_argument("--data-step", type=float,
                        help="simulated: the simulator's step for the data [s] (default: the "
                             "config's simulation.dt)")
    parser.add_argument("--data", type=Path,
                        default=REPO.parent / "shared" / "data" / "peer-furuta-hardware")
    parser.add_argument("--files", default="2V,3V,4V,5V,6V")
    parser.add_argument("--duration", type=float, default=10.0,
                        help="compare-simulated: each recording's length [s]")
    parser.add_argument("--simulation-refinement", choices=("auto", "on", "off"),
                        help="compare-simulated: the method's stage (default: the config's)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        if args.part == "simulated":
            result = simulated([int(seed) for seed in args.seeds.split(",")], work,
                               args.scenario, args.data_step)
        elif args.part == "compare-simulated":
            result = compare_simulated(work, args.duration, args.simulation_refinement)
        else:
            result = compare_real(args.data, args.files.split(","))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
