"""``mb-estimation crossval``: score parameters on recordings by a states-only fit."""

from __future__ import annotations

from mb_estimation.cli.common import (
    add_config_options,
    add_method_options,
    add_recordings_argument,
    check_bags,
    load_config,
)


def add_crossval(commands) -> None:
    """The crossval command and its options."""
    crossval = commands.add_parser(
        "crossval", help="score parameters on recordings (state-only estimation)",
        description="Cross-validation (paper §4.5): with the parameters fixed, estimate only "
        "the states of each recording; its MSE is the score. Writes crossval.yaml with "
        "--output.")
    add_recordings_argument(crossval)
    add_config_options(crossval)
    add_method_options(crossval)
    crossval.add_argument("--parameters", metavar="FILE",
                          help="parameters.yaml from calibrate, or its folder (default: the "
                          "config's values)")
    crossval.add_argument("--output", metavar="DIR", help="folder for crossval.yaml")
    crossval.set_defaults(handler=crossval_command)


def crossval_command(args) -> int:
    """A line per recording and the mean score; crossval.yaml with --output."""
    from mb_estimation.api import cross_validate, mean_score
    from mb_estimation.cli.printing import fit_progress

    check_bags(args.bags)
    config = load_config(args)
    rows = cross_validate(config, args.bags, args.output, start_s=args.start, end_s=args.end,
                          progress=fit_progress(args.quiet, config, states_only=True))
    for row in rows:
        print(f"{row['path']}: CV {row['mse']:.4e} (observation {row['observation_mse']:.3e}, "
              f"impulse {row['impulse_mse']:.3e})")
    print(f"mean CV score {mean_score(rows):.4e}")
    return 0
