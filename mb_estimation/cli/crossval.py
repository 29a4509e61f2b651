"""``mb-estimation crossval`` and ``compare-models``: scores on recordings not fitted on."""

from __future__ import annotations

from pathlib import Path

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


def add_compare_models(commands) -> None:
    """The compare-models command and its options."""
    compare = commands.add_parser(
        "compare-models", help="which driver and sensor terms the recordings support",
        description="Recording-wise cross-validation of the driver and sensor terms: every "
        "subset of --terms is added to the free parameters; each recording is held out in "
        "turn, the others calibrated together, and the held-out one predicted 0.5 s ahead from "
        "its estimated states. Prints the table and the choice (the fewest terms that no "
        "larger set predicts better) with its reason; writes model_comparison.yaml with "
        "--output. Terms: offsets (encoder_offset2, the pendulum encoder's zero), dry "
        "(coulomb1, coulomb2: dry friction torques that do not grow with the load), ripple "
        "(ripple_cos1, ripple_sin1: the arm's torque ripple, its period from the config's "
        "ripple_per_revolution).")
    add_recordings_argument(compare)
    add_config_options(compare)
    add_method_options(compare)
    compare.add_argument("--terms", metavar="TERM,...",
                         help="the terms to compare: offsets, dry, ripple (default: all three "
                         "where the config has ripple_per_revolution, else offsets,dry)")
    compare.add_argument("--output", metavar="DIR", help="folder for model_comparison.yaml")
    compare.set_defaults(handler=compare_models_command)


def compare_models_command(args) -> int:
    """A line per fit, then the table of held-out scores and the choice."""
    from mb_estimation.api import compare_models
    from mb_estimation.cli.common import UserError
    from mb_estimation.model_terms import term_names

    check_bags(args.bags)
    config = load_config(args)
    try:
        terms = term_names(args.terms or ("offsets,dry,ripple" if config.ripple_per_revolution
                                          else "offsets,dry"))
    except ValueError as error:
        raise UserError(f"--terms: {error}") from None
    comparison = compare_models(config, args.bags, terms, args.output, start_s=args.start,
                                end_s=args.end, say=None if args.quiet else print)
    names = [Path(name).name for name in comparison.recordings]
    widths = [max(len(name), 9) for name in names]
    width = max(len("terms"), *(len(candidate.label) for candidate in comparison.candidates))
    print("held-out prediction 0.5 s ahead, RMS angle error over the joints [rad]:")
    print(f"  {'terms':<{width}}  {'mean':<9}  "
          + "  ".join(f"{name:<{w}}" for name, w in zip(names, widths, strict=True)))
    for candidate in comparison.candidates:
        print(f"  {candidate.label:<{width}}  {candidate.mean_score:<9.3e}  "
              + "  ".join(f"{score:<{w}.3e}" for score, w in zip(candidate.scores, widths,
                                                                  strict=True)))
    print(f"chosen: {comparison.choice.candidate.label} ({comparison.choice.reason})")
    if comparison.written is not None:
        print(f"wrote {comparison.written}")
    return 0
