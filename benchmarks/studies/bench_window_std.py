"""The node's windows: how much the residuals' correlation widens each std, model right or not.

Per window, the largest ratio over the free parameters of the std with the residuals'
correlation in time (``EstimationResult.correlated``) to the model-is-right std, and whether
the node reports the model's error (``online.windows.MODEL_ERROR_STD_RATIO``):

- windows of furuta_synthetic as the node fits it (Table 1's start, J_Azz, J_Byy, b1, b2;
  5 s at its 1 ms step), three per simulated recording over ``--seeds`` noise seeds (0.001 rad):
  a rigid rig (the model the node fits) under the multisine at 1 kHz and at 100 Hz and
  swinging up at 1 kHz, and the rig with its own stiff compliant hinges under the multisine
  at 1 kHz (a small model error: the node fits the rigid limit);
- the two windows of ../shared/data/rosbag2-humble-furuta's impulse response (the peer
  simulator; the example ODrive rig with the impulse its README gives, J_Azz and K free), a
  rig the model does not follow, with J_Azz's values and std as the node reports them.

    python benchmarks/studies/bench_window_std.py [--seeds 4]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "test"))

from configs import TABLE_1, write_config  # noqa: E402

from mb_estimation.config import apply_overrides, load_config  # noqa: E402
from mb_estimation.fitting import fit  # noqa: E402
from mb_estimation.io.recordings import read_recording  # noqa: E402
from mb_estimation.numerics import configure_jax  # noqa: E402
from mb_estimation.online.windows import (  # noqa: E402
    window_config,
    with_the_model_s_error,
)
from mb_estimation.setup import rig_of, set_up  # noqa: E402
from mb_estimation.signals import Recording  # noqa: E402
from mb_estimation.simulation import simulate_recording  # noqa: E402
from mb_estimation.tracking.windows import cut_windows  # noqa: E402

HUMBLE = REPO.parent / "shared" / "data" / "rosbag2-humble-furuta" / "impulse_response_de"
RIGS = (("multisine", 1000.0, True), ("multisine", 100.0, True), ("swingup", 1000.0, True),
        ("multisine", 1000.0, False))


def joint_fit(config, recording: Recording):
    """The window's joint fit as the node runs it, before its std take in the model's error.

    (``online.windows.estimate_window`` without its last step.)
    """
    first = float(recording.time_s[0])
    return fit(set_up(window_config(config), [recording], start_s=-first,
                      end_s=config.node.window_s - first, held={recording.name: ()})).joint


def widening(result) -> float:
    """The largest correlated-to-plain std ratio of a joint fit's result."""
    return max(float(np.max(np.asarray(result.correlated.std[name]) / result.std[name]))
               for name in result.free if np.all(np.isfinite(result.std[name])))


def simulated(seeds: int) -> None:
    """The simulated rigs' windows: the ratio's range per rig."""
    truth = load_config("furuta_synthetic")
    config = apply_overrides(truth, free=list(TABLE_1), set_values=TABLE_1)
    window_s = config.node.window_s
    for scenario, rate_hz, rigid in RIGS:
        ratios = []
        for seed in range(seeds):
            sim = simulate_recording(
                rig_of(truth), truth.parameters, scenario, duration_s=3 * window_s,
                dt=1e-3 if rigid else truth.simulation.dt, rate_hz=rate_hz, rigid=rigid,
                noise_rad=truth.simulation.noise_rad, seed=seed)
            for k in range(3):
                inside = ((sim.time_s >= k * window_s - 1e-9)
                          & (sim.time_s <= (k + 1) * window_s + 1e-9))
                time_s = sim.time_s[inside] - k * window_s
                ratios.append(widening(joint_fit(config, Recording(
                    f"window {k}", time_s, sim.measured_angles[inside], time_s,
                    sim.inputs[inside]))))
        print(f"{'rigid' if rigid else 'compliant'} rig, {scenario} at {rate_hz:g} Hz: "
              f"{len(ratios)} windows, ratio {min(ratios):.2f}–{max(ratios):.2f} "
              f"(median {np.median(ratios):.2f})", flush=True)


def humble() -> None:
    """The real bag's windows: the ratio and what the node reports."""
    if not HUMBLE.is_dir():
        print(f"{HUMBLE} not found: the real bag's windows skipped")
        return
    with tempfile.TemporaryDirectory() as folder:
        config = load_config(write_config(
            Path(folder) / "humble.yaml", "examples/odrive_furuta.yaml", parameters={"K": 1.0},
            recording={"joint_states_topic": "joint_states",
                       "joints": {"arm": {"name": "joint0"}, "pendulum": {"name": "joint1"}},
                       "voltage_script": [[0.0, 0.43], [0.002, 0.0]]},
            node={"window_s": 4.5, "stride_s": 4.5}, free={"J_Azz": {}, "K": {}}))
    for window in cut_windows(read_recording(HUMBLE, config), 4.5, 4.5):
        plain = joint_fit(config, window.recording)
        result = with_the_model_s_error(plain)  # as estimate_window reports it
        print(f"humble window {window.index}: ratio {widening(plain):.2f}, J_Azz "
              f"{float(result.parameters['J_Azz']):.4g} ± {float(result.std['J_Azz'][0]):.2g}, "
              f"model's error in the std: {result.std_include_model_error}", flush=True)


def main() -> None:
    """Both, the real bag first."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4)
    args = parser.parse_args()
    configure_jax()
    humble()
    simulated(args.seeds)


if __name__ == "__main__":
    main()
