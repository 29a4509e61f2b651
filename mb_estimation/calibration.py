"""A calibration as a plan of stages: built from the config, run in order, each warm-started.

:func:`plan_of` reads the config (``advanced.estimator``, ``advanced.refinement_levels``,
``method.simulation_refinement``, ``hinges``) and the recordings' length into a
:class:`Plan`: the paper's single fit, or the consistent path's joint-coordinate fits coarse to
fine followed by a simulation-error fit through the model the hinges declare. :func:`run`
fits its stages in order, each starting from the last, and reports one :class:`Progress`
event per stage start and per iteration (the command line prints them, the node passes
none). ``calibrate``, ``crossval``, ``sweep`` and the node all calibrate through
:func:`calibrate_recordings`, the plan of their config run.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from mb_estimation.config import Config
from mb_estimation.estimation import EstimationResult, IterationRecord, estimate
from mb_estimation.estimation.consistent import fit_joint_level, refined_through_simulator
from mb_estimation.estimation.shooting import ShootingSettings
from mb_estimation.pipeline import (
    NOISE_FLOOR_RAD,
    PREDICTION_NOISE_RATIO,
    consistent_steps,
    estimation_problem,
    finest_step,
    fit_noise_rad,
    prediction_checks,
    prediction_mismatch,
    prepare,
    solver_settings,
)
from mb_estimation.signals import GridData, Recording
from mb_estimation.validation import PredictionCheck

#: The rigid simulation-error stage's step [s] (halved for the kept fit) and longest segment
#: [s]: its second-order error over 8 s of the 0.92 m release is 1.4e-4 rad at 1 ms, a
#: seventh of 1e-3 rad noise; segments are lengthened up to whole recordings unless the
#: motion amplifies its start (unstable).
RIGID_SHOOTING_DT = 1e-3
RIGID_LONGEST_SEGMENT_S = 16.0

#: The rigid model follows recordings its simulation-error fit misses by at most this many
#: times the joint fit's angle noise (RMS; on the independent rigid reference: 1.0×).
FOLLOWS_NOISE_RATIO = 1.5


@dataclass(frozen=True)
class Stage:
    """One fit of a calibration.

    ``fit``: ``paper`` (the paper's single fit in maximal coordinates, §3), ``joint`` (the
    rigid limit in joint coordinates, a level of the consistent path) or ``simulation``
    (multiple shooting through the model the hinges declare, ``shooting`` its settings);
    ``dt``: its step [s]. ``keep`` says when a simulation-error fit replaces the joint fit
    before it: ``always``; ``if_it_follows`` (the rigid model follows the recordings, else it
    must predict them no worse: :func:`kept_if_it_follows`); ``if_it_predicts_better`` (tried
    only when the joint fit mispredicts: ``method.simulation_refinement: auto``).
    """

    fit: str
    dt: float
    shooting: ShootingSettings | None = None
    keep: str = "always"


@dataclass(frozen=True)
class Plan:
    """The stages of a calibration, in the order they run.

    ``estimate_parameters``: False for a states-only fit (cross-validation, §4.5);
    ``note``: why a stage the config asks for is left out (else None).
    """

    stages: tuple[Stage, ...]
    estimate_parameters: bool = True
    note: str | None = None


@dataclass(frozen=True)
class Progress:
    """One event of a running calibration: a stage starts, or one of its fits iterates.

    ``index``: the stage's place in ``stages`` (the plan's); ``iteration``: None when the stage
    starts (``steps``: the grid steps it fits over ``recordings`` recordings), else the
    iteration, numbered on over the joint stages; ``cost``: the joint fits' objective per step,
    or the simulation fit's mean squared angle error [rad²]; ``record``: a joint or paper fit's
    iteration; ``values``: a simulation fit's current free values.
    """

    index: int
    stages: tuple[Stage, ...]
    iteration: int | None = None
    steps: int = 0
    recordings: int = 0
    cost: float = float("nan")
    record: IterationRecord | None = None
    values: Mapping[str, float] = field(default_factory=dict)

    @property
    def stage(self) -> Stage:
        return self.stages[self.index]


@dataclass(frozen=True)
class Calibration:
    """A calibration's result and the recordings on the grid of its (final) fit.

    ``predictions``: the result's :func:`~mb_estimation.pipeline.prediction_checks` where the
    calibration computed them (whether to keep a simulation-error fit is decided by them),
    else None; ``note``: what that decision was and why, for the user.
    """

    result: EstimationResult
    grids: tuple[GridData, ...]
    predictions: tuple[PredictionCheck, ...] | None = None
    note: str | None = None


def refinement_mode(config: Config) -> str:
    """``method.simulation_refinement`` in effect: as set, else ``on``.

    Unset, the fit goes on through the model the hinges declare: compliant hinges are the
    rig's physics, which the rigid limit lacks; through rigid ones the simulation-error fit
    takes the estimate to the Cramér–Rao bound, where the joint fit's force noise leaves the
    frictions several times wider (kept where its simulations follow the recordings, else
    only where it predicts them no worse: :func:`kept_if_it_follows`).
    """
    mode = config.method.simulation_refinement
    return "on" if mode is None else mode


def simulation_stage(config: Config) -> Stage:
    """The simulation-error stage through the model the config's hinges declare.

    The converged rigid model for rigid hinges; the config's simulator for compliant ones
    (``simulation.dt``; each shooting segment starts ``3 τ``, the hinges' slowest relaxation
    time, before its scored part).
    """
    mode = config.method.simulation_refinement
    if config.hinges == "rigid":
        return Stage("simulation", RIGID_SHOOTING_DT, ShootingSettings(
            segment_s=config.advanced.simulation_segment_s, lead_s=0.0, rigid=True,
            longest_segment_s=RIGID_LONGEST_SEGMENT_S, kept_step_divisor=2),
            keep={None: "if_it_follows", "auto": "if_it_predicts_better"}.get(mode, "always"))
    taus = [float(value) for name, value in config.parameters.items() if name.startswith("tau")]
    return Stage("simulation", config.simulation.dt, ShootingSettings(
        segment_s=config.advanced.simulation_segment_s, lead_s=3.0 * max(taus, default=0.0)),
        keep="if_it_predicts_better" if mode == "auto" else "always")


def _duration_s(recordings: Sequence[Recording], start_s: float | None,
                end_s: float | None) -> float:
    """The shortest recording's length [s] once trimmed to ``start_s``..``end_s``."""
    lengths = [float(np.ptp(r.time_s)) for r in recordings]
    return min((length if end_s is None else min(length, end_s)) - (start_s or 0.0)
               for length in lengths)


def plan_of(config: Config, recordings: Sequence[Recording], *, start_s: float | None = None,
            end_s: float | None = None, estimate_parameters: bool = True) -> Plan:
    """The stages the config asks for on these recordings.

    ``paper``: the single fit at :func:`~mb_estimation.pipeline.finest_step`. ``consistent``:
    joint-coordinate fits over :func:`~mb_estimation.pipeline.consistent_steps` (states only:
    the finest alone), then, unless ``method.simulation_refinement`` is ``off`` or only the
    states are fitted, the :func:`simulation_stage`. Recordings shorter than one of its
    segments leave it out, with a note, when the config did not ask for it by name (``auto``
    says so only when the joint fit mispredicts).
    """
    if config.advanced.estimator == "paper":
        return Plan((Stage("paper", finest_step(config, recordings)),), estimate_parameters)
    steps = consistent_steps(config, recordings)
    joint = tuple(Stage("joint", dt) for dt in (steps if estimate_parameters else steps[-1:]))
    mode = refinement_mode(config)
    if not estimate_parameters or mode == "off":
        return Plan(joint, estimate_parameters)
    simulation = simulation_stage(config)
    segment_s = simulation.shooting.segment_s + simulation.shooting.lead_s
    shortest = _duration_s(recordings, start_s, end_s)
    if shortest < segment_s and config.method.simulation_refinement is None:
        return Plan(joint, note=(
            f"the recordings ({shortest:.3g} s) are shorter than one segment of the "
            f"simulation-error fit ({segment_s:g} s): the joint fit is kept"
            + (", and its values may be shadows of the declared compliant hinges"
               if config.hinges == "compliant" else "")))
    return Plan((*joint, simulation))


def calibrate_recordings(config: Config, recordings: Sequence[Recording], *,
                         start_s: float | None = None, end_s: float | None = None,
                         estimate_parameters: bool = True,
                         progress: Callable[[Progress], None] | None = None) -> Calibration:
    """Estimate the config's free parameters and the states: :func:`plan_of` the config, run."""
    plan = plan_of(config, recordings, start_s=start_s, end_s=end_s,
                   estimate_parameters=estimate_parameters)
    return run(plan, config, recordings, start_s=start_s, end_s=end_s, progress=progress)


def run(plan: Plan, config: Config, recordings: Sequence[Recording], *,
        start_s: float | None = None, end_s: float | None = None,
        progress: Callable[[Progress], None] | None = None) -> Calibration:
    """Fit ``plan``'s stages in order on ``recordings`` (trimmed to ``start_s``..``end_s``).

    Each stage starts from the last one's result; a simulation-error stage is kept as its
    ``keep`` says. ``progress`` sees a :class:`Progress` per stage start and per iteration.
    """
    def report(index: int, **event) -> None:
        if progress is not None:
            progress(Progress(index, plan.stages, **event))

    settings = solver_settings(config)
    result: EstimationResult | None = None
    grids: tuple[GridData, ...] = ()
    for index, stage in enumerate(plan.stages):
        if stage.fit != "simulation":
            grids = prepare(config, recordings, start_s=start_s, end_s=end_s, dt=stage.dt)
        problem = estimation_problem(config, grids,
                                     estimate_parameters=plan.estimate_parameters)
        started = functools.partial(report, index, recordings=len(grids),
                                    steps=sum(grid.num_steps for grid in grids))

        def iterated(record: IterationRecord, index=index) -> None:
            report(index, iteration=record.iteration, cost=record.cost, record=record)

        def shot(iteration: int, cost: float, values: dict, index=index) -> None:
            report(index, iteration=iteration, cost=cost, values=values)

        if stage.fit == "simulation":
            return _simulation_stage_run(config, stage, problem, grids, result, started, shot)
        started()
        if stage.fit == "paper":
            result = estimate(problem, settings, progress=iterated)
        else:
            result = fit_joint_level(problem, settings, result, progress=iterated)
    return Calibration(result, grids, note=plan.note)


def _simulation_stage_run(config: Config, stage: Stage, problem, grids: tuple[GridData, ...],
                          result: EstimationResult, started: Callable[[], None],
                          progress) -> Calibration:
    """The simulation-error ``stage`` after the joint fit ``result``, kept as ``stage.keep``.

    ``started()`` as the fit starts (not when ``method.simulation_refinement: auto`` finds
    no reason to refit).
    """
    if stage.keep == "if_it_predicts_better":
        return _refined_if_mispredicted(config, stage, problem, grids, result, started,
                                        progress)
    started()
    refined = refined_through_simulator(result, problem, stage.dt, stage.shooting, progress)
    if stage.keep == "if_it_follows":
        return kept_if_it_follows(config, grids, result, refined)
    return Calibration(refined, grids)


def _joint_fit_kept(result: EstimationResult, refined: EstimationResult) -> EstimationResult:
    """The joint fit ``result`` with the times of the whole calibration."""
    return dataclasses.replace(result, compile_time_s=refined.compile_time_s,
                               solve_time_s=refined.solve_time_s)


def kept_if_it_follows(config: Config, grids: tuple[GridData, ...], result: EstimationResult,
                       refined: EstimationResult) -> Calibration:
    """The rigid simulation-error fit ``refined`` where the rigid model follows the recordings.

    It follows them where the stage's simulations miss the angles by at most
    :data:`FOLLOWS_NOISE_RATIO` times the joint fit's angle noise (RMS). Where they miss by
    more, it is kept only if it predicts 0.5 s ahead from the joint fit's states no worse than
    the joint fit (:func:`~mb_estimation.pipeline.prediction_mismatch`): where the rigid model
    does not follow the rig, the joint fit's force noise is what keeps it robust, and a
    simulation-error fit through that model can go further astray. (The predictions alone
    cannot decide: on a fast, chaotic motion both miss by many times the noise from the joint
    fit's states alone.)
    """
    following = stage_following(grids, refined)
    if following.follows:
        return Calibration(refined, grids)
    before = prediction_mismatch(grids, result, prediction_checks(config, grids, result))
    after_checks = prediction_checks(config, grids, refined)
    after = prediction_mismatch(grids, refined, after_checks)
    if before is None or after is None or after.ratio <= before.ratio:
        return Calibration(refined, grids, after_checks)
    return Calibration(
        _joint_fit_kept(result, refined), grids, None,
        f"the simulation-error fit through the rigid model misses the angles by "
        f"{following.rms_rad:.2g} rad RMS ({following.ratio:.1f}× the joint fit's noise) and "
        "predicts them worse "
        f"({after.ratio:.1f}× the noise at {after.horizon_s:g} s, against {before.ratio:.1f}× "
        "for the joint fit), so the joint fit is kept")


def _refined_if_mispredicted(config: Config, stage: Stage, problem,
                             grids: tuple[GridData, ...], result: EstimationResult,
                             started: Callable[[], None], progress) -> Calibration:
    """``method.simulation_refinement: auto`` after the joint fit ``result``.

    Refit through the simulator when the joint fit mispredicts
    (:func:`~mb_estimation.pipeline.prediction_mismatch`), keep the refit when it predicts
    better; the calibration's note says which, and why.
    """
    predictions = prediction_checks(config, grids, result)
    mismatch = prediction_mismatch(grids, result, predictions)
    if mismatch is None or mismatch.ratio <= PREDICTION_NOISE_RATIO:
        return Calibration(result, grids, predictions)
    segment_s = stage.shooting.segment_s + stage.shooting.lead_s
    if min((grid.num_steps - 1) * grid.dt for grid in grids) < segment_s:
        return Calibration(result, grids, predictions, (
            f"{mismatch}; the recordings are shorter than one segment of the simulation "
            f"refinement ({segment_s:g} s), so it was not tried"))
    started()
    refined = refined_through_simulator(result, problem, stage.dt, stage.shooting, progress)
    refined_predictions = prediction_checks(config, grids, refined)
    after = prediction_mismatch(grids, refined, refined_predictions)
    if after is not None and after.ratio < mismatch.ratio:
        return Calibration(refined, grids, refined_predictions, (
            f"{mismatch}: refitted through the config's simulator "
            f"(method.simulation_refinement: auto), which misses by {after.ratio:.1f}×"))
    shown = "no prediction" if after is None else f"{after.ratio:.1f}×"
    return Calibration(
        _joint_fit_kept(result, refined), grids, predictions,
        f"{mismatch}; refitting through the config's simulator predicted no better ({shown}), "
        "so the rigid-hinge fit is kept: look for what neither model has (friction, the input "
        "model) — or a motion too sensitive to predict that far")


@dataclass(frozen=True)
class StageFollowing:
    """How closely the simulation-error stage's simulations follow the recordings.

    ``rms_rad``: their angle error over the scored samples (RMS) [rad], each simulated from its
    fitted start over ``segment_s`` [s]; ``ratio``: that over the joint fit's angle noise (RMS
    over recordings and joints, at least :data:`~mb_estimation.pipeline.NOISE_FLOOR_RAD`).
    """

    rms_rad: float
    ratio: float
    segment_s: float

    @property
    def follows(self) -> bool:
        return self.ratio <= FOLLOWS_NOISE_RATIO


def stage_following(grids: Sequence[GridData], result: EstimationResult
                    ) -> StageFollowing | None:
    """The last stage's :class:`StageFollowing`; None unless it is a simulation-error fit.

    The result's states are the joint fit's (the stage fits segment starts of its own), so
    :func:`~mb_estimation.pipeline.fit_noise_rad` of ``result`` is the joint fit's noise.
    """
    if not result.refinement or result.refinement[-1].formulation != "simulation":
        return None
    stage = result.refinement[-1]
    noise = float(np.sqrt(np.mean(np.square(fit_noise_rad(grids, result)))))
    rms = float(np.sqrt(stage.cost))
    return StageFollowing(rms, rms / max(noise, NOISE_FLOOR_RAD), float(stage.segment_s))
