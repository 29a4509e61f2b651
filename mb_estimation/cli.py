"""The ``mb-estimation`` command (DESIGN §6): a thin shell over the pipeline functions.

Every failure the user can cause (a bad config, a bad path, an impossible option) ends with one
line ``mb-estimation: error: …`` on stderr and a non-zero exit status, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

COMPLIANCE_HELP = "set every hinge compliance (linear and rotational) to EPS"
# Bags start at this wall-clock time [s since the Unix epoch]: a stamp of 0 means "unset" to
# many ROS tools.
SIMULATED_START_TIME_S = 1_700_000_000


class UserError(Exception):
    """A problem with the user's input: reported as one line, exit status 2."""


def _add_config_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, metavar="FILE",
                        help="rig configuration (YAML), e.g. config/furuta.yaml")
    parser.add_argument("--set", dest="set_values", metavar="NAME=VALUE,...",
                        help="override parameter values, e.g. J_Azz=0.01,tilt=[1,0,0,0]")
    parser.add_argument("--compliance", type=float, metavar="EPS", help=COMPLIANCE_HELP)


def _load_config(args, *, dt=None):
    from mb_estimation.io.config import apply_overrides, load_config, parse_assignments

    config = load_config(args.config)
    set_values = parse_assignments(args.set_values) if args.set_values else None
    return apply_overrides(config, set_values=set_values, compliance=args.compliance, dt=dt)


def _build_parser() -> argparse.ArgumentParser:
    from mb_estimation import __version__
    from mb_estimation.scenarios import SCENARIOS

    parser = argparse.ArgumentParser(
        prog="mb-estimation",
        description="Estimate the parameters and states of a Furuta pendulum rig from joint "
        "angles and motor voltage (joint state and parameter estimation for regularized "
        "time-discrete multibody dynamics).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    simulate = commands.add_parser(
        "simulate",
        help="simulate a scenario and write a rosbag2 bag",
        description="Run the rig model (SPOOK, step --dt) through a scenario and write a "
        "rosbag2 bag readable by ROS 2 Humble and newer: sensor_msgs/JointState on the "
        "configured joint-states topic (names, offset and sign from the config) at --rate, "
        "and the voltage on the configured voltage topic. The ground-truth parameters are "
        "written into the bag folder as ground_truth.yaml (a valid config).",
    )
    simulate.add_argument("scenario", choices=SCENARIOS, metavar="SCENARIO",
                          help=f"one of: {', '.join(SCENARIOS)}")
    _add_config_options(simulate)
    simulate.add_argument("--output", required=True, metavar="BAG", help="bag folder to write")
    simulate.add_argument("--duration", type=float, default=10.0, metavar="S",
                          help="simulated time [s] (default 10)")
    simulate.add_argument("--rate", type=float, metavar="HZ",
                          help="joint-state and voltage sample rate [Hz] (default: config, 1000)")
    simulate.add_argument("--dt", type=float, metavar="H",
                          help="simulation step [s] (default: config, 1e-4)")
    simulate.add_argument("--noise", type=float, metavar="RAD",
                          help="standard deviation of Gaussian angle noise [rad] (default: "
                          "config)")
    simulate.add_argument("--seed", type=int, default=0, metavar="N",
                          help="noise seed (default 0)")
    simulate.add_argument("--encoder-counts", type=int, metavar="N",
                          help="quantise angles to N counts per revolution (default: config)")
    simulate.add_argument("--storage", choices=("sqlite3", "mcap"), default="sqlite3",
                          help="rosbag2 storage plugin (default sqlite3)")
    simulate.add_argument("--overwrite", action="store_true",
                          help="replace an existing bag at --output")
    simulate.set_defaults(handler=_simulate)
    return parser


def _simulate(args) -> int:
    import numpy as np
    import yaml

    from mb_estimation.io.bags import write_rig_bag
    from mb_estimation.rigs import get_rig
    from mb_estimation.simulation import simulate_recording

    config = _load_config(args)
    settings = config.simulation
    dt = args.dt if args.dt is not None else settings.dt
    rate = args.rate if args.rate is not None else settings.rate_hz
    noise = args.noise if args.noise is not None else settings.noise_rad
    counts = args.encoder_counts if args.encoder_counts is not None else settings.encoder_counts
    if noise < 0:
        raise UserError(f"--noise must be non-negative, got {noise}")
    output = Path(args.output)
    if output.exists() and not args.overwrite:
        raise UserError(f"{output} exists; choose another --output or pass --overwrite")

    rig = get_rig(config.rig, config.friction)
    started = time.perf_counter()
    recording = simulate_recording(
        rig, config.parameters, args.scenario, duration_s=args.duration, dt=dt, rate_hz=rate,
        noise_rad=noise, seed=args.seed, encoder_counts=counts,
    )
    elapsed = time.perf_counter() - started

    recording_settings = config.recording
    joints = [recording_settings.joints[name] for name in rig.spec.joints]
    positions = np.stack([joint.to_recorded(recording.measured_angles[:, i])
                          for i, joint in enumerate(joints)], axis=1)
    velocities = np.stack([joint.sign * recording.joint_rates[:, i]
                           for i, joint in enumerate(joints)], axis=1)
    stamps_ns = SIMULATED_START_TIME_S * 10**9 + np.round(recording.time_s * 1e9).astype(np.int64)
    has_input = recording.inputs.shape[1] > 0
    write_rig_bag(
        output,
        joint_time_ns=stamps_ns,
        joint_names=[joint.name for joint in joints],
        joint_positions=positions,
        joint_velocities=velocities,
        joint_states_topic=recording_settings.joint_states_topic,
        voltage_time_ns=stamps_ns if has_input else None,
        voltage=recording.inputs[:, 0] if has_input else None,
        voltage_topic=recording_settings.voltage_topic if has_input else None,
        voltage_type=recording_settings.voltage_type,
        voltage_index=recording_settings.voltage_index,
        storage=args.storage,
        overwrite=args.overwrite,
    )
    header = (
        f"# Ground truth of a simulation by mb-estimation simulate: scenario {args.scenario}, "
        f"duration {args.duration} s, step {dt} s,\n# rate {rate} Hz, noise {noise} rad, "
        f"seed {args.seed}, encoder counts {counts}. A valid config: use it with --config.\n"
    )
    truth = config.to_dict()
    truth["simulation"].update(dt=dt, rate_hz=rate, noise_rad=noise, encoder_counts=counts)
    (output / "ground_truth.yaml").write_text(header + yaml.safe_dump(truth, sort_keys=False))
    steps = int(round(args.duration / dt))
    print(f"simulated {args.scenario}: {args.duration} s in {steps} steps of {dt} s "
          f"({elapsed:.1f} s incl. compilation), {len(recording.time_s)} samples at {rate} Hz "
          f"→ {output}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``mb-estimation``; returns the exit status."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    from mb_estimation.io.bags import BagError
    from mb_estimation.io.config import ConfigError

    try:
        return args.handler(args)
    except (UserError, ConfigError, BagError, ValueError) as error:
        print(f"mb-estimation: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
