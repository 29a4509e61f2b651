"""Set up once: everything a calibration derives from (config, recordings) before it fits.

:func:`set_up` resolves the config once into a :class:`Setup` — the rig and the model its
hinges declare (:mod:`mb_estimation.models`), the fit's steps, each step's grids, the solver
settings, the free parameters' box, what reading did to the recordings — and checks what can
be checked before any fit: the trim within the recordings, each grid long enough. A joint that
a recording holds still (:func:`locked_joints`) is marked on its grids and said in a note. The fit
(:mod:`mb_estimation.fitting`), its assessment and the writers read the setup; none of them
goes back to the raw config for what is resolved here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from mb_estimation.config import Config
from mb_estimation.errors import RecordingError
from mb_estimation.estimation import (
    EstimationProblem,
    SolverSettings,
    compile_model,
    refinement_steps,
)
from mb_estimation.model_terms import terms_note
from mb_estimation.models import Compliant, Model, Rigid
from mb_estimation.rigs import Rig, get_rig
from mb_estimation.rigs.parameters import (
    DRY_FRICTION_PARAMETERS,
    INPUT_GAIN_PARAMETERS,
    RIPPLE_PARAMETERS,
    parameters_in_use,
)
from mb_estimation.signals import GridData, Recording, prepare_recording
from mb_estimation.signals.steady import SteadyDrive, drives_note, steady_drive

# Bounds of the consistent path's automatic finest step (the recordings' sample period) [s].
SMALLEST_AUTOMATIC_STEP = 1e-4
LARGEST_AUTOMATIC_STEP = 0.01
#: The paper's fit's step when ``method.step_s`` is not set [s] (its §4.6 setting).
PAPER_STEP_S = 0.01


def rig_of(config: Config) -> Rig:
    """The rig a config describes: its model, its constraint rows, and its friction.

    Dry friction only on the hinges whose friction parameters are free or non-zero (the other
    hinges' friction rows would carry nothing); the arm's torque ripple only where one of its
    amplitudes is.
    """
    flags = tuple(bool(parameters_in_use(names, config.parameters, config.free))
                  for names in DRY_FRICTION_PARAMETERS[config.rig])
    ripple = (config.ripple_per_revolution if parameters_in_use(
        RIPPLE_PARAMETERS[config.rig], config.parameters, config.free) else 0)
    return get_rig(config.rig, config.friction, config.advanced.drift_correction, flags, ripple)


def model_of(config: Config, rig: Rig | None = None) -> Model:
    """The model the config's hinges declare, of ``rig`` (default :func:`rig_of`).

    :class:`~mb_estimation.models.Rigid` or :class:`~mb_estimation.models.Compliant`.
    """
    rig = rig_of(config) if rig is None else rig
    if config.hinges == "rigid":
        return Rigid(rig, config.simulation.dt)
    taus = [float(value) for name, value in config.parameters.items() if name.startswith("tau")]
    return Compliant(rig, config.simulation.dt, lead_s=3.0 * max(taus, default=0.0))


def delayed_input(config: Config, recording: Recording) -> Recording:
    """``recording`` with its input acting ``recording.input_delay_s`` after its stamps."""
    delay = config.recording.input_delay_s
    if not delay:
        return recording
    return dataclasses.replace(recording, input_time_s=np.asarray(recording.input_time_s) + delay)


def sample_period(recordings: Sequence[Recording]) -> float:
    """The recordings' median joint-angle sample period [s] (to 9 significant digits)."""
    period = np.median(np.concatenate([np.diff(np.sort(np.asarray(r.time_s, float)))
                                       for r in recordings]))
    return float(f"{period:.9g}")


def fit_steps(config: Config, recordings: Sequence[Recording]) -> tuple[float, ...]:
    """The steps [s] the config's fits run at, coarse to fine.

    The paper's single fit: ``method.step_s``, else :data:`PAPER_STEP_S`. The consistent
    path: ``advanced.refinement_levels`` steps down to ``method.step_s``, else to the
    recordings' sample period (within [:data:`SMALLEST_AUTOMATIC_STEP`,
    :data:`LARGEST_AUTOMATIC_STEP`]): every sample then has its own grid point, and a finer
    step adds no information, only cost.
    """
    method = config.method
    if config.advanced.estimator == "paper":
        return (PAPER_STEP_S if method.step_s is None else method.step_s,)
    finest = method.step_s
    if finest is None:
        finest = min(max(sample_period(recordings), SMALLEST_AUTOMATIC_STEP),
                     LARGEST_AUTOMATIC_STEP)
    return refinement_steps(finest, config.advanced.refinement_levels)


def solver_settings(config: Config) -> SolverSettings:
    """The Levenberg–Marquardt settings of the config's method and advanced sections."""
    method, advanced = config.method, config.advanced
    return SolverSettings(kappa=method.kappa, max_iterations=method.max_iterations,
                          gradient_tolerance=advanced.gradient_tolerance,
                          step_tolerance=advanced.step_tolerance,
                          time_limit_s=method.time_limit_s)


def on_grid(config: Config, recordings: Sequence[Recording], dt: float, *,
            start_s: float | None = None, end_s: float | None = None) -> tuple[GridData, ...]:
    """Every recording on the estimation grid of step ``dt`` [s], its input delayed as stated."""
    return tuple(prepare_recording(delayed_input(config, r), dt,
                                   config.advanced.filter_cutoff_hz, start_s=start_s,
                                   end_s=end_s) for r in recordings)


def urdf_reading_notes(config: Config) -> list[str]:
    """What reading the config's URDF left out or folded in.

    An arm's centre of mass to the side of its line, the pendulum's small products of inertia.
    """
    return [] if config.urdf is None else [f"{config.urdf.file.name}: {note}"
                                           for note in config.urdf.rig.notes]


def recording_notes(recordings: Sequence[Recording], grids: Sequence[GridData]) -> list[str]:
    """What reading did to each recording (stamps, dropped samples, gaps, trimming).

    ``grids``: the recordings on an estimation grid, for the steps that fall in gaps between
    samples.
    """
    notes = []
    for recording, grid in zip(recordings, grids, strict=True):
        notes += [f"{recording.name}: {note}" for note in recording.notes]
        unobserved = int(len(grid.observed) - grid.observed.sum())
        if unobserved:
            notes.append(f"{recording.name}: {unobserved} of {len(grid.observed)} estimation "
                         "steps fall in gaps between samples: bridged, without observations")
    return notes


#: A joint is held still in a recording (a hand, a brake) where its angle spans at most
#: :data:`LOCKED_NOISE_RATIO` times its noise, or less than :data:`LOCKED_RANGE_RAD` [rad]
#: (about 1°) while another joint moves over :data:`LOCKED_SPAN_RATIO` times as far.
LOCKED_NOISE_RATIO = 10.0
LOCKED_RANGE_RAD = 0.02
LOCKED_SPAN_RATIO = 100.0


def locked_joints(grid: GridData) -> tuple[bool, ...]:
    """Per joint, whether the recording holds it still: its angle spans almost nothing.

    Nothing beyond its noise (:data:`LOCKED_NOISE_RATIO` times the RMS of the measured angle
    about its low-passed one), or under a degree while another joint swings a hundred times
    as far (:data:`LOCKED_RANGE_RAD`, :data:`LOCKED_SPAN_RATIO`): a hand holding the arm still
    lets it move a few milliradians, far more than the encoder's noise, while the pendulum
    swings radians; a joint left free moves with the other.
    """
    measured = np.asarray(grid.measured_angles)
    noise = np.sqrt(np.mean((measured - np.asarray(grid.filtered_angles)) ** 2, axis=0))
    spans = np.ptp(measured, axis=0)
    return tuple(bool(span <= LOCKED_NOISE_RATIO * rms or (
        span < LOCKED_RANGE_RAD and LOCKED_SPAN_RATIO * span < np.max(np.delete(spans, j),
                                                                      initial=0.0)))
        for j, (span, rms) in enumerate(zip(spans, noise, strict=True)))


def with_locked_joints(config: Config, level_grids: Sequence[Sequence[GridData]],
                       held: Mapping[str, Sequence[str]] | None = None
                       ) -> tuple[tuple[tuple[GridData, ...], ...], list[str]]:
    """Each recording's grids with its :func:`locked_joints` (decided on the finest grid).

    ``held``: by recording name, the joints it holds still, where that is said rather than
    detected (``()``: none). And a note per recording with a joint held still. Raises a
    :class:`~mb_estimation.errors.RecordingError` where a recording moves no joint, or where a
    joint is held and the fit cannot hold it: compliant hinges, the paper's estimator.
    """
    joints, held = tuple(config.rig_spec.joints), dict(held or {})
    names = [grid.name for grid in level_grids[-1]]
    for name, said in held.items():
        if name not in names:
            raise RecordingError(f"--held {name}=…: not one of the recordings given "
                                 f"({', '.join(names)})")
        unknown = [joint for joint in said if joint not in joints]
        if unknown:
            raise RecordingError(f"--held {name}={','.join(said)}: {unknown[0]} is not a joint "
                                 f"of rig {config.rig} (its joints: {', '.join(joints)})")
    locked = [tuple(joint in held[grid.name] for joint in joints) if grid.name in held
              else locked_joints(grid) for grid in level_grids[-1]]
    notes = []
    for grid, flags in zip(level_grids[-1], locked, strict=True):
        if not any(flags):
            continue
        spans = np.ptp(np.asarray(grid.measured_angles), axis=0)
        still = ", ".join(f"the {joint} (it spans {span:.2g} rad)"
                          for joint, flag, span in zip(joints, flags, spans, strict=True) if flag)
        if all(flags):
            raise RecordingError(f"{grid.name}: no joint moves ({still}): nothing to fit")
        how = "is held (--held)" if grid.name in held else "does not move"
        if config.hinges != "rigid" or config.advanced.estimator == "paper":
            raise RecordingError(
                f"{grid.name}: {still} {how}; a joint held still is fitted on rigid hinges by "
                "the default estimator only (hinges: rigid)")
        notes.append(f"{grid.name}: {still} {how}: fitted as held still at its median angle "
                     "(by a torque nobody recorded), its own parameters left to the other "
                     "recordings")
    return tuple(tuple(held_still(grid, flags) for grid, flags in zip(grids, locked, strict=True))
                 for grids in level_grids), notes


def held_still(grid: GridData, locked: Sequence[bool]) -> GridData:
    """``grid`` with the ``locked`` joints held at their median angle (measured and filtered).

    What the hand's few milliradians do to the other joint is far below its noise; held at one
    angle, the fit, its predictions and its replays all see the joint as the model holds it.
    """
    if not any(locked):
        return grid
    mask = np.asarray(locked)
    measured = np.asarray(grid.measured_angles, dtype=np.float64)
    median = np.median(measured, axis=0)
    return dataclasses.replace(
        grid, locked=tuple(bool(flag) for flag in locked),
        measured_angles=np.where(mask, median, measured),
        filtered_angles=np.where(mask, median, np.asarray(grid.filtered_angles)),
        initial_rates=None if grid.initial_rates is None
        else np.where(mask, 0.0, np.asarray(grid.initial_rates)))


class TrimError(RecordingError):
    """``--start``/``--end`` outside a recording (checked before any fit)."""


def check_trim(recordings: Sequence[Recording], start_s: float | None,
               end_s: float | None) -> None:
    """A :class:`TrimError` unless ``0 ≤ start_s < end_s ≤`` each recording's length [s]."""
    if start_s is not None and not start_s >= 0.0:
        raise TrimError(f"--start {start_s:g} s: a recording is trimmed from 0 s on (seconds "
                        "from its first sample)")
    if end_s is not None and start_s is not None and not end_s > start_s:
        raise TrimError(f"--end {end_s:g} s is not after --start {start_s:g} s")
    for recording in recordings:
        length = float(np.ptp(np.asarray(recording.time_s, dtype=np.float64)))
        if start_s is not None and start_s >= length:
            raise TrimError(f"--start {start_s:g} s is beyond the end of {recording.name} "
                            f"({length:.3g} s long)")
        if end_s is not None and not 0.0 < end_s <= length * (1 + 1e-9):
            raise TrimError(f"--end {end_s:g} s is outside {recording.name} (0 to "
                            f"{length:.3g} s)")


def check_input_gain(setup: Setup) -> None:
    """A :class:`RecordingError` where the input's gain is free and every recording unforced.

    With input 0 throughout (free swings, or a misnamed input topic) the gain multiplies
    nothing: the fit would return any value for it, after minutes. For the recordings a user
    gives (:mod:`mb_estimation.api`); a node's window or a synthetic warm-up is not checked.
    """
    config = setup.config
    gains = [name for name in INPUT_GAIN_PARAMETERS.get(config.rig, ()) if name in config.free]
    if gains and not setup.forced:
        raise RecordingError(
            f"{', '.join(gains)} (the input's gain) is free but no recording has an input "
            "(each is unforced, input 0): the data cannot determine it. Leave it out of the "
            "free set (--free), or name the input topic (recording.voltage_topic)")


@dataclass(frozen=True)
class Setup:
    """What one calibration needs, derived once from the config and the recordings.

    ``rig`` and ``model``: the rig and the model its hinges declare; ``steps``: the fits'
    steps [s], coarse to fine (one for the paper's fit); ``level_grids[i]``: the recordings on
    the grid of ``steps[i]`` (trimmed to ``start_s``..``end_s``); ``solver``: the
    Levenberg–Marquardt settings; ``lower``/``upper``: the free parameters' box; ``notes``:
    what reading did to each recording; ``steady_drives``: where an input held constant turns
    its joint at a steady speed (:func:`steady_drives`).
    """

    config: Config
    recordings: tuple[Recording, ...]
    rig: Rig
    model: Model
    steps: tuple[float, ...]
    level_grids: tuple[tuple[GridData, ...], ...]
    solver: SolverSettings
    lower: dict[str, float]
    upper: dict[str, float]
    notes: tuple[str, ...] = ()
    steady_drives: tuple[SteadyDrive, ...] = ()

    @property
    def drives_conflict(self) -> str | None:
        """The line saying that the steady drives cannot share one input gain (else None)."""
        return drives_note(self.steady_drives)

    @property
    def free(self) -> tuple[str, ...]:
        """The free parameters, in the rig's order."""
        return tuple(self.config.free)

    @property
    def grids(self) -> tuple[GridData, ...]:
        """The recordings on the finest grid (the last fit's)."""
        return self.level_grids[-1]

    @property
    def forced(self) -> bool:
        """Whether a recording has an input other than 0 (on the last fit's grids)."""
        return any(np.any(np.asarray(grid.inputs) != 0.0) for grid in self.grids)

    @property
    def rest_inertia(self) -> float:
        """The rig's rest inertia at the values the fit starts from [kg m²] (κ is scaled by it)."""
        return float(self.rig.rest_inertia(self.config.parameters))

    def problem(self, grids: Sequence[GridData], *, estimate_parameters: bool = True
                ) -> EstimationProblem:
        """The estimation problem on ``grids``: the config's values, free set and box."""
        free = self.free if estimate_parameters else ()
        return EstimationProblem(
            rig=self.rig, parameters=self.config.parameters, free=free,
            lower={name: self.lower[name] for name in free},
            upper={name: self.upper[name] for name in free}, recordings=tuple(grids))


def steady_drives(config: Config, grids: Sequence[GridData]) -> tuple[SteadyDrive, ...]:
    """Per recording and input, its steady drive of the joint the input turns, where it has one.

    :func:`~mb_estimation.signals.steady.steady_drive` of the rig's ``driven`` joints.
    """
    spec = config.rig_spec
    drives = (steady_drive(grid, index, spec.joints.index(joint))
              for grid in grids for index, joint in enumerate(spec.driven))
    return tuple(drive for drive in drives if drive is not None)


def set_up(config: Config, recordings: Sequence[Recording], *, start_s: float | None = None,
           end_s: float | None = None, held: Mapping[str, Sequence[str]] | None = None
           ) -> Setup:
    """The :class:`Setup` of a calibration of ``recordings`` as ``config`` says.

    Each recording trimmed to ``start_s``..``end_s`` s from its start; ``held``: by recording
    name, the joints it holds still where detection is overruled (:func:`with_locked_joints`).
    Raises a :class:`~mb_estimation.errors.RecordingError` before any fit when the trim lies
    outside a recording, a recording is too short for a step, or a held joint cannot be held.
    """
    recordings = tuple(recordings)
    check_trim(recordings, start_s, end_s)
    rig = rig_of(config)
    steps = fit_steps(config, recordings)
    level_grids, locked_notes = with_locked_joints(config, [
        on_grid(config, recordings, dt, start_s=start_s, end_s=end_s) for dt in steps], held)
    return Setup(
        config=config, recordings=recordings, rig=rig, model=model_of(config, rig), steps=steps,
        level_grids=level_grids, solver=solver_settings(config),
        lower={name: bounds.lower for name, bounds in config.free.items()},
        upper={name: bounds.upper for name, bounds in config.free.items()},
        notes=tuple(urdf_reading_notes(config) + recording_notes(recordings, level_grids[-1])
                    + locked_notes
                    + [note for note in [terms_note(config.parameters, config.free,
                                                    config.ripple_per_revolution)] if note]),
        steady_drives=steady_drives(config, level_grids[-1]))


def warm_up_recording(config: Config, duration_s: float, rate_hz: float) -> Recording:
    """A synthetic recording of the config's joints: slow sines at ``rate_hz``, no input.

    For compiling before the data arrive: the programs depend on its shape, not its content.
    """
    time_s = np.arange(0.0, duration_s + 2.0 / rate_hz, 1.0 / rate_hz)
    angles = np.stack([0.3 * np.sin(2.0 * np.pi * 0.5 * time_s + j)
                       for j in range(len(config.rig_spec.joints))], axis=1)
    return Recording("warm-up", time_s, angles, np.array([0.0]),
                     np.zeros((1, len(config.rig_spec.inputs))))


def compile_ahead(config: Config) -> float:
    """Compile the model programs a calibration's fit will need, before any data.

    Its fit's model blocks and shadow states compile per chunk of steps for the config's rig,
    free set and estimator, whatever the recordings (:func:`~mb_estimation.estimation.
    compile_model`), so a short :func:`warm_up_recording` compiles them: in a thread while the
    recordings are read or simulated. Returns the seconds spent compiling.
    """
    setup = set_up(config, [warm_up_recording(config, 0.2, 1000.0)])
    problem = setup.problem(setup.grids)
    if config.advanced.estimator != "paper":
        problem = dataclasses.replace(problem, formulation="joint")
    return compile_model(problem, setup.solver)
