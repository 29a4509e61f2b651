"""``mb-estimation calibrate``: estimate parameters and states from recordings."""

from __future__ import annotations

from pathlib import Path

from mb_estimation.cli.common import (
    add_config_options,
    add_method_options,
    add_recordings_argument,
    check_bags,
    load_config,
)
from mb_estimation.errors import UserError


def add_calibrate(commands) -> None:
    """The calibrate command and its options."""
    calibrate = commands.add_parser(
        "calibrate", help="estimate parameters and states from bags",
        description="Joint state and parameter estimation (Levenberg–Marquardt on inverse-"
        "dynamics and observation residuals) from one or several bags: one parameter vector, "
        "separate states per bag. By default the consistent path (the hinges' rigid limit, "
        "steps 2h then h; each value's change between them is printed and written). Validates "
        "the fit by predicting 0.5 s ahead from the estimated states and by an open-loop "
        "replay, and writes parameters.yaml, ros_parameters.yaml, states.csv, calibrated.urdf "
        "(the Furuta rig) and report.html "
        "(figures in figures/) into --output. Exit status 0 when the fit converged or reached "
        "its iteration or time limit, 1 when it stopped without progress (files written all the "
        "same), 2 for an error in the input.")
    add_recordings_argument(calibrate)
    add_config_options(calibrate)
    add_method_options(calibrate)
    calibrate.add_argument(
        "--held", action="append", default=[], metavar="RECORDING=JOINTS",
        help="the joints RECORDING holds still (comma-separated, or none), where the automatic "
        "choice is wrong: a joint whose angle spans no more than ten times its noise, or under "
        "0.02 rad while the other moves a hundred times as far, is taken as held (a free swing "
        "with the arm held by hand); repeat per recording")
    calibrate.add_argument("--output", required=True, metavar="DIR", help="output folder")
    calibrate.set_defaults(handler=calibrate_command)


def held_joints(values: list[str], recordings: list[str]) -> dict[str, tuple[str, ...]]:
    """``--held RECORDING=JOINTS`` as ``{recording: joints}`` (``none``: no joint)."""
    held = {}
    for value in values:
        recording, separator, joints = value.rpartition("=")
        if not separator or recording not in recordings:
            raise UserError(f"--held {value}: give RECORDING=JOINTS, RECORDING one of the "
                            f"recordings given ({', '.join(recordings)})")
        names = tuple(name.strip() for name in joints.split(",") if name.strip())
        held[recording] = () if names == ("none",) else names
    return held


def calibrate_command(args) -> int:
    """0 when the fit converged or reached its iteration or time limit; 1 without progress."""
    from mb_estimation.api import calibrate
    from mb_estimation.cli.printing import (
        fit_progress,
        print_calibration,
        print_set_up,
        print_written,
    )
    from mb_estimation.estimation.result import FitStatus

    check_bags(args.bags)
    held = held_joints(args.held, args.bags)
    config = load_config(args)
    output = Path(args.output)
    calibration = calibrate(config, args.bags, output, start_s=args.start, end_s=args.end,
                            held=held, progress=fit_progress(args.quiet, config),
                            on_set_up=None if args.quiet else print_set_up)
    print_calibration(calibration, notes=args.quiet)
    result = calibration.result
    print_written(output, calibration)
    return 0 if result.converged or result.status in (FitStatus.MAX_ITERATIONS,
                                                       FitStatus.TIME_LIMIT) else 1
