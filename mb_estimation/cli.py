"""The ``mb-estimation`` command (DESIGN §6): a thin shell over the pipeline functions.

Every failure the user can cause (a bad config, a bad path, an impossible option) ends with one
line ``mb-estimation: error: …`` on stderr and a non-zero exit status, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

COMPLIANCE_HELP = "set every hinge compliance (linear and rotational) to EPS"
# Bags start at this wall-clock time [s since the Unix epoch]: a stamp of 0 means "unset" to
# many ROS tools.
SIMULATED_START_TIME_S = 1_700_000_000
# rig-sim and replay wait this long [s] for a subscriber on each of their topics before
# publishing, so that the first messages are not lost to discovery.
SUBSCRIBER_WAIT_S = 2.0


class UserError(Exception):
    """A problem with the user's input: reported as one line, exit status 2."""


def _add_recordings_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bags", nargs="+", metavar="BAG",
                        help="rosbag2 folder(s) or .db3/.mcap files, or PlotJuggler CSV exports")


def _add_config_options(parser: argparse.ArgumentParser, *, compliance: bool = True) -> None:
    parser.add_argument("--config", required=True, metavar="FILE",
                        help="rig configuration (YAML), e.g. config/furuta.yaml")
    parser.add_argument("--set", dest="set_values", metavar="NAME=VALUE,...",
                        help="override parameter values, e.g. J_Azz=0.01,tilt=[1,0,0,0]")
    if compliance:
        parser.add_argument("--compliance", type=float, metavar="EPS", help=COMPLIANCE_HELP)


def _add_free_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--free", metavar="NAME,NAME,...",
                        help="replace the config's free parameters, e.g. J_Azz,J_Byy,b1,b2")


# mb_estimation.config.REFINEMENT_MODES, spelled out: `--help` imports nothing of the package
# (test_config.py checks that both agree)
REFINEMENT_MODES = ("auto", "on", "off")

ESTIMATOR_HELP = (
    "consistent (default: joint coordinates in the rigid limit, second-order step refined "
    "from 2h to h, estimates that converge to the physical values) or paper (the paper's "
    "single fit in maximal coordinates at step h, kept for comparison)")


def _add_step_and_weight_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dt", type=float, metavar="H",
                        help="estimation step h [s] (consistent: the finest step; default the "
                        "recording's sample period; paper: default the config's method.dt)")
    parser.add_argument("--kappa", type=float, metavar="K",
                        help="state error weight κ (consistent: read at h = 0.01 s and scaled "
                        "as κ·0.01 s/h per step)")


def _add_method_options(parser: argparse.ArgumentParser, *, single_values: bool = True) -> None:
    """--estimator, --free, --max-iterations, --start, --end, --quiet (and --dt, --kappa)."""
    parser.add_argument("--estimator", choices=("consistent", "paper"),
                        help=f"{ESTIMATOR_HELP} (default: the config's method.estimator)")
    parser.add_argument("--simulation-refinement", nargs="?", const="on",
                        choices=REFINEMENT_MODES, metavar="{auto,on,off}",
                        help="consistent path: then fit the parameters through the config's "
                        "own simulator (its hinges, simulation.dt) by multiple shooting, for "
                        "rigs whose hinges are compliant and damped as the config declares. "
                        "on (the bare flag): always; auto: only when the rigid-hinge fit does "
                        "not predict the recordings, kept when it predicts better; off: never "
                        "(slower when it runs; default: the config's "
                        "method.simulation_refinement, built in off)")
    _add_free_option(parser)
    if single_values:
        _add_step_and_weight_options(parser)
    parser.add_argument("--max-iterations", type=int, metavar="N",
                        help="Levenberg–Marquardt iteration limit")
    parser.add_argument("--start", type=float, metavar="S",
                        help="skip the first S seconds of each recording")
    parser.add_argument("--end", type=float, metavar="S",
                        help="use each recording up to S seconds from its start")
    parser.add_argument("--quiet", action="store_true", help="no progress output")


def _number_list(text: str) -> tuple[float, ...]:
    """``"1,10,1e2"`` → ``(1.0, 10.0, 100.0)`` (argparse type: positive numbers)."""
    try:
        values = tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected numbers separated by commas, got {text!r}") from None
    if not values or not all(v > 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive numbers, got {text!r}")
    return values


#: The option behind each of apply_overrides' arguments: messages name it before the config key.
OVERRIDE_FLAGS = {"free": "--free", "set_values": "--set", "compliance": "--compliance",
                  "dt": "--dt", "kappa": "--kappa", "max_iterations": "--max-iterations",
                  "estimator": "--estimator", "simulation_refinement": "--simulation-refinement"}


def _load_config(args, *, dt_is_estimation_step: bool = True):
    """The config of --config with the command line's overrides.

    ``--dt`` is the estimation step (method.dt) except for simulate and rig-sim, where it is the
    simulation step and leaves the config's method alone.
    """
    from mb_estimation.config import (
        apply_overrides,
        load_config,
        parse_assignments,
        parse_free_list,
    )

    config = load_config(args.config)
    set_values = {}
    if getattr(args, "parameters", None):
        set_values.update(_fitted_values(args.parameters, config))
    if args.set_values:
        set_values.update(parse_assignments(args.set_values))
    free = parse_free_list(args.free) if getattr(args, "free", None) else None
    return apply_overrides(config, set_values=set_values or None, compliance=args.compliance,
                           dt=getattr(args, "dt", None) if dt_is_estimation_step else None,
                           kappa=getattr(args, "kappa", None), free=free,
                           max_iterations=getattr(args, "max_iterations", None),
                           estimator=getattr(args, "estimator", None),
                           simulation_refinement=getattr(args, "simulation_refinement", None),
                           sources=OVERRIDE_FLAGS)


def _fitted_values(path, config) -> dict:
    """The values of a parameters.yaml from calibrate (or its folder) for the config's rig."""
    from mb_estimation.io.results import read_parameters

    path = Path(path)
    if path.is_dir():
        path = path / "parameters.yaml"
    if not path.is_file():
        raise UserError(f"{path}: no such parameters file (calibrate writes DIR/parameters.yaml)")
    rig, values = read_parameters(path)
    if rig is not None and rig != config.rig:
        raise UserError(f"{path} holds parameters of a {rig} rig, but the config is for a "
                        f"{config.rig} rig")
    return {name: value for name, value in values.items() if name in config.parameters}


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
    simulate.add_argument("--parameters", metavar="FILE",
                          help="parameters.yaml from calibrate (or its folder): simulate the "
                          "fitted model; --set still overrides")
    simulate.add_argument("--storage", choices=("sqlite3", "mcap"), default="sqlite3",
                          help="rosbag2 storage plugin (default sqlite3)")
    simulate.add_argument("--overwrite", action="store_true",
                          help="replace an existing bag at --output")
    simulate.set_defaults(handler=_simulate)

    calibrate = commands.add_parser(
        "calibrate", help="estimate parameters and states from bags",
        description="Joint state and parameter estimation (Levenberg–Marquardt on inverse-"
        "dynamics and observation residuals) from one or several bags: one parameter vector, "
        "separate states per bag. By default the consistent path (the hinges' rigid limit, "
        "steps 2h then h; each value's change between them is printed and written). Validates "
        "the fit by predicting 0.5 s ahead from the estimated states and by an open-loop "
        "replay, and writes parameters.yaml, ros_parameters.yaml, states.csv and report.html "
        "(figures in figures/) into --output. Exit status 0 when the fit converged or reached "
        "its iteration limit, 1 when it stopped without progress (files written all the "
        "same), 2 for an error in the input.")
    _add_recordings_argument(calibrate)
    _add_config_options(calibrate)
    _add_method_options(calibrate)
    calibrate.add_argument("--output", required=True, metavar="DIR", help="output folder")
    calibrate.set_defaults(handler=_calibrate)

    crossval = commands.add_parser(
        "crossval", help="score parameters on recordings (state-only estimation)",
        description="Cross-validation (paper §4.5): with the parameters fixed, estimate only "
        "the states of each recording; its MSE is the score. Writes crossval.yaml with "
        "--output.")
    _add_recordings_argument(crossval)
    _add_config_options(crossval)
    _add_method_options(crossval)
    crossval.add_argument("--parameters", metavar="FILE",
                          help="parameters.yaml from calibrate, or its folder (default: the "
                          "config's values)")
    crossval.add_argument("--output", metavar="DIR", help="folder for crossval.yaml")
    crossval.set_defaults(handler=_crossval)

    sweep = commands.add_parser(
        "sweep", help="fit over a grid of method parameters (κ, h, compliance)",
        description="Calibrate at every combination of the given state error weights κ, steps "
        "h and hinge compliances (each fit from the config's values) and tabulate and plot "
        "the free parameters, the observation MSE and the impulse MSE against each (the "
        "paper's Figures 4, 6, 7), to choose the method parameters for a rig. Writes sweep.csv "
        "and sweep_<setting>.png into --output. A new h compiles anew (tens of seconds).")
    _add_recordings_argument(sweep)
    _add_config_options(sweep, compliance=False)
    _add_method_options(sweep, single_values=False)
    sweep.add_argument("--kappa", type=_number_list, metavar="K,K,...",
                       help="state error weights κ (default: the config's)")
    sweep.add_argument("--dt", type=_number_list, metavar="H,H,...",
                       help="estimation steps h [s] (default: the config's)")
    sweep.add_argument("--compliance", type=_number_list, metavar="EPS,EPS,...",
                       help="hinge compliances, each set on every hinge (default: the config's)")
    sweep.add_argument("--output", required=True, metavar="DIR", help="output folder")
    sweep.set_defaults(handler=_sweep)

    node = commands.add_parser(
        "node", help="run the online estimator node (ROS 2 or bare DDS)",
        description="Estimate the parameters online: windows of the live joint states and "
        "voltage (config section node: window_s, stride_s, ...) are estimated in the "
        "background, warm-started from the last accepted window, and fused. Publishes "
        "/NAME/parameters, /NAME/fused_parameters, /NAME/shadow_joint_states, "
        "/NAME/filtered_joint_states and /diagnostics (NAME: node.name, default mb_estimator). "
        "--transport dds speaks the ROS 2 wire format over Cyclone DDS without a ROS install "
        "(ROS_DOMAIN_ID and CYCLONEDDS_URI honoured); --transport ros needs rclpy. Runs until "
        "Ctrl-C or --duration.")
    _add_config_options(node)
    _add_free_option(node)
    _add_step_and_weight_options(node)
    _add_transport_options(node)
    node.add_argument("--duration", type=float, metavar="S",
                      help="stop after S seconds (default: run until Ctrl-C)")
    node.set_defaults(handler=_node)

    rig_sim = commands.add_parser(
        "rig-sim", help="publish a simulated rig's joint states and voltage in real time",
        description="Simulate the rig of --config through a scenario (repeated until "
        "--duration, default forever) and publish its joint states and voltage on the "
        "config's topics in real time, as the rig's driver would: for trying the node "
        "without the rig.")
    _add_config_options(rig_sim)
    rig_sim.add_argument("--scenario", required=True, choices=SCENARIOS, metavar="NAME",
                         help=f"one of: {', '.join(SCENARIOS)}")
    rig_sim.add_argument("--rate", type=float, metavar="HZ",
                         help="sample rate [Hz] (default: config, 1000)")
    rig_sim.add_argument("--duration", type=float, metavar="S",
                         help="simulated time [s] (default: forever)")
    rig_sim.add_argument("--dt", type=float, metavar="H",
                         help="simulation step [s] (default: config, 1e-4)")
    _add_transport_options(rig_sim)
    rig_sim.set_defaults(handler=_rig_sim)

    replay = commands.add_parser(
        "replay", help="play a bag's joint states and voltage like ros2 bag play",
        description="Publish the JointState, Float64 and Float64MultiArray messages of a "
        "rosbag2 bag in their recorded timing (header stamps kept), scaled by --rate; "
        "--loop starts over at the end (the stamps jump back, as with ros2 bag play --loop).")
    replay.add_argument("bag", metavar="BAG", help="rosbag2 folder or .db3/.mcap file")
    replay.add_argument("--rate", type=float, default=1.0, metavar="X",
                        help="speed factor (default 1; 0: as fast as possible)")
    replay.add_argument("--loop", action="store_true", help="replay forever")
    _add_transport_options(replay)
    replay.set_defaults(handler=_replay)

    demo = commands.add_parser(
        "demo", help="simulate a swing-up, calibrate from it, write the report (built-in "
        "defaults)",
        description="Simulate a 10 s swing-up with config furuta_synthetic (Table G.5 as the "
        "paper simulated it: hinge compliance 1e-6, step 1e-4 s, noise 0.001 rad) recorded at "
        "500 Hz, then estimate the 13 parameters of paper §4.6 through the consistent path "
        "from Table 1's initial values, print truth vs estimate ± std and write "
        "DIR/report.html.")
    demo.add_argument("--output", default="mb_estimation_demo", metavar="DIR",
                      help="output folder (default mb_estimation_demo)")
    demo.add_argument("--duration", type=float, default=10.0, metavar="S",
                      help="simulated time [s] (default 10)")
    demo.add_argument("--quiet", action="store_true", help="no progress output")
    demo.set_defaults(handler=_demo)
    return parser


def _add_transport_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--transport", choices=("dds", "ros"), default="dds",
                        help="dds: bare Cyclone DDS in the ROS 2 wire format (default); ros: "
                        "rclpy (a sourced ROS 2 install)")
    parser.add_argument("--domain-id", type=int, metavar="N",
                        help="DDS domain, as ROS_DOMAIN_ID (default: $ROS_DOMAIN_ID, else 0)")


def _dds_bus(args):
    """A DDS bus on the domain of --domain-id (else $ROS_DOMAIN_ID, else 0)."""
    try:
        from cyclonedds.core import DDSException

        from mb_estimation.transport.dds_bus import DdsBus
    except ImportError:
        raise UserError("--transport dds needs the cyclonedds package: pip install "
                        "'mb_estimation[dds]'") from None
    try:
        return DdsBus(args.domain_id)
    except (DDSException, RuntimeError) as error:
        raise UserError(f"cannot start DDS (check CYCLONEDDS_URI and --domain-id): "
                        f"{str(error).strip() or type(error).__name__}") from None


def _ros_transport(args):
    """The rclpy transport, on the domain of --domain-id if given."""
    try:
        import rclpy  # noqa: F401
    except ImportError:
        raise UserError("--transport ros needs rclpy: source a ROS 2 installation or "
                        "pip install 'mb_estimation[ros]', or use --transport dds") from None
    if args.domain_id is not None:
        os.environ["ROS_DOMAIN_ID"] = str(args.domain_id)
    from mb_estimation.transport import ros_node
    return ros_node


def _stop_on_signals():
    """An event set by SIGINT/SIGTERM (Ctrl-C ends long-running commands cleanly)."""
    import signal
    import threading

    stop = threading.Event()
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, lambda *_: stop.set())
    return stop


def _progress(args):
    if getattr(args, "quiet", False):
        return None

    def show(entry):
        print(f"  iteration {entry.iteration:3d}: cost {entry.cost:.4e} (observation "
              f"{entry.observation_mse:.3e}, impulse {entry.impulse_mse:.3e}), "
              f"|g| {entry.gradient_norm:.3g}, {entry.elapsed_s:.1f} s", flush=True)
    return show


def _check_bags(paths):
    for path in paths:
        if not Path(path).exists():
            raise UserError(f"{path}: no such recording (a bag folder, .db3/.mcap file or "
                            "PlotJuggler .csv export)")


def _print_parameters(result, truth=None):
    import numpy as np

    for name in result.free:
        value = np.ravel(result.parameters[name])
        std = np.ravel(result.std[name])
        text = " ".join(f"{v:.6g}" for v in value)
        spread = " ".join(f"{s:.2g}" for s in std)
        line = f"  {name:8s} {text} ± {spread}"
        if truth is not None:
            line += f"   (truth {' '.join(f'{v:.6g}' for v in np.ravel(truth[name]))})"
        if not result.excited[name]:
            line += "   not excited"
        print(line)


def _notes(recordings, grids) -> list[str]:
    """What reading did to each recording (stamps, dropped samples, gaps, trimming)."""
    notes = []
    for recording, grid in zip(recordings, grids, strict=True):
        notes += [f"{recording.name}: {note}" for note in recording.notes]
        unobserved = int(len(grid.observed) - grid.observed.sum())
        if unobserved:
            notes.append(f"{recording.name}: {unobserved} of {len(grid.observed)} estimation "
                         "steps fall in gaps between samples: bridged, without observations")
    return notes


def _print_open_loop(checks):
    """The fitted model replayed open loop on each recording's input (validation)."""
    print("open-loop replay from the estimated initial state, RMS angle error [rad] "
          "(arm, pendulum):")
    for check in checks:
        first = ", ".join(f"{v:.3g}" for v in check.rms_first)
        whole = ", ".join(f"{v:.3g}" for v in check.rms_all)
        print(f"  {check.name}: first {check.first_s:g} s ({first}), all "
              f"{check.time_s[-1] - check.time_s[0]:.3g} s ({whole})")


def _level_started(args, config):
    """Progress line at the start of each fit (each refinement level of the consistent path)."""
    if getattr(args, "quiet", False):
        return None
    free = f"{len(config.free)} parameters ({', '.join(config.free)}) and the states"
    if config.method.estimator == "paper":
        def show(index, dt, problem):
            steps = sum(g.num_steps for g in problem.recordings)
            print(f"calibrating {free} of {len(problem.recordings)} recording(s), the paper's "
                  f"single fit: {steps} steps of {dt:g} s")
        return show
    levels = config.method.refinement_levels

    def show_level(index, dt, problem):
        if index == levels:
            print(f"refining the parameters through the simulator (step {dt:g} s, multiple "
                  f"shooting over segments of {config.method.simulation_segment_s:g} s, "
                  "lengthened while the simulator follows the data)", flush=True)
            return
        steps = sum(g.num_steps for g in problem.recordings)
        print(f"calibrating {free} of {len(problem.recordings)} recording(s), consistent "
              f"path level {index + 1} of {levels}: {steps} steps of {dt:g} s", flush=True)
    return show_level


def _simulation_progress(args):
    """Progress line per iteration of the simulation refinement."""
    if getattr(args, "quiet", False):
        return None

    def show(iteration, cost, values):
        shown = ", ".join(f"{name} {value:.6g}" for name, value in values.items())
        print(f"  shooting iteration {iteration:3d}  angle MSE {cost:.6g} rad²  {shown}",
              flush=True)
    return show


def _print_refinement(result):
    """How far each free parameter moved over the consistent path's last two steps."""
    import numpy as np

    from mb_estimation.estimation.consistent import step_dependence

    rows = step_dependence(result)
    if not rows:
        return
    coarse, fine = result.refinement[-2], result.refinement[-1]
    if fine.formulation == "simulation":
        print(f"the rigid fit (h = {coarse.dt:g} s) → through the simulator "
              f"(step {fine.dt:g} s):")
        moved = "MOVED: the rigid model's value was a shadow of its hinges"
    else:
        print(f"step dependence (h = {coarse.dt:g} s → {fine.dt:g} s):")
        moved = "STILL MOVES with the step: a shadow value"
    for row in rows:
        change = " ".join(f"{v:+.3g}" for v in row.change)
        with np.errstate(divide="ignore", invalid="ignore"):
            sigmas = " ".join(f"{v:.2g}" for v in np.abs(row.change) / row.std)
        print(f"  {row.name:8s} change {change} ({sigmas} std): "
              f"{'settled' if row.settled else moved}")


def _print_predictions(checks):
    """RMS error of the short-horizon predictions at the longest lead time."""
    for check in checks:
        if not check.starts:
            continue
        errors = ", ".join(f"{v:.3g}" for v in check.rms[-1])
        print(f"prediction {check.horizons_s[-1]:g} s ahead from {check.starts} estimated "
              f"states, RMS angle error [rad] (arm, pendulum): {errors} ({check.name})")


def _run_calibration(config, bags, args, output: Path, truth=None):
    """Read, prepare, estimate, validate, write the outputs and the report, print the summary."""
    from mb_estimation import pipeline
    from mb_estimation.io.recordings import read_recording
    from mb_estimation.io.results import write_outputs
    from mb_estimation.report import write_report

    recordings = [read_recording(path, config) for path in bags]
    start, end = getattr(args, "start", None), getattr(args, "end", None)
    notes = _notes(recordings, pipeline.prepare(config, recordings, start_s=start, end_s=end))
    for note in notes:
        print(f"note: {note}")
    calibration = pipeline.calibrate_recordings(
        config, recordings, start_s=start, end_s=end, progress=_progress(args),
        level_started=_level_started(args, config),
        simulation_progress=_simulation_progress(args))
    result, grids = calibration.result, calibration.grids
    method = pipeline.method_summary(config, result)
    print(result.message)
    _print_parameters(result, truth)
    _print_refinement(result)
    predictions = (calibration.predictions if calibration.predictions is not None
                   else pipeline.prediction_checks(config, grids, result))
    _print_predictions(predictions)
    advice = calibration.note or pipeline.prediction_advice(config, grids, result, predictions)
    if advice:
        print(f"note: {advice}")
    write_outputs(output, result, config.rig_spec, method, predictions=predictions)
    checks = pipeline.open_loop_checks(config, grids, result)
    _print_open_loop(checks)
    write_report(output, result, grids, checks, method=method, notes=notes,
                 units={name: config.rig_spec.parameter(name).unit for name in result.free},
                 predictions=predictions)
    print(f"wrote {output}/parameters.yaml, ros_parameters.yaml, states.csv, report.html "
          f"({result.compile_time_s:.1f} s compiling, {result.solve_time_s:.1f} s solving)")
    return result


def _calibrate(args) -> int:
    _check_bags(args.bags)
    config = _load_config(args)
    result = _run_calibration(config, args.bags, args, Path(args.output))
    from mb_estimation.estimation.result import FitStatus

    return 0 if result.converged or result.status == FitStatus.MAX_ITERATIONS else 1


def _crossval(args) -> int:
    import yaml

    from mb_estimation import pipeline
    from mb_estimation.io.recordings import read_recording

    _check_bags(args.bags)
    config = _load_config(args)
    rows = []
    for path in args.bags:
        result = pipeline.calibrate_recordings(
            config, [read_recording(path, config)], start_s=args.start, end_s=args.end,
            estimate_parameters=False, progress=_progress(args)).result
        rows.append({"path": str(path), "mse": result.cost,
                     "observation_mse": result.observation_mse,
                     "impulse_mse": result.impulse_mse})
        print(f"{path}: CV {result.cost:.4e} (observation {result.observation_mse:.3e}, "
              f"impulse {result.impulse_mse:.3e}), {result.message}")
    mean = sum(r["mse"] for r in rows) / len(rows)
    print(f"mean CV score {mean:.4e}")
    if args.output:
        Path(args.output).mkdir(parents=True, exist_ok=True)
        (Path(args.output) / "crossval.yaml").write_text(
            yaml.safe_dump({"recordings": rows, "mean_mse": mean}, sort_keys=False))
    return 0


def _sweep(args) -> int:
    from mb_estimation import pipeline
    from mb_estimation.io.recordings import read_recording
    from mb_estimation.report.sweep import sweep_rows, write_sweep

    _check_bags(args.bags)
    settings = argparse.Namespace(**{**vars(args), "kappa": None, "dt": None,
                                     "compliance": None})
    config = _load_config(settings)
    recordings = [read_recording(path, config) for path in args.bags]
    for note in _notes(recordings, pipeline.prepare(config, recordings, start_s=args.start,
                                                    end_s=args.end)):
        print(f"note: {note}")
    default_dt = (config.method.dt if config.method.estimator == "paper"
                  else pipeline.consistent_steps(config, recordings)[-1])
    dts = args.dt or (default_dt,)
    kappas = args.kappa or (config.method.kappa,)
    compliances = args.compliance or (None,)
    total = len(dts) * len(kappas) * len(compliances)
    print(f"sweep: {total} fits of {', '.join(config.free)} (h {', '.join(map(str, dts))}; "
          f"κ {', '.join(map(str, kappas))}; compliance "
          f"{', '.join(map(str, args.compliance)) if args.compliance else 'from the config'})")
    done = []

    def show(point):
        done.append(point)
        if not args.quiet:
            result = point.result
            print(f"  {len(done)}/{total} h {point.dt:g}, κ {point.kappa:g}, compliance "
                  f"{'config' if point.compliance is None else f'{point.compliance:g}'}: "
                  f"{result.status} after {result.iterations} iterations, cost "
                  f"{result.cost:.3e} ({result.wall_time_s:.1f} s)", flush=True)

    points = pipeline.sweep(config, recordings, dts=dts, kappas=kappas,
                            compliances=compliances, start_s=args.start, end_s=args.end,
                            progress=show)
    rows = sweep_rows(points)
    columns = [c for c in rows[0] if c not in ("cost", "solve_time_s")]
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(f"{v:.4g}" if isinstance(v, float) else str(v)
                                for v in (row[c] for c in columns)) + " |")
    written = write_sweep(Path(args.output), points,
                          {name: config.rig_spec.parameter(name).unit for name in config.free})
    print("wrote " + ", ".join(str(path) for path in written))
    return 0


def _node(args) -> int:
    config = _load_config(args)
    if args.transport == "ros":
        return _ros_node(args)
    bus = _dds_bus(args)
    try:
        from mb_estimation.transport.dds_node import DdsNode

        node = DdsNode(config, bus)
    except BaseException:
        bus.close()
        raise
    stop = _stop_on_signals()
    name = config.node.name
    print(f"{name}: estimating {', '.join(config.free)} on windows of {config.node.window_s:g} s "
          f"every {config.node.stride_s:g} s (DDS domain {node.bus.domain_id}); compiling...",
          flush=True)
    try:
        warm_up_s = node.start()
        print(f"{name}: ready after {warm_up_s:.1f} s; listening on "
              f"{', '.join(_input_topics(config))}", flush=True)
        started = time.monotonic()
        reported = 0
        while not stop.wait(0.2):
            snapshot = node.core.diagnostics()
            if snapshot["windows_done"] != reported:
                reported = snapshot["windows_done"]
                fused = node.core.fused
                values = "" if fused is None else ", fused " + ", ".join(
                    f"{n} {float(v[0]):.5g}" for n, v in fused.values.items() if v.size == 1)
                print(f"{name}: window {snapshot.get('last_window', '')} "
                      f"({snapshot.get('last_window_s', 0.0):.2f} s){values}", flush=True)
            if args.duration is not None and time.monotonic() - started >= args.duration:
                break
    finally:
        node.close()
    return 0


def _ros_node(args) -> int:
    """``node --transport ros``: estimator_node with the command line as ROS parameters."""
    if args.dt is not None or args.kappa is not None or args.duration is not None:
        raise UserError("--dt, --kappa and --duration are not available with --transport ros: "
                        "set method.dt/method.kappa in the config, stop with Ctrl-C")
    ros_node = _ros_transport(args)
    config = Path(args.config).resolve() if Path(args.config).exists() else args.config
    parameters = [f"config:={config}"]
    if args.free:
        parameters.append(f"free:={args.free}")
    if args.set_values:
        parameters.append(f"set:={args.set_values}")
    if args.compliance is not None:
        parameters.append(f"compliance:={args.compliance}")
    argv = ["estimator_node", "--ros-args"]
    for parameter in parameters:
        argv += ["-p", parameter]
    return ros_node.main(argv)


def _input_topics(config) -> list[str]:
    """The topics the node subscribes to, for its start-up line."""
    from mb_estimation.message_types import JOINT_STATE

    recording = config.recording
    topics = [recording.joint_states_topic]
    if config.rig_spec.inputs and recording.voltage_type != JOINT_STATE:
        topics.append(recording.voltage_topic)
    return topics


def _play(args, messages, speed: float, topics=None) -> int:
    from mb_estimation.transport.players import DdsSink, play

    stop = _stop_on_signals()
    if args.transport == "ros":
        stats = _ros_transport(args).run_ros_player(messages, speed, topics=topics, stop=stop,
                                                    wait_s=SUBSCRIBER_WAIT_S)
    else:
        with _dds_bus(args) as bus:
            sink = DdsSink(bus)
            if topics:  # publishers first, so that the first messages are not lost to discovery
                for topic, kind in topics.items():
                    sink.publisher(topic, kind)
                sink.wait_for_subscribers(1, timeout=SUBSCRIBER_WAIT_S)
            stats = play(messages, sink, rate=speed, stop=stop)
    print(f"published {stats.messages} messages over {stats.wall_s:.1f} s "
          f"(stream {stats.stream_s:.1f} s, at most {stats.max_lateness_s * 1e3:.1f} ms late)")
    return 0


def _rig_sim(args) -> int:
    import dataclasses

    from mb_estimation.transport.players import rig_sim_messages, rig_sim_topics

    config = _load_config(args, dt_is_estimation_step=False)
    if args.dt is not None:
        config = dataclasses.replace(
            config, simulation=dataclasses.replace(config.simulation, dt=args.dt))
    messages = rig_sim_messages(config, args.scenario, duration_s=args.duration,
                                rate_hz=args.rate)
    print(f"rig-sim: {args.scenario} on {config.recording.joint_states_topic} and "
          f"{config.recording.voltage_topic} "
          f"({'forever' if args.duration is None else f'{args.duration:g} s'}); simulating...",
          flush=True)
    return _play(args, messages, speed=1.0, topics=rig_sim_topics(config))


def _replay(args) -> int:
    from mb_estimation.transport.players import bag_messages, bag_topics

    _check_bags([args.bag])
    if args.rate < 0:
        raise UserError(f"--rate must be non-negative, got {args.rate}")
    # publishers first, waiting for subscribers: the first messages are not lost to discovery
    return _play(args, bag_messages(args.bag, loop=args.loop), speed=args.rate,
                 topics=bag_topics(args.bag))


DEMO_RATE_HZ = 500.0  # the demo's sample rate [Hz]


def _demo(args) -> int:
    from mb_estimation import pipeline
    from mb_estimation.config import load_config

    output = Path(args.output)
    bag = output / "swingup_bag"
    initial = load_config("furuta")
    # Table G.5 as the paper simulated it (stiff, damped hinges, ε = 1e-6, step 1e-4 s),
    # recorded at 500 Hz: data the estimator's model did not produce, as from a rig. The
    # consistent path (the default) recovers the excited parameters from it; the paper's single
    # fit would give shadow values of its own step (benchmarks/RESULTS.md).
    truth = load_config("furuta_synthetic")
    rate, step = DEMO_RATE_HZ, truth.simulation.dt
    print(f"1/2 simulating a {args.duration} s swing-up (config furuta_synthetic: hinge "
          f"compliance {truth.parameters['eps_lin1']:g}, step {step:g} s; {rate:g} Hz, noise "
          f"{truth.simulation.noise_rad:g} rad) → {bag}")
    _simulate(argparse.Namespace(
        scenario="swingup", config="furuta_synthetic", set_values=None, compliance=None,
        output=str(bag), duration=args.duration, rate=rate, dt=step, noise=None, seed=0,
        encoder_counts=None, storage="sqlite3", overwrite=True, parameters=None))
    config = pipeline.starting_from(truth, initial)
    print("2/2 calibrating from Table 1's initial values (config furuta)")
    _run_calibration(config, [bag], args, output, truth.parameters)
    return 0


def _simulate(args) -> int:
    import numpy as np
    import yaml

    from mb_estimation.io.bags import write_rig_bag
    from mb_estimation.pipeline import config_rig
    from mb_estimation.signals import recorded_joint_states
    from mb_estimation.simulation import simulate_recording

    config = _load_config(args, dt_is_estimation_step=False)
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

    rig = config_rig(config)
    started = time.perf_counter()
    recording = simulate_recording(
        rig, config.parameters, args.scenario, duration_s=args.duration, dt=dt, rate_hz=rate,
        noise_rad=noise, seed=args.seed, encoder_counts=counts,
    )
    elapsed = time.perf_counter() - started

    recording_settings = config.recording
    joints = [recording_settings.joints[name] for name in rig.spec.joints]
    positions, velocities = recorded_joint_states(joints, recording.measured_angles,
                                                  recording.joint_rates)
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
    from mb_estimation.numerics import enable_compilation_cache

    enable_compilation_cache()
    from mb_estimation.config import ConfigError
    from mb_estimation.io.bags import BagError

    try:
        return args.handler(args)
    except (UserError, ConfigError, BagError, ValueError) as error:
        print(f"mb-estimation: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
