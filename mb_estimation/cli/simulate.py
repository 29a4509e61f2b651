"""``mb-estimation simulate`` (a scenario into a bag) and ``demo`` (simulate, then calibrate)."""

from __future__ import annotations

from pathlib import Path

from mb_estimation.cli.common import (
    SCENARIOS,
    SIMULATED_HINGES,
    UserError,
    add_config_options,
    add_hinges_option,
    load_config,
    parse_drifts,
    played_input,
)

DEMO_STEP_S = 2.5e-4  # [s] the rigid model's step (converged: simulation.dt's documentation)
#: What a user frees on a rig: the inertias about the joints, the driver's gain, the frictions.
DEMO_FREE = ("J_Azz", "J_Byy", "K", "b1", "b2")
#: The demo's first guess: round values 25 % to 5× off the truth (Table G.5, K = 1).
DEMO_GUESS = {"J_Azz": 0.005, "J_Byy": 0.005, "K": 0.5, "b1": 0.002, "b2": 0.0005}
#: The demo's experiment, shipped beside the built-in configurations: excite's design for
#: DEMO_FREE at DEMO_GUESS, 5 s at 500 Hz, input bound 0.4 V (the user guide has the command).
DEMO_EXPERIMENT = "excitations/furuta_synthetic_demo/excitation.csv"


def add_simulate(commands) -> None:
    """The simulate command and its options."""
    simulate = commands.add_parser(
        "simulate",
        help="simulate a scenario and write a rosbag2 bag",
        description="Run the rig model the config declares (rigid hinges: the rigid tree in "
        "joint coordinates; compliant hinges: SPOOK), step --dt, through a scenario (or an "
        "input file played from rest, --input) and write a "
        "rosbag2 bag readable by ROS 2 Humble and newer: sensor_msgs/JointState on the "
        "configured joint-states topic (names, offset and sign from the config) at --rate, "
        "and the voltage on the configured voltage topic. The ground-truth parameters are "
        "written into the bag folder as ground_truth.yaml (a valid config).",
    )
    simulate.add_argument("scenario", nargs="?", choices=SCENARIOS, metavar="SCENARIO",
                          help=f"one of: {', '.join(SCENARIOS)}; or --input")
    simulate.add_argument("--input", metavar="FILE",
                          help="play this input instead of a scenario: a time_s,input CSV "
                          "(excite's excitation.csv) at the sample rate, from rest; the "
                          "duration defaults to the file's")
    add_config_options(simulate)
    simulate.add_argument("--output", required=True, metavar="BAG", help="bag folder to write")
    simulate.add_argument("--duration", type=float, metavar="S",
                          help="simulated time [s] (default 10, or the --input file's)")
    simulate.add_argument("--rate", type=float, metavar="HZ",
                          help="joint-state and voltage sample rate [Hz] (default: config, 1000)")
    simulate.add_argument("--dt", type=float, metavar="H",
                          help="simulation step [s] (default: the config's simulation.dt; where "
                               "it does not divide the sample period, the largest step below "
                               "it that does)")
    add_hinges_option(simulate, SIMULATED_HINGES)
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
    simulate.add_argument("--start-time", type=float, metavar="S",
                          help="stamp of the first sample [s since the epoch] (default "
                          "1700000000): recordings of one rig over hours, for track")
    simulate.add_argument("--drift", metavar="NAME=±P%/Ts,...",
                          help="a wearing rig: each named parameter changes by P %% of its "
                          "value every T seconds, linearly (stepped every 512 samples), e.g. "
                          "b1=+20%%/3600s; ground_truth.yaml holds the values at the start")
    simulate.set_defaults(handler=simulate_command)


def add_demo(commands) -> None:
    """The demo command and its options."""
    demo = commands.add_parser(
        "demo", help="simulate a rig, calibrate it from a rough guess, write the report "
        "(built-in defaults)",
        description="Simulate the paper's synthetic Furuta pendulum (config furuta_synthetic, "
        "Table G.5) on rigid hinges, as a rig on ball bearings is, driven by an experiment "
        f"that excite designed for {', '.join(DEMO_FREE)} at a rough first guess, recorded "
        "with angle noise; then calibrate those parameters through the default path from the "
        "guess, print truth beside estimate ± std and the verdict, and write "
        "DIR/parameters.yaml and DIR/report.html.")
    demo.add_argument("--output", default="mb_estimation_demo", metavar="DIR",
                      help="output folder (default mb_estimation_demo)")
    demo.add_argument("--input", metavar="FILE",
                      help="an excitation.csv to play instead (from excite; recorded at its "
                      "rate; default: the shipped design, 5 s at 500 Hz)")
    demo.add_argument("--duration", type=float, metavar="S",
                      help="simulated time [s] (default: the input's length)")
    demo.add_argument("--quiet", action="store_true", help="no progress output")
    demo.set_defaults(handler=demo_command)


def print_simulated(bag) -> None:
    """What was simulated, in how long, into which bag."""
    print(f"simulated {bag.scenario}: {bag.duration_s} s in {bag.steps} steps of {bag.dt:.6g} s "
          f"({bag.elapsed_s:.1f} s incl. compilation), {bag.samples} samples at {bag.rate_hz} "
          f"Hz → {bag.path}")


def simulate_command(args) -> int:
    """Simulate the scenario (or the played --input) into the bag of --output."""
    from mb_estimation.api import write_simulated_bag

    config = load_config(args)
    if args.noise is not None and args.noise < 0:
        raise UserError(f"--noise must be non-negative, got {args.noise}")
    if (args.scenario is None) == (args.input is None):
        raise UserError("give a SCENARIO or --input FILE (one of them)")
    output = Path(args.output)
    if output.exists() and not args.overwrite:  # before the simulation, not after it
        raise UserError(f"{output} exists; choose another --output or pass --overwrite")
    scenario, rate = args.scenario, args.rate
    duration = args.duration if args.duration is not None else 10.0
    if args.input is not None:
        scenario, rate, duration = played_input(args.input, config, rate_hz=args.rate,
                                                   duration_s=args.duration)
    print_simulated(write_simulated_bag(
        config, scenario, output, duration_s=duration, dt=args.dt,
        rate_hz=rate, noise_rad=args.noise, seed=args.seed,
        encoder_counts=args.encoder_counts, storage=args.storage, overwrite=args.overwrite,
        drifts=parse_drifts(args.drift),
        **({} if args.start_time is None else {"start_time_s": args.start_time})))
    return 0


def demo_command(args) -> int:
    """Simulate furuta_synthetic on rigid hinges under a designed input; calibrate it."""
    from mb_estimation.api import calibrate, write_simulated_bag
    from mb_estimation.cli.printing import (
        fit_progress,
        print_calibration,
        print_set_up,
        print_written,
    )
    from mb_estimation.config import apply_overrides, builtin_file
    from mb_estimation.config import load_config as load_named_config
    from mb_estimation.io.excitation_files import read_prediction
    from mb_estimation.io.files import writable_folder
    from mb_estimation.numerics import compiling_meanwhile
    from mb_estimation.setup import compile_ahead

    if args.duration is not None and args.duration <= 0:
        raise UserError(f"--duration must be positive, got {args.duration}")
    design = Path(args.input) if args.input is not None else builtin_file(DEMO_EXPERIMENT)
    truth = apply_overrides(load_named_config("furuta_synthetic"), hinges="rigid")
    scenario, rate, duration = played_input(design, truth, duration_s=args.duration)
    prediction = read_prediction(design)
    output = writable_folder(args.output)  # once the input is known to be readable
    bag = output / "experiment_bag"
    predicted = "" if prediction is None else (
        f": predicted worst relative std {100 * prediction[0]:.3g} % against "
        f"{100 * prediction[1]:.3g} % for a multisine at the same bound")
    what = (design if args.input is not None else "the input excite designed for "
            f"{', '.join(DEMO_FREE)} at the rough guess the calibration starts from")
    print(f"1/3 the experiment: {what}, {duration:g} s at {rate:g} Hz{predicted}")
    noise = truth.simulation.noise_rad
    print(f"2/3 simulating the rig (config furuta_synthetic on rigid hinges, step "
          f"{DEMO_STEP_S:g} s) driven by it, recorded at {rate:g} Hz with {noise:g} rad of "
          f"angle noise → {bag}")
    config = apply_overrides(truth, free=list(DEMO_FREE), set_values=DEMO_GUESS)
    # the fit's model compiles on the other core while the rig is simulated
    with compiling_meanwhile(compile_ahead, config):
        print_simulated(write_simulated_bag(truth, scenario, bag, duration_s=duration,
                                            dt=DEMO_STEP_S, rate_hz=rate, noise_rad=noise,
                                            overwrite=True))
        guess = ", ".join(f"{name} {value:g}" for name, value in DEMO_GUESS.items())
        print(f"3/3 calibrating {', '.join(DEMO_FREE)} from a rough guess ({guess}) through "
              "the default path: the joint fit, then the simulation-error fit")
        calibration = calibrate(config, [bag], output,
                                progress=fit_progress(args.quiet, config),
                                on_set_up=None if args.quiet else print_set_up)
    print_calibration(calibration, truth.parameters, notes=args.quiet)
    print_written(output, calibration)
    return 0
