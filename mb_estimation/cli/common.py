"""What the commands share: their common options, the config with the overrides, path checks.

Light to import (no JAX, no numpy): ``mb-estimation --help`` builds every parser from here.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from mb_estimation.errors import UserError

__all__ = ["ESTIMATOR_HELP", "OVERRIDE_FLAGS", "REFINEMENT_MODES", "SCENARIOS",
           "SIMULATED_HINGES", "UserError",
           "add_config_options", "add_free_option", "add_hinges_option", "add_method_options",
           "add_recordings_argument", "add_renamed_option", "add_step_and_weight_options",
           "check_bags", "load_config", "number_list"]

COMPLIANCE_HELP = "set every hinge compliance (linear and rotational) to EPS"

# mb_estimation.config.REFINEMENT_MODES, HINGE_DECLARATIONS and mb_estimation.scenarios.SCENARIOS,
# spelled out:
# `--help` imports nothing of the package (test_config.py and test_cli_estimation.py check that
# they agree)
REFINEMENT_MODES = ("auto", "on", "off")
HINGE_DECLARATIONS = ("rigid", "compliant")
SCENARIOS = ("release", "swingup", "pulse", "multisine")

ESTIMATOR_HELP = (
    "consistent (default: joint coordinates in the rigid limit, second-order step refined "
    "from 2h to h, estimates that converge to the physical values) or paper (the paper's "
    "single fit in maximal coordinates at step h, kept for comparison)")

#: The option behind each of apply_overrides' arguments: messages name it before the config key.
OVERRIDE_FLAGS = {"free": "--free", "set_values": "--set", "compliance": "--compliance",
                  "step_s": "--step", "kappa": "--kappa", "max_iterations": "--max-iterations",
                  "estimator": "--estimator", "simulation_refinement": "--simulation-refinement",
                  "hinges": "--hinges"}


def add_recordings_argument(parser: argparse.ArgumentParser) -> None:
    """BAG [BAG ...], the recordings."""
    parser.add_argument("bags", nargs="+", metavar="BAG",
                        help="rosbag2 folder(s) or .db3/.mcap files, or PlotJuggler CSV exports")


def add_config_options(parser: argparse.ArgumentParser, *, compliance: bool = True) -> None:
    """--config, --set (and --compliance)."""
    parser.add_argument("--config", required=True, metavar="FILE",
                        help="rig configuration (YAML), e.g. config/furuta.yaml")
    parser.add_argument("--set", dest="set_values", metavar="NAME=VALUE,...",
                        help="override parameter values, e.g. J_Azz=0.01,tilt=[1,0,0,0]")
    if compliance:
        parser.add_argument("--compliance", type=float, metavar="EPS", help=COMPLIANCE_HELP)


def add_free_option(parser: argparse.ArgumentParser) -> None:
    """--free, the parameters to estimate."""
    parser.add_argument("--free", metavar="NAME,NAME,...",
                        help="replace the config's free parameters, e.g. J_Azz,J_Byy,b1,b2")


def add_hinges_option(parser: argparse.ArgumentParser, choices: str) -> None:
    """--hinges, the rig's hinge declaration for this run; ``choices`` says what each does."""
    parser.add_argument("--hinges", choices=HINGE_DECLARATIONS,
                        help="declare the rig's hinges for this run (default: the config's "
                        f"hinges, built in rigid): {choices}")


SIMULATED_HINGES = ("rigid (bearings: the rigid tree, stepped in joint coordinates) or "
                    "compliant (SPOOK through the config's hinge compliance and damping)")


def add_renamed_option(parser: argparse.ArgumentParser, old: str, new: str) -> None:
    """``old``, hidden: using it fails with one line naming ``new`` (exit status 2).

    One line, not argparse's usage block: the option exists, it only moved.
    """
    class Renamed(argparse.Action):
        def __call__(self, parser, namespace, values, option_string=None):
            parser.exit(2, f"{parser.prog}: error: {old} is now {new}\n")

    parser.add_argument(old, action=Renamed, help=argparse.SUPPRESS)


def add_step_and_weight_options(parser: argparse.ArgumentParser) -> None:
    """--step and --kappa, the estimation step and the state error weight."""
    parser.add_argument("--step", dest="step_s", type=float, metavar="H",
                        help="estimation step h [s]: the consistent path's finest step, or the "
                        "paper's fit's (default: the config's method.step_s, else the "
                        "recordings' sample period; the paper's fit: 0.01 s)")
    add_renamed_option(parser, "--dt", "--step (the estimation step, method.step_s)")
    parser.add_argument("--kappa", type=float, metavar="K",
                        help="state error weight κ (consistent: read at h = 0.01 s on a rig "
                        "of 0.04 kg m² about its first joint, and scaled as κ·(0.01 s/h)·"
                        "(0.04 kg m²/I)² per step for the rig's rest inertia I)")


def add_method_options(parser: argparse.ArgumentParser, *, single_values: bool = True) -> None:
    """--estimator, --free, --max-iterations, --start, --end, --quiet (and --step, --kappa)."""
    parser.add_argument("--estimator", choices=("consistent", "paper"),
                        help=f"{ESTIMATOR_HELP} (default: the config's advanced.estimator)")
    add_hinges_option(parser, "rigid (bearings; the fit and its validation run the rigid "
                      "model) or compliant (the config's hinge compliance and damping are the "
                      "rig's physics; the fit goes on through them)")
    parser.add_argument("--simulation-refinement", nargs="?", const="on",
                        choices=REFINEMENT_MODES, metavar="{auto,on,off}",
                        help="consistent path: then fit the parameters by simulation error "
                        "(multiple shooting) through the model the hinges declare: the "
                        "config's simulator for compliant ones, the rigid model for rigid ones, "
                        "on recordings longer than one of its segments. on (the bare flag): "
                        "kept for compliant hinges, for rigid ones where its simulations follow "
                        "the recordings or predict them no worse than the joint fit; auto: kept "
                        "only where the joint fit does not predict the recordings and it "
                        "predicts them better; off: never (default: the config's "
                        "method.simulation_refinement, on)")
    add_free_option(parser)
    if single_values:
        add_step_and_weight_options(parser)
    parser.add_argument("--max-iterations", type=int, metavar="N",
                        help="Levenberg–Marquardt iteration limit of each joint fit (at "
                        "least 1)")
    parser.add_argument("--start", type=float, metavar="S",
                        help="skip the first S seconds of each recording")
    parser.add_argument("--end", type=float, metavar="S",
                        help="use each recording up to S seconds from its start")
    parser.add_argument("--quiet", action="store_true", help="no progress output")


def number_list(text: str) -> tuple[float, ...]:
    """``"1,10,1e2"`` → ``(1.0, 10.0, 100.0)`` (argparse type: positive numbers)."""
    try:
        values = tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected numbers separated by commas, got {text!r}") from None
    if not values or not all(v > 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive numbers, got {text!r}")
    return values


def load_config(args: argparse.Namespace, *, ignore: tuple[str, ...] = ()):
    """The config of --config with the command line's overrides.

    ``ignore``: options that are not overrides of the config's values (sweep's ``step_s``,
    ``kappa`` and ``compliance``, the values to sweep over). ``--parameters`` (a calibrate
    result) sets values before ``--set``.
    """
    from mb_estimation.config import (
        apply_overrides,
        load_config,
        parse_assignments,
        parse_free_list,
    )

    def option(name: str):
        return None if name in ignore else getattr(args, name, None)

    config = load_config(args.config)
    set_values = {}
    if option("parameters"):
        set_values.update(fitted_values(args.parameters, config))
    if args.set_values:
        set_values.update(parse_assignments(args.set_values))
    free = parse_free_list(args.free) if option("free") is not None else None
    if free == [] and args.command != "crossval":  # crossval scores fixed values
        raise UserError("--free names no parameter: give NAME,NAME (or leave it out for the "
                        "config's free set)")
    return apply_overrides(config, set_values=set_values or None,
                           compliance=option("compliance"), step_s=option("step_s"),
                           kappa=option("kappa"), free=free,
                           max_iterations=option("max_iterations"),
                           estimator=option("estimator"),
                           simulation_refinement=option("simulation_refinement"),
                           hinges=option("hinges"), sources=OVERRIDE_FLAGS)


def fitted_values(path, config) -> dict:
    """The values of a parameters.yaml from calibrate (or its folder) for the config's rig."""
    from mb_estimation.io.parameter_files import read_parameters

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


def check_bags(paths, kinds: str = "a bag folder, .db3/.mcap file or PlotJuggler .csv "
                                    "export") -> None:
    """A :class:`UserError` naming the first of ``paths`` that does not exist.

    ``kinds``: what the command reads, for the message.
    """
    for path in paths:
        if not Path(path).exists():
            raise UserError(f"{path}: no such recording ({kinds})")


def played_input(path, config, *, rate_hz=None, duration_s=None):
    """An input file (``--input FILE``) as a scenario, its rate [Hz] and the duration to play [s].

    The file's rate, which ``rate_hz`` (``--rate``) may repeat but not change; its length, or
    ``duration_s`` (``--duration``) where shorter (a longer one is said on stderr: the file
    ends sooner).
    """
    import numpy as np

    from mb_estimation.io.excitation_files import read_excitation
    from mb_estimation.scenarios import played_scenario

    time_s, inputs = read_excitation(path)
    rate = 1.0 / float(np.mean(np.diff(time_s)))
    if rate_hz is not None and abs(rate_hz / rate - 1) > 1e-6:
        raise UserError(f"{path} is sampled at {rate:g} Hz, --rate is {rate_hz:g}")
    length_s = float(time_s[-1] - time_s[0])
    duration = length_s if duration_s is None else min(duration_s, length_s)
    if duration_s is not None and duration_s > length_s * (1.0 + 1e-9):
        print(f"warning: --duration {duration_s:g} s is longer than {path} ({length_s:g} s): "
              f"{length_s:g} s played", file=sys.stderr, flush=True)
    return played_scenario(inputs, config.rig), rate, duration


_DRIFT = re.compile(r"^\s*(\w+)\s*=\s*([+-]?\d+(?:\.\d*)?)\s*%\s*/\s*(\d+(?:\.\d*)?)\s*s\s*$")


def parse_drifts(text: str | None) -> dict[str, tuple[float, float]]:
    """``--drift``: ``"b1=+20%/600s,K=-5%/3600s"`` -> ``{"b1": (0.2, 600.0), ...}``."""
    drifts = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        match = _DRIFT.match(item)
        if match is None or float(match[3]) <= 0.0:
            raise UserError(f"--drift: {item.strip()!r} is not NAME=±P%/Ts (e.g. b1=+20%/600s)")
        drifts[match[1]] = (float(match[2]) / 100.0, float(match[3]))
    return drifts
