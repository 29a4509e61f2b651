"""A free swing with the arm held still, over noise seeds: the std against the errors' spread.

Data: ``test/reference_furuta.py``'s independent rigid model with the arm made immovable (its
inertia 10⁶ times the rig's), the pendulum released from 1 rad, 3 s at 1 kHz, noise 1e-3 rad,
no input topic (``test_calibrations._free_swing_bag``); calibrated through the default path
with J_Byy and b2 free (``test_calibrations._swing_start``: the arm's own values 3 times off).
Printed per seed: each estimate's relative error, its reported relative std and the
Cramér–Rao bound's; then the errors' RMS over the seeds against the mean std and bound.

    python benchmarks/studies/bench_held_swing.py [--seeds 12] [--first-seed 0]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "test"))

import test_calibrations  # noqa: E402  (the test's recording and start)

from mb_estimation.api import calibrate  # noqa: E402
from mb_estimation.config import apply_overrides, load_config  # noqa: E402

FREE = ("J_Byy", "b2")


def main() -> None:
    """Calibrate each seed's swing, print its row, then the spread against the std."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=12)
    parser.add_argument("--first-seed", type=int, default=0)
    args = parser.parse_args()
    truth = apply_overrides(load_config("furuta_synthetic"), hinges="rigid")
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            folder = Path(work) / f"seed{seed}"
            bag = test_calibrations._free_swing_bag(folder / "bag", truth, seed=seed)
            run = calibrate(test_calibrations._swing_start(truth), [bag], folder / "out")
            row = {}
            for name in FREE:
                scale = float(truth.parameters[name])
                row[name] = (float(np.ravel(run.result.parameters[name])[0]) / scale - 1.0,
                             float(run.result.std[name][0]) / scale,
                             run.assessment.bound.std[name] / scale)
            rows.append(row)
            print(f"seed {seed}: " + "; ".join(
                f"{name} error {100 * e:+.3f} %, std {100 * s:.3f} %, bound {100 * b:.3f} %"
                for name, (e, s, b) in row.items())
                + f" (simulation-error stage kept: {run.assessment.refit_kept})", flush=True)
    for name in FREE:
        errors, std, bound = (np.array([row[name][k] for row in rows]) for k in range(3))
        rms = float(np.sqrt(np.mean(errors ** 2)))
        print(f"{name}: errors' RMS {100 * rms:.3f} % over {len(rows)} seeds; mean std "
              f"{100 * std.mean():.3f} % ({rms / std.mean():.2f}× of it), bound "
              f"{100 * bound.mean():.3f} % (std {std.mean() / bound.mean():.2f}× the bound)")


if __name__ == "__main__":
    main()
