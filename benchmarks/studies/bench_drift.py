"""The node's drift tracking on a wearing simulated rig: the published rate against the truth.

    python benchmarks/studies/bench_drift.py [--windows 10] [--drift b1=+20%/600s]
                                             [--scenario multisine] [--seed 0]

``config/furuta_synthetic.yaml`` on rigid hinges (1 kHz, 0.001 rad noise) run by ``rig-sim``'s
stream with ``--drift`` (the parameter stepped every second), fed to the node's core
(:class:`mb_estimation.online.core.EstimatorCore`, the real estimator, J_Azz, J_Byy, b1, b2
free, started from the truth at time 0 as a running node would be) one window after another.
Prints per accepted window the drifting parameter's window estimate, the fused value, the
published rate [unit/h] with its std, the truth and the rate's z; then the drift alarm.

``--filter``: the drift filter alone (:func:`mb_estimation.online.drift.track`) on simulated
window estimates of one parameter (3 % std each, the node's b1 windows above), with the
node's default settings, over seeds: 10 windows of 5 s with a 20 %/h drift (the rate's z);
an hour of 6 recordings of 60 s, 10 min apart, cut into 5 s windows, with and without the
drift (alarms raised); a steady hour of contiguous 5 s windows (false alarms).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from mb_estimation.numerics import configure_jax

NS = 1_000_000_000
T0 = 1_700_000_000 * NS
FREE = ("J_Azz", "J_Byy", "b1", "b2")


def main() -> None:
    """Feed the windows, then print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=10)
    parser.add_argument("--drift", default="b1=+20%/600s")
    parser.add_argument("--scenario", default="multisine")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--drift-noise", type=float, default=None,
                        help="node.drift_noise (default: the config's)")
    parser.add_argument("--filter", action="store_true", help="the filter on simulated windows")
    args = parser.parse_args()
    if args.filter:
        filter_study()
        return
    configure_jax()
    from mb_estimation.cli.common import parse_drifts
    from mb_estimation.config import apply_overrides, load_config
    from mb_estimation.online.core import EstimatorCore, NodeOutputs, with_node
    from mb_estimation.online.drift import HOUR_S, alarms
    from mb_estimation.ros.players import FLOAT64, JOINT_STATE, rig_sim_messages

    drifts = parse_drifts(args.drift)
    (name, (fraction, period_s)), = drifts.items()
    truth = apply_overrides(load_config("furuta_synthetic"), hinges="rigid")
    fit = apply_overrides(truth, free=list(FREE))
    node = {"pending_windows": args.windows + 2, "buffer_s": 1e3}
    if args.drift_noise is not None:
        node["drift_noise"] = args.drift_noise
    fit = with_node(fit, **node)
    start = float(np.ravel(truth.parameters[name])[0])
    true_rate = start * fraction / period_s * HOUR_S

    windows, rates = [], []
    core = EstimatorCore(fit, NodeOutputs(
        parameters=lambda e, s: windows.append((e, s)),
        parameter_rates=lambda d, s: rates.append((d, s))))
    started = time.perf_counter()
    core.start()
    messages = rig_sim_messages(truth, args.scenario, duration_s=args.windows * 5.0 + 0.5,
                                rate_hz=1000.0, start_ns=T0, seed=args.seed, chunk_s=1.0,
                                drifts=drifts)
    for message in messages:
        if message.kind == JOINT_STATE:
            core.on_joint_state(message.stamp_ns, message.payload.names,
                                message.payload.positions)
        elif message.kind == FLOAT64:
            core.on_voltage(message.stamp_ns, message.payload)
    while core.diagnostics()["windows_done"] < core.intake.window_index or core.busy:
        time.sleep(0.1)
    core.stop()
    elapsed = time.perf_counter() - started

    print(f"{args.drift} on {args.scenario}, seed {args.seed}: true rate of {name} "
          f"{true_rate:.4g} /h; {len(rates)} of {core.intake.window_index} windows accepted "
          f"({elapsed:.0f} s)")
    print(f"| window end [s] | {name} window | fused | rate [/h] | truth [/h] | z |")
    print("|---|---|---|---|---|---|")
    for (window, stamp), (drifting, _) in zip(windows, rates, strict=True):
        t = (stamp - T0) / NS
        index = drifting.estimate.names.index(name)  # scalars: the tangent order
        rate, std = drifting.rates[index], drifting.rate_std[index]
        print(f"| {t:.0f} | {window.values[name][0]:.5g} ± {window.std[name][0]:.2g} "
              f"| {drifting.estimate.values[name][0]:.5g} | {rate:.4g} ± {std:.2g} "
              f"| {true_rate:.4g} | {(rate - true_rate) / std:+.2f} |")
    if rates:
        print(f"drift alarm: {', '.join(alarms(rates[-1][0], fit.node.drift_alarm_s)) or 'none'}")


def filter_study(sigma: float = 0.03, rate: float = 0.2) -> None:
    """The drift filter on simulated windows, the node's default settings (module docstring)."""
    from mb_estimation.config.schema import NodeSettings
    from mb_estimation.online.drift import HOUR_S, DriftSettings, alarms, track
    from mb_estimation.online.fusion import ParameterEstimate

    node = NodeSettings()
    settings = DriftSettings([node.drift_noise], [node.drift_prior], node.drift_alarm_std)
    node_windows = [5.0 * k for k in range(1, 11)]
    recordings = [600.0 * r + 5.0 * k for r in range(6) for k in range(1, 13)]
    steady_hour = [5.0 * k for k in range(1, 721)]

    def run(times, true_rate, seed):
        rng = np.random.default_rng(seed)
        tracked, alarmed = None, False
        for time_s in times:
            value = 1.0 + true_rate * time_s / HOUR_S + sigma * rng.standard_normal()
            window = ParameterEstimate(("b1",), {"b1": np.array([value])}, [[sigma**2]])
            tracked = track(tracked, window, time_s, settings)
            alarmed = alarmed or bool(alarms(tracked, node.drift_alarm_s))
        return (tracked.rates[0] - true_rate) / tracked.rate_std[0], alarmed

    z = np.array([run(node_windows, rate, seed)[0] for seed in range(20)])
    print(f"drift_noise {node.drift_noise}, drift_prior {node.drift_prior}, window std "
          f"{sigma:.0%}, true rate {rate:.0%}/h")
    print(f"10 windows of 5 s: rate z mean {z.mean():+.2f}, largest |z| {np.abs(z).max():.2f} "
          f"(20 seeds)")
    found = sum(run(recordings, rate, seed)[1] for seed in range(20))
    false = sum(run(recordings, 0.0, seed)[1] for seed in range(20))
    print(f"an hour, 6 recordings of 60 s: drift alarmed in {found}/20 seeds; without the drift "
          f"{false}/20")
    steady = sum(run(steady_hour, 0.0, seed)[1] for seed in range(10))
    print(f"a steady hour of 5 s windows: {steady}/10 seeds alarmed")


if __name__ == "__main__":
    main()
