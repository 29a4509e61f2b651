"""Precision on data the model explains: the joint fit, the default path and the Cramér–Rao bound.

    python benchmarks/studies/bench_rigid_refinement.py [--scenarios release,multisine]
        [--l2 0.92,0.092] [--seconds 8]
    python benchmarks/studies/bench_rigid_refinement.py --seeds 10 [--scenarios release] [--l2 0.92]

Data: the independent rigid reference (``test/reference_furuta.py``, RK4 at 1e-4 s) of
furuta_synthetic (Table G.5) with pendulum length l2, at 1 kHz with 1e-3 rad noise, K known,
J_Azz, J_Byy, b1, b2 free from §4.7's start (Table 1), the hinges declared rigid (the data's
model). For each case: the joint fit alone (``simulation_refinement: off``), the default path
(no method setting: the joint fit, then the simulation-error stage through the rigid model,
kept where the rigid model follows the data) and the bound; per parameter the relative
error ± relative std, and for the default path its std over the bound and its error in std.

With ``--seeds N``: the default path on N noise seeds; the spread of the estimates against the
mean reported std and the mean bound.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "test"))

from test_calibrations import _reference  # noqa: E402

from mb_estimation.assess import fit_noise_rad, kept_fit  # noqa: E402
from mb_estimation.config import apply_overrides, load_config  # noqa: E402
from mb_estimation.fitting import fit  # noqa: E402
from mb_estimation.setup import set_up  # noqa: E402

START = {"J_Azz": 0.01, "J_Byy": 0.01, "b1": 1e-4, "b2": 1e-4}


def truth_of(l2: float):
    """furuta_synthetic with pendulum length ``l2`` [m], its hinges declared rigid."""
    return apply_overrides(load_config("furuta_synthetic"), hinges="rigid",
                           set_values={"l2": l2})


def fitted(truth, recording, refinement: str):
    """The calibration from §4.7's start, its wall time [s] and the bound on its grids."""
    config = apply_overrides(truth, free=list(START), set_values=START,
                             simulation_refinement=refinement)
    started = time.perf_counter()
    setup = set_up(config, [recording])
    kept = kept_fit(setup, fit(setup))
    seconds = time.perf_counter() - started
    result, grids = kept.result, setup.grids
    return kept, seconds, setup.model.cramer_rao(result.parameters, result.free, grids,
                                                 result.recordings,
                                                 fit_noise_rad(grids, result))


def _value(result, name):
    return float(np.ravel(result.parameters[name])[0]), float(np.ravel(result.std[name])[0])


def compare(args) -> None:
    """Each case: the joint fit, the default path and the bound, as a Markdown table."""
    print("| scenario | l2 [m] | fit | J_Azz | J_Byy | b1 | b2 | stage kept | time [s] |")
    print("|---|---|---|---|---|---|---|---|---|")
    for scenario in args.scenarios.split(","):
        for l2 in (float(v) for v in args.l2.split(",")):
            truth = truth_of(l2)
            recording = _reference(truth, scenario, args.seconds)
            rows = {stage: fitted(truth, recording, stage) for stage in ("off", "on")}
            bound = rows["on"][2]
            for stage, label in (("off", "joint fit"), ("on", "default path")):
                kept, seconds, _ = rows[stage]
                result, cells = kept.result, []
                for name in START:
                    target = float(truth.parameters[name])
                    value, std = _value(result, name)
                    cell = f"{100 * (value / target - 1):+.2f} % ± {100 * std / target:.2g}"
                    if stage == "on":
                        cell += (f" ({std / bound.std[name]:.1f}× bound, "
                                 f"{abs(value - target) / std:.1f}σ)")
                    cells.append(cell)
                print(f"| {scenario} | {l2} | {label} | " + " | ".join(cells)
                      + f" | {'yes' if kept.refit_kept else 'no'} | {seconds:.1f} |",
                      flush=True)
            cells = [f"{100 * bound.std[name] / float(truth.parameters[name]):.2g} %"
                     for name in START]
            print(f"| {scenario} | {l2} | Cramér–Rao bound | " + " | ".join(cells) + " | | |",
                  flush=True)


def monte_carlo(args) -> None:
    """The default path over noise seeds: spread of the estimates against the reported std."""
    print("| scenario | l2 [m] | parameter | bias [%] | spread [%] | mean std [%] | "
          "mean bound [%] | std / spread |")
    print("|---|---|---|---|---|---|---|---|")
    for scenario in args.scenarios.split(","):
        for l2 in (float(v) for v in args.l2.split(",")):
            truth = truth_of(l2)
            outcomes = []
            for seed in range(args.seeds):
                calibration, _, bound = fitted(
                    truth, _reference(truth, scenario, args.seconds, seed=seed), "on")
                outcomes.append((calibration.result, bound))
            for name in START:
                target = float(truth.parameters[name])
                values = np.array([_value(result, name)[0] for result, _ in outcomes])
                stds = np.array([_value(result, name)[1] for result, _ in outcomes])
                bounds = np.array([bound.std[name] for _, bound in outcomes])
                spread = values.std(ddof=1)
                print(f"| {scenario} | {l2} | {name} | {100 * (values.mean() / target - 1):+.2f} "
                      f"| {100 * spread / target:.3g} | {100 * stds.mean() / target:.3g} | "
                      f"{100 * bounds.mean() / target:.3g} | {stds.mean() / spread:.2f} |",
                      flush=True)


def main() -> None:
    """The comparison table, or with --seeds the spread over noise seeds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default="release,multisine")
    parser.add_argument("--l2", default="0.92,0.092", help="pendulum lengths [m]")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--seeds", type=int, default=0,
                        help="the default path over this many noise seeds instead")
    args = parser.parse_args()
    (monte_carlo if args.seeds else compare)(args)


if __name__ == "__main__":
    main()
