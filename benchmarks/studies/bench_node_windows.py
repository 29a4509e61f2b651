"""The node's window estimate on rig-like data, per estimator and step.

    python benchmarks/studies/bench_node_windows.py
    python benchmarks/studies/bench_node_windows.py --peer    # another lab's hardware recordings

furuta_synthetic run as a rig runs (SPOOK at 1e-4 s, its own stiff 1e-6 hinges, 0.001 rad
noise), the swing-up sampled at 100 Hz and 1 kHz; one 5 s window from its start, J_Azz, J_Byy,
b1, b2 fitted from Table 1's start values through
:func:`mb_estimation.online.windows.estimate_window` (what the node runs), with
``advanced.estimator`` and ``method.step_s`` as in each row. Prints a Markdown table: the
relative errors of the inertias, the judge's verdict, iterations and the solve's time.

``--peer``: the node core itself (real estimator, judge, fusion) fed the peer rig's hardware
step responses (../shared/data/peer-furuta-hardware, 2V-6V) one after another as a rig would
stream them (``config/examples/odrive_furuta.yaml``, 3 s windows every 3 s; the stamps jump
back between recordings; the voltage, recorded only from the step on, held at 0 before it).
Prints each recording's windows and the fused estimate.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from mb_estimation.numerics import configure_jax

PEER = Path(__file__).resolve().parents[3] / "shared" / "data" / "peer-furuta-hardware"


def main() -> None:
    """One row per (estimator, rate, step); or the peer rig through the node core."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer", action="store_true", help="the peer rig's recordings instead")
    args = parser.parse_args()
    configure_jax()
    if args.peer:
        peer_rig()
    else:
        simulated_windows()


def simulated_windows() -> None:
    """One 5 s swing-up window per (estimator, rate, step), as a Markdown table."""
    from mb_estimation.config import apply_overrides, load_config
    from mb_estimation.online.windows import estimate_window, why_rejected, window_step
    from mb_estimation.setup import rig_of
    from mb_estimation.signals import Recording
    from mb_estimation.simulation import simulate_recording

    truth = load_config("furuta_synthetic")
    table_1 = {"J_Azz": 0.01, "J_Byy": 0.01, "b1": 1e-4, "b2": 1e-4}
    start = apply_overrides(truth, free=list(table_1), set_values=table_1)
    rows = (("paper", 100.0, None), ("paper", 1000.0, None), ("consistent", 100.0, 0.01),
            ("consistent", 100.0, 0.005), ("consistent", 100.0, None),
            ("consistent", 1000.0, None), ("consistent", 1000.0, 0.002))
    print("| estimator | rate [Hz] | step [s] | J_Azz error | J_Byy error | judged | iterations "
          "| solve [s] |")
    print("|---|---|---|---|---|---|---|---|")
    windows = {}  # rate [Hz] -> the window's recording, simulated once per rate
    for rate_hz in sorted({rate_hz for _, rate_hz, _ in rows}):
        sim = simulate_recording(rig_of(truth), truth.parameters, "swingup",
                                 duration_s=6.0, dt=truth.simulation.dt, rate_hz=rate_hz,
                                 noise_rad=truth.simulation.noise_rad)
        inside = sim.time_s <= start.node.window_s + 1e-9
        windows[rate_hz] = Recording("window", sim.time_s[inside], sim.measured_angles[inside],
                                     sim.time_s[inside], sim.inputs[inside])
    for estimator, rate_hz, step in rows:
        config = apply_overrides(start, estimator=estimator, step_s=step)
        if estimator == "paper":  # the node's old set-up: the paper's compliance
            config = apply_overrides(config, compliance=1e-4)
        started = time.perf_counter()
        result = estimate_window(config, windows[rate_hz])
        elapsed = time.perf_counter() - started - result.compile_time_s
        errors = [float(result.parameters[name]) / float(truth.parameters[name]) - 1.0
                  for name in ("J_Azz", "J_Byy")]
        verdict = why_rejected(result, config.node.max_cost) or "accepted"
        print(f"| {estimator} | {rate_hz:g} | {window_step(config):g} | {errors[0]:+.1%} | "
              f"{errors[1]:+.1%} | {verdict} | {result.iterations} | {elapsed:.2f} |",
              flush=True)


def peer_rig() -> None:
    """The peer rig's step responses streamed into the node core, one after another."""
    from mb_estimation.config import load_config
    from mb_estimation.io.recordings import read_recording
    from mb_estimation.online.core import EstimatorCore, NodeOutputs, with_node

    config = with_node(load_config(str(Path(__file__).resolve().parents[2] / "config"
                                       / "examples" / "odrive_furuta.yaml")),
                       window_s=3.0, stride_s=3.0)
    accepted = []
    core = EstimatorCore(config, NodeOutputs(parameters=lambda estimate, _: accepted.append(
        estimate)))
    print(f"warm-up {core.start():.1f} s")
    names = [config.recording.joints[joint].name for joint in config.rig_spec.joints]
    start_ns = 1_700_000_000 * 10**9
    try:
        for path in sorted(PEER.glob("hardware_step_response_*V.csv")):
            recording = read_recording(path, config)
            core.on_voltage(start_ns, 0.0)  # no voltage recorded before the step
            inputs = iter(zip(recording.input_time_s, recording.inputs[:, 0], strict=True))
            pending = next(inputs, None)
            for time_s, angles in zip(recording.time_s, recording.joint_angles, strict=True):
                while pending is not None and pending[0] <= time_s:
                    core.on_voltage(start_ns + int(round(pending[0] * 1e9)), float(pending[1]))
                    pending = next(inputs, None)
                core.on_joint_state(start_ns + int(round(time_s * 1e9)), names, tuple(angles))
            diagnostics = core.diagnostics()
            while diagnostics["windows_done"] + diagnostics["windows_dropped"] < \
                    core.intake.window_index:  # every window cut so far estimated
                time.sleep(0.05)
                diagnostics = core.diagnostics()
            print(f"{path.name}: windows done {diagnostics['windows_done']}, accepted "
                  f"{diagnostics['windows_accepted']}, last: {diagnostics.get('last_window')} "
                  f"({diagnostics.get('last_window_s', 0.0):.2f} s)")
    finally:
        core.stop()
    for estimate in accepted:
        print("  window", {n: f"{float(v[0]):.4g}" for n, v in estimate.values.items()})
    if core.fused is not None:
        print("  fused ", {n: f"{float(v[0]):.4g}" for n, v in core.fused.values.items()})


if __name__ == "__main__":
    main()
