"""A second rig by configuration only: the peer lab's ODrive Furuta pendulum (issue 4).

For each step-response recording (PlotJuggler CSV): calibrate with
config/examples/odrive_furuta.yaml, score every fit on every recording (state-only estimation,
the cross-validation matrix), and replay each recording open loop from its estimated initial
state with the fitted parameters and with the rig's nominal values (RMS angle error over the
first 1 s and over the whole recording).

    python benchmarks/bench_peer_rig.py [--data DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from mb_estimation import pipeline
from mb_estimation.io.config import apply_overrides, load_config
from mb_estimation.io.recordings import read_recording

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "config" / "examples" / "odrive_furuta.yaml"
FILES = ("2V", "3V", "4V", "5V", "6V")


def main() -> None:
    """Fit, cross-validate and replay every step-response recording; print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=REPO.parent / "shared" / "data" /
                        "peer-furuta-hardware", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    config = load_config(CONFIG)
    grids = {}
    for name in FILES:
        recording = read_recording(args.data / f"hardware_step_response_{name}.csv", config)
        (grid,) = pipeline.prepare(config, [recording])
        grids[name] = grid
    nominal = {name: pipeline.calibrate(config, [grid], estimate_parameters=False)
               for name, grid in grids.items()}
    fits = {name: pipeline.calibrate(config, [grid]) for name, grid in grids.items()}
    out = {"free": list(config.free), "recordings": {}}
    print("| fit on | cost | status | " + " | ".join(config.free) + " |")
    print("|---|---|---|" + "---|" * len(config.free))
    for name, fit in fits.items():
        cells = [f"{np.ravel(fit.parameters[p])[0]:.4g} ± {np.ravel(fit.std[p])[0]:.2g}"
                 for p in config.free]
        print(f"| {name} | {fit.cost:.3g} | {fit.status}, {fit.iterations} | " + " | ".join(cells)
              + " |")
    print("\ncross-validation MSE (row: fitted on; column: scored on); nominal values last")
    print("| fitted on | " + " | ".join(FILES) + " |")
    print("|---|" + "---|" * len(FILES))
    matrix = {}
    for name, fit in [*fits.items(), ("nominal", None)]:
        values = config if fit is None else apply_overrides(config, set_values={
            p: fit.parameters[p].tolist() for p in config.free})
        row = [(nominal[other] if fit is None else
                pipeline.calibrate(values, [grids[other]], estimate_parameters=False)).cost
               for other in FILES]
        matrix[name] = row
        print(f"| {name} | " + " | ".join(f"{v:.3g}" for v in row) + " |")
    print("\nopen-loop replay, RMS angle error [rad] arm / pendulum: first 1 s; whole recording")
    print("| recording | fitted: first 1 s | fitted: all | nominal: first 1 s | nominal: all |")
    print("|---|---|---|---|---|")
    for name in FILES:
        (fitted,) = pipeline.open_loop_checks(config, [grids[name]], fits[name])
        (plain,) = pipeline.open_loop_checks(config, [grids[name]], nominal[name])
        out["recordings"][name] = {
            "fit": {p: np.ravel(fits[name].parameters[p]).tolist() for p in config.free},
            "std": {p: np.ravel(fits[name].std[p]).tolist() for p in config.free},
            "cost": fits[name].cost, "cv_row": matrix[name],
            "open_loop_fitted": [fitted.rms_first.tolist(), fitted.rms_all.tolist()],
            "open_loop_nominal": [plain.rms_first.tolist(), plain.rms_all.tolist()],
        }

        def pair(values):
            return " / ".join(f"{v:.3g}" for v in values)

        print(f"| {name} | {pair(fitted.rms_first)} | {pair(fitted.rms_all)} | "
              f"{pair(plain.rms_first)} | {pair(plain.rms_all)} |")
    out["cv_nominal"] = matrix["nominal"]
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
