"""``mb-estimation excite``: design the input of an experiment for the free parameters."""

from __future__ import annotations

from mb_estimation.cli.common import UserError, add_config_options, add_free_option, load_config

#: How often the search reports its best so far [evaluations].
PROGRESS_EVERY = 10


def add_excite(commands) -> None:
    """The excite command and its options."""
    excite = commands.add_parser(
        "excite", help="design an input that determines the free parameters best",
        description="Design a multisine input (low-crest phases) for the config's free "
        "parameters at the config's values (or a previous calibration's, --from): its "
        "amplitudes, chosen by an evolution strategy, lower the "
        "worst relative standard deviation the Cramér–Rao bound predicts for the rigid model's "
        "simulated response towards half the plain multisine's, no parameter's std above 1.2 "
        "times its std under the multisine; its peak is --max-input, and the arm's simulated "
        "angle and rate stay within --max-arm-rad and --max-arm-rate. Writes "
        "DIR/excitation.csv (time_s, input at --rate, default the config's "
        "simulation.rate_hz), DIR/excitation.yaml (the values designed at, the predicted std "
        "per free parameter for the design and for the multisine scenario at the same bound "
        "and duration, the limits, the criterion) and DIR/excitation.png.")
    add_config_options(excite, compliance=False)
    add_free_option(excite)
    excite.add_argument("--from", dest="parameters", metavar="FILE",
                        help="parameters.yaml from calibrate (or its folder): design at its "
                        "values (a sequential design); --set still overrides")
    excite.add_argument("--duration", type=float, default=8.0, metavar="S",
                        help="length of the experiment [s] (default 8)")
    excite.add_argument("--rate", type=float, metavar="HZ",
                        help="the experiment's sample rate [Hz]: one input per joint state "
                        "(default: the config's simulation.rate_hz)")
    excite.add_argument("--max-input", type=float, required=True, metavar="U",
                        help="the input's bound [the rig's input units, e.g. V]")
    excite.add_argument("--max-arm-rad", type=float, metavar="A",
                        help="how far the arm may turn from where it starts [rad] (default: "
                        "no limit)")
    excite.add_argument("--max-arm-rate", type=float, metavar="W",
                        help="the arm's largest rate [rad/s] (default: no limit)")
    excite.add_argument("--noise", type=float, metavar="RAD",
                        help="angle noise assumed on each joint [rad]: scales every predicted "
                        "std alike (default: the config's simulation.noise_rad, else 1e-3)")
    excite.add_argument("--max-evaluations", type=int, default=None, metavar="N",
                        help="criterion evaluations the search may make (default 600; each "
                        "simulates the rig a few times)")
    excite.add_argument("--seed", type=int, default=0, metavar="N",
                        help="the search's random seed: the same seed, the same design "
                        "(default 0)")
    excite.add_argument("--output", required=True, metavar="DIR", help="output folder")
    excite.add_argument("--quiet", action="store_true", help="no progress output")
    excite.set_defaults(handler=excite_command)


def excite_command(args) -> int:
    """Design the input and write its files; print each free parameter's predicted std."""
    from mb_estimation.api import design_experiment, design_names
    from mb_estimation.excitation import ARM_LIMIT_SHARE, MAX_EVALUATIONS, Limits
    from mb_estimation.fade import RAMP_S

    for name in ("max_input", "duration", "max_arm_rad", "max_arm_rate", "noise", "rate"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            raise UserError(f"--{name.replace('_', '-')} must be positive, got {value}")
    evaluations = args.max_evaluations if args.max_evaluations is not None else MAX_EVALUATIONS
    if evaluations < 1:
        raise UserError(f"--max-evaluations must be at least 1, got {evaluations}")
    config = load_config(args)

    def progress(evaluation: int, best: float, beyond: float) -> None:
        if not args.quiet and (evaluation % PROGRESS_EVERY == 0 or evaluation == 1):
            where = (f"its motion {beyond:.3g}× the design's share of a limit: penalised, so a "
                     "candidate nearer the limits may rank above one with smaller std"
                     if beyond > 1.0 else "on the search's coarser grid")
            print(f"  evaluation {evaluation:4d}/{evaluations}: the best so far, worst relative "
                  f"std {100 * best:.3g} % ({where})", flush=True)

    limits = Limits(args.max_input, args.max_arm_rad, args.max_arm_rate)
    design_names(config, duration_s=args.duration, limits=limits, rate_hz=args.rate)
    if not args.quiet:
        print(f"designing {args.duration:g} s of input for {', '.join(config.free_names)} "
              f"(bound {args.max_input:g}), at most {evaluations} evaluations")
    design, paths = design_experiment(
        config, args.output, duration_s=args.duration, limits=limits, noise_rad=args.noise,
        rate_hz=args.rate, max_evaluations=evaluations, seed=args.seed, progress=progress)
    print(f"{'parameter':10s} {'design std':>12s} {'multisine std':>14s}")
    for name, relative in design.design.relative_std.items():
        plain = design.multisine.relative_std[name]
        print(f"{name:10s} {100 * relative:11.3g}% {100 * plain:13.3g}%")
    print(f"worst relative std: design {100 * design.design.worst_relative_std:.3g} %, "
          f"multisine {100 * design.multisine.worst_relative_std:.3g} % (input peak "
          f"{design.scale:.3g}; arm within {design.design.arm_peak_rad:.3g} rad, "
          f"{design.design.arm_rate_peak:.3g} rad/s, faded in and out over {RAMP_S:g} s)")
    if args.max_arm_rad is not None or args.max_arm_rate is not None:
        print(f"the design keeps the simulated arm within {ARM_LIMIT_SHARE:.0%} of its limits: "
              "the exciter node stops at the limits themselves")
    if design.scale < args.max_input * (1.0 - 1e-9):
        print(f"the input's peak is {design.scale:.3g}, below the bound {args.max_input:g}: "
              "scaled down so that the simulated arm stays within its limits")
    if design.multisine_scale < args.max_input * (1.0 - 1e-9):
        print(f"the multisine it is compared with plays at a peak of "
              f"{design.multisine_scale:.3g}: the arm's limits need it")
    if not design.improved:
        print("the search found no input that predicts better than the multisine at the "
              "experiment's rate: the design written is the multisine")
    print("written: " + ", ".join(str(path) for path in paths))
    return 0
