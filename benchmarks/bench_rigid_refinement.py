"""The joint fit, the simulation-error stage through the rigid model, and the Cramér–Rao bound.

    python benchmarks/bench_rigid_refinement.py [--scenarios release,multisine] [--seconds 8]

Data: the independent rigid reference (``test/reference_furuta.py``, RK4 at 1e-4 s) of
furuta_synthetic (Table G.5, l2 0.92 m) at 1 kHz with 1e-3 rad noise, K known, J_Azz, J_Byy,
b1, b2 free from §4.7's start (Table 1), the hinges declared rigid. Prints per parameter the
relative error ± relative std of the joint fit and of the refit, and the bound's relative std.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))

from test_verdict import _reference  # noqa: E402

from mb_estimation import pipeline  # noqa: E402
from mb_estimation.config import apply_overrides, load_config  # noqa: E402

START = {"J_Azz": 0.01, "J_Byy": 0.01, "b1": 1e-4, "b2": 1e-4}


def main() -> None:
    """Each scenario: both fits and the bound, as a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default="release,multisine")
    parser.add_argument("--seconds", type=float, default=8.0)
    args = parser.parse_args()
    truth = apply_overrides(load_config("furuta_synthetic"), hinges="rigid")
    print("| scenario | fit | J_Azz | J_Byy | b1 | b2 | time [s] |")
    print("|---|---|---|---|---|---|---|")
    for scenario in args.scenarios.split(","):
        recording = _reference(truth, scenario, args.seconds)
        rows = {}
        for stage in ("off", "on"):
            config = apply_overrides(truth, free=list(START), set_values=START,
                                     simulation_refinement=stage)
            started = time.perf_counter()
            calibration = pipeline.calibrate_recordings(config, [recording])
            rows[stage] = (calibration, time.perf_counter() - started)
        bound = pipeline.cramer_rao_of(config, rows["on"][0].grids, rows["on"][0].result)
        for stage, label in (("off", "joint"), ("on", "+ rigid simulation error")):
            result, seconds = rows[stage][0].result, rows[stage][1]
            cells = []
            for name in START:
                target = float(truth.parameters[name])
                value = float(np.ravel(result.parameters[name])[0])
                std = float(np.ravel(result.std[name])[0])
                cells.append(f"{100 * (value / target - 1):+.2f} % ± {100 * std / target:.2g}")
            print(f"| {scenario} | {label} | " + " | ".join(cells) + f" | {seconds:.1f} |")
        cells = [f"{100 * bound.std[name] / float(truth.parameters[name]):.2g} %"
                 for name in START]
        print(f"| {scenario} | Cramér–Rao bound | " + " | ".join(cells) + " | |", flush=True)


if __name__ == "__main__":
    main()
