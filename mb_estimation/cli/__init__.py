"""The ``mb-estimation`` command: a thin shell over the library.

One module per command (or pair of commands), each with ``add_<command>(commands)`` that
declares its arguments and a handler that calls the library (:mod:`mb_estimation.api`,
:mod:`mb_estimation.ros`) and prints what it reports. Every failure the user can cause (a
bad config, a bad path, an impossible option: a :class:`~mb_estimation.errors.UserError`) ends
with one line ``mb-estimation: error: …`` on stderr and exit status 2, never a traceback; any
other exception is a bug and shows its traceback. ``--help`` imports neither JAX nor numpy.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

from mb_estimation.cli.calibrate import add_calibrate
from mb_estimation.cli.common import (
    HINGE_DECLARATIONS,
    OVERRIDE_FLAGS,
    REFINEMENT_MODES,
    SCENARIOS,
    UserError,
)
from mb_estimation.cli.crossval import add_compare_models, add_crossval
from mb_estimation.cli.excite import add_excite
from mb_estimation.cli.node import add_node
from mb_estimation.cli.players import add_replay, add_rig_sim
from mb_estimation.cli.simulate import add_demo, add_simulate
from mb_estimation.cli.sweep import add_sweep
from mb_estimation.cli.track import add_track

__all__ = ["HINGE_DECLARATIONS", "OVERRIDE_FLAGS", "REFINEMENT_MODES", "SCENARIOS",
           "build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command; each sets ``handler(args) -> exit status``."""
    from mb_estimation import __version__

    parser = argparse.ArgumentParser(
        prog="mb-estimation",
        description="Estimate the parameters and states of a Furuta pendulum rig from joint "
        "angles and motor voltage (joint state and parameter estimation for regularized "
        "time-discrete multibody dynamics).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add_command in (add_simulate, add_calibrate, add_crossval, add_compare_models, add_sweep,
                        add_track, add_excite, add_node, add_rig_sim, add_replay, add_demo):
        add_command(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``mb-estimation``; returns the exit status.

    0: done; 1: calibrate's fit stopped without progress; 2: an error in the input (a usage
    error, or a :class:`~mb_estimation.errors.UserError`: one line on stderr).
    """
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # the command's usage and name, not the top level's
        commands = next(action for action in parser._actions
                        if isinstance(action, argparse._SubParsersAction))
        commands.choices[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    if getattr(args, "uses_jax", True):  # replay only publishes a bag's messages
        from mb_estimation.numerics import configure_jax

        configure_jax()
    output = getattr(args, "output", None)
    made_here = output is not None and not Path(output).exists()
    try:
        return args.handler(args)
    except UserError as error:
        print(f"mb-estimation: error: {error}", file=sys.stderr)
        if made_here:  # a failed command leaves no empty folder of its own behind
            with contextlib.suppress(OSError):
                Path(output).rmdir()  # only if empty
        return 2
