"""A real rig by configuration only: the peer lab's ODrive Furuta pendulum, step by step.

    python benchmarks/studies/bench_peer_rig.py [--data DIR] [--refinement default|off|on]
        [--json FILE]

For each step-response recording (PlotJuggler CSV, 2V ... 6V, 01, 0575): calibrate as
`mb-estimation calibrate FILE --config config/examples/odrive_furuta.yaml` does (the joint fit,
then the simulation-error stage through the rigid model where it is kept; ``--refinement
off``: the joint fit alone; ``on``: the stage kept whatever it predicts), and print per
recording: J_Byy with its std, how many std it lies from 1.5e-5, its status and whether the
std include the model's error (the residuals' correlation time); the arm's inertia about the
motor axis I = J_shaft + J_Azz + m_A l1² + m_B lA² + J_Bxx (what the arm's motion sees with
the pendulum hanging), the input gain K, the ratios I/K and b1/K, J_Azz's standing, the 0.5 s
prediction error, the verdict's findings and whether the stage was kept.
Then the spread of each across the recordings (max/min - 1).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

from mb_estimation.api import calibrate
from mb_estimation.config import apply_overrides, load_config

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "config" / "examples" / "odrive_furuta.yaml"
FILES = ("2V", "3V", "4V", "5V", "6V", "01", "0575")
J_BYY_NOMINAL = 1.5e-5  # [kg m²] the pendulum about its swing axis (published: 1.479e-5)


def _value(parameters, name) -> float:
    return float(np.ravel(parameters[name])[0])


def row(run) -> dict:
    """What one calibration says about the rig."""
    p = run.result.parameters
    inertia = (_value(p, "J_shaft") + _value(p, "J_Azz") + _value(p, "m_A") * _value(p, "l1")**2
               + _value(p, "m_B") * _value(p, "lA")**2 + _value(p, "J_Bxx"))
    gain = _value(p, "K")
    prediction = max(float(np.max(check.rms[-1])) for check in run.assessment.predictions)
    std = float(np.ravel(run.result.std["J_Byy"])[0])
    return {"J_Byy": _value(p, "J_Byy"), "J_Byy_std": std,
            "J_Byy_z": (_value(p, "J_Byy") - J_BYY_NOMINAL) / std,
            "J_Byy_status": run.assessment.identified.standing("J_Byy").status,
            "model_error_s": run.assessment.model_error_correlation_s,
            "I": inertia, "K": gain, "I/K": inertia / gain, "b1/K": _value(p, "b1") / gain,
            "J_Azz": run.assessment.identified.standing("J_Azz").status,
            "prediction_rad": prediction, "trustworthy": run.verdict.trustworthy,
            "stage_kept": run.assessment.refit_kept,
            "findings": [f.problem for f in run.verdict.findings]}


def main() -> None:
    """Calibrate every recording, print the table and the spreads."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=REPO.parent / "shared" / "data" /
                        "peer-furuta-hardware", type=Path)
    parser.add_argument("--refinement", choices=("default", "off", "on"), default="default")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    config = apply_overrides(load_config(CONFIG), simulation_refinement=(
        "on" if args.refinement == "default" else args.refinement))
    rows = {}
    with tempfile.TemporaryDirectory() as scratch:
        for name in FILES:
            run = calibrate(config, [args.data / f"hardware_step_response_{name}.csv"],
                            Path(scratch) / name)
            rows[name] = row(run)
            r = rows[name]
            error = ("-" if r["model_error_s"] is None else f"{r['model_error_s']:.2g} s")
            print(f"| {name} | {r['J_Byy']:.3g} ± {r['J_Byy_std']:.2g} "
                  f"({100 * r['J_Byy_std'] / r['J_Byy']:.3g} %) | {r['J_Byy_z']:+.2g} | "
                  f"{r['J_Byy_status']} | {error} | {r['I']:.3g} | "
                  f"{r['K']:.3g} | {r['I/K']:.3g} | {r['b1/K']:.3g} | {r['J_Azz']} | "
                  f"{r['prediction_rad']:.3g} | {len(r['findings'])} | "
                  f"{'yes' if r['stage_kept'] else 'no'} |", flush=True)
    print("\nspread over the recordings (max/min - 1):")
    for key in ("J_Byy", "I", "K", "I/K", "b1/K"):
        values = np.array([r[key] for r in rows.values()])
        spread = values.max() / values.min() - 1 if values.min() > 0 else float("inf")
        print(f"  {key}: {100 * spread:.0f} %")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
