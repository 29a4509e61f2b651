"""Error types and helpers shared by every shell (CLI, node core, transports, players).

:class:`UserError` and its subclasses are the problems with what a user gave (an option, a
config, a recording, a file): ``mb-estimation`` reports them as one line with exit status 2.
Any other exception is a bug and ends in a traceback (exit status 1). The subclasses live beside
the code that raises them: :class:`~mb_estimation.config.ConfigError`,
:class:`~mb_estimation.io.bags.BagError`,
:class:`~mb_estimation.io.parameter_files.ParametersFileError` and the two here. Each is a
``ValueError``, so callers that catch ``ValueError`` still do.
Pure Python: the command line imports this module before JAX.
"""


class UserError(ValueError):
    """A problem with the user's input; the message is one line saying what and why."""


class RecordingError(UserError):
    """A recording that cannot be estimated from as asked.

    Too short for the estimation step, sampled too slowly for the filter's cutoff, or shorter
    than one segment of the simulation refinement.
    """


class SimulationError(UserError):
    """A simulation that cannot run as asked.

    A step that does not divide the sample period, a duration that is not positive, a scenario
    the rig cannot drive (no motor, or a motor gain of zero).
    """


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message, or its type's name."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
