"""A second rig by configuration only: the peer lab's ODrive Furuta pendulum (issue 4).

For each step-response recording (PlotJuggler CSV): calibrate with
config/examples/odrive_furuta.yaml, score every fit on every recording (state-only estimation,
the cross-validation matrix), and replay each recording open loop from its estimated initial
state with the fitted parameters and with the rig's nominal values (RMS angle error over the
first 1 s and over the whole recording), and predict 0.5 s ahead from the estimated states.

    python benchmarks/bench_peer_rig.py [--estimator consistent|paper] [--data DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from mb_estimation import pipeline
from mb_estimation.config import apply_overrides, load_config
from mb_estimation.io.recordings import read_recording

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "config" / "examples" / "odrive_furuta.yaml"
FILES = ("2V", "3V", "4V", "5V", "6V")


def main() -> None:
    """Fit, cross-validate and replay every step-response recording; print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=REPO.parent / "shared" / "data" /
                        "peer-furuta-hardware", type=Path)
    parser.add_argument("--estimator", choices=("consistent", "paper"), default="consistent")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    config = apply_overrides(load_config(CONFIG), estimator=args.estimator)
    recordings = {name: read_recording(args.data / f"hardware_step_response_{name}.csv", config)
                  for name in FILES}

    def calibrate(values, name, estimate_parameters=True):
        return pipeline.calibrate_recordings(values, [recordings[name]],
                                             estimate_parameters=estimate_parameters)

    nominal = {name: calibrate(config, name, False) for name in FILES}
    calibrations = {name: calibrate(config, name) for name in FILES}
    fits = {name: calibration.result for name, calibration in calibrations.items()}
    grids = {name: calibration.grids[0] for name, calibration in calibrations.items()}
    print(f"estimator {args.estimator}; steps "
          f"{pipeline.method_summary(config, fits['2V']).get('steps', config.method.dt)}")
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
        row = [(nominal[other] if fit is None else calibrate(values, other, False)).result.cost
               for other in FILES]
        matrix[name] = row
        print(f"| {name} | " + " | ".join(f"{v:.3g}" for v in row) + " |")
    print("\nopen-loop replay, RMS angle error [rad] arm / pendulum: first 1 s; whole recording;"
          " prediction 0.5 s ahead")
    print("| recording | fitted: first 1 s | fitted: all | nominal: first 1 s | nominal: all "
          "| fitted: 0.5 s prediction | nominal: 0.5 s prediction |")
    print("|---|---|---|---|---|---|---|")
    for name in FILES:
        nominal_grid = nominal[name].grids[0]
        (fitted,) = pipeline.open_loop_checks(config, [grids[name]], fits[name])
        (plain,) = pipeline.open_loop_checks(config, [nominal_grid], nominal[name].result)
        (predicted,) = pipeline.prediction_checks(config, [grids[name]], fits[name])
        (predicted_nominal,) = pipeline.prediction_checks(config, [nominal_grid],
                                                          nominal[name].result)
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
              f"{pair(plain.rms_first)} | {pair(plain.rms_all)} | {pair(predicted.rms[-1])} | "
              f"{pair(predicted_nominal.rms[-1])} |")
    out["cv_nominal"] = matrix["nominal"]
    out["estimator"] = args.estimator
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
