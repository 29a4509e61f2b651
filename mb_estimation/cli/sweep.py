"""``mb-estimation sweep``: fit over a grid of method parameters (κ, h, compliance)."""

from __future__ import annotations

from mb_estimation.cli.common import (
    add_config_options,
    add_method_options,
    add_recordings_argument,
    add_renamed_option,
    check_bags,
    load_config,
    number_list,
)


def add_sweep(commands) -> None:
    """The sweep command and its options."""
    sweep = commands.add_parser(
        "sweep", help="fit over a grid of method parameters (κ, h, compliance)",
        description="Calibrate at every combination of the given state error weights κ, steps "
        "h and hinge compliances (each fit from the config's values) and tabulate and plot "
        "the free parameters, the observation MSE and the impulse MSE against each (the "
        "paper's Figures 4, 6, 7), to choose the method parameters for a rig. Writes sweep.csv "
        "and sweep_<setting>.png into --output. A new h compiles anew (tens of seconds).")
    add_recordings_argument(sweep)
    add_config_options(sweep, compliance=False)
    add_method_options(sweep, single_values=False)
    sweep.add_argument("--kappa", type=number_list, metavar="K,K,...",
                       help="state error weights κ (default: the config's)")
    sweep.add_argument("--step", dest="step_s", type=number_list, metavar="H,H,...",
                       help="estimation steps h [s] (default: the config's method.step_s, "
                       "else the recordings' sample period)")
    add_renamed_option(sweep, "--dt", "--step (the estimation steps)")
    sweep.add_argument("--compliance", type=number_list, metavar="EPS,EPS,...",
                       help="hinge compliances, each set on every hinge (default: the config's)")
    sweep.add_argument("--output", required=True, metavar="DIR", help="output folder")
    sweep.set_defaults(handler=sweep_command)


def sweep_command(args) -> int:
    """The fits' progress, then the table of results; sweep.csv and figures into --output."""
    from mb_estimation.api import sweep_and_write
    from mb_estimation.cli.printing import fit_progress, print_notes
    from mb_estimation.report.sweep import sweep_rows

    check_bags(args.bags)
    # the values to sweep over are not overrides: each fit sets its own
    config = load_config(args, ignore=("step_s", "kappa", "compliance"))
    run = sweep_and_write(config, args.bags, args.output, dts=args.step_s, kappas=args.kappa,
                          compliances=args.compliance, start_s=args.start, end_s=args.end,
                          progress=fit_progress(args.quiet, config))
    print_notes(run.notes)
    compliances = ("from the config" if run.compliances == (None,)
                   else ", ".join(map(str, run.compliances)))
    print(f"sweep: {run.total} fits of {', '.join(run.free)} (h "
          f"{', '.join(map(str, run.dts))}; κ {', '.join(map(str, run.kappas))}; "
          f"compliance {compliances})")
    rows = sweep_rows(run.points)
    columns = [c for c in rows[0] if c not in ("cost", "solve_time_s")]
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(f"{v:.4g}" if isinstance(v, float) else str(v)
                                for v in (row[c] for c in columns)) + " |")
    print("wrote " + ", ".join(str(path) for path in run.written))
    return 0
