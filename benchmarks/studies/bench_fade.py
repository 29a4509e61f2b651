"""What the exciter's fade does to a design's predicted precision.

    python benchmarks/studies/bench_fade.py DESIGN/excitation.yaml [--config furuta_synthetic]

Reads the design's tones, amplitudes, phases, peak, duration and rate from an
``excitation.yaml`` (``mb-estimation excite``'s; one made by an older tree, whose input was not
faded, too), rebuilds its input and the plain multisine's at the design's peaks, and prints the
Cramér–Rao relative std of each free parameter (``designed_at``'s names) for each input played
unfaded and faded in and out over :data:`mb_estimation.fade.RAMP_S` (as the exciter plays it).
The config (default furuta_synthetic) gives the fixed values; the free ones are
``designed_at``'s.
"""

from __future__ import annotations

import argparse

import numpy as np
import yaml

from mb_estimation.config import apply_overrides, load_config
from mb_estimation.excitation import predicted_response
from mb_estimation.fade import fade
from mb_estimation.multisines import at_peak, multisine, schroeder_phases
from mb_estimation.scenarios import MULTISINE_FREQUENCIES_HZ
from mb_estimation.setup import rig_of


def main() -> None:
    """Print the four predictions: design and multisine, unfaded and faded."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("design", help="an excitation.yaml")
    parser.add_argument("--config", default="furuta_synthetic")
    args = parser.parse_args()
    document = yaml.safe_load(open(args.design, encoding="utf-8"))
    names = tuple(document["designed_at"])
    config = apply_overrides(load_config(args.config), set_values=document["designed_at"])
    rig = rig_of(config)
    rate = float(document["rate_hz"])
    time_s = np.arange(int(round(float(document["duration_s"]) * rate)) + 1) / rate
    count = len(MULTISINE_FREQUENCIES_HZ)
    inputs = {
        "design": at_peak(multisine(time_s, document["input"]["amplitudes"],
                                    document["input"]["frequencies_hz"],
                                    document["input"]["phases_rad"]), document["input"]["peak"]),
        "multisine": at_peak(multisine(time_s, np.ones(count), MULTISINE_FREQUENCIES_HZ,
                                       schroeder_phases(count)), document["multisine"]["peak"]),
    }
    for played in ("unfaded", "faded"):
        for name, signal in inputs.items():
            if played == "faded":
                signal = signal * fade(len(signal), rate)
            response = predicted_response(rig, config.parameters, names, time_s, signal,
                                          np.zeros(2 * len(rig.spec.joints)),
                                          float(document["noise_rad"]))
            relative = ", ".join(f"{key} {100 * value:.3g} %"
                                 for key, value in response.relative_std.items())
            print(f"{played:9s} {name:9s} {relative}; arm within "
                  f"{response.arm_peak_rad:.3g} rad", flush=True)


if __name__ == "__main__":
    main()
