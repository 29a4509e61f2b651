"""Plan and fit: a calibration's stages as data, run in order, each warm-started from the last.

:func:`plan_of` reads a :class:`~mb_estimation.setup.Setup` (its steps, its model,
``advanced.estimator``, ``method.simulation_refinement``, the recordings' length) into a
:class:`Plan`: the paper's single fit, or the consistent path's joint-coordinate fits coarse to
fine followed by a simulation-error fit through the model the hinges declare. :func:`fit` runs
its stages in order and returns one :class:`Fit` holding a typed record per stage
(:class:`LevelFit`, :class:`SimulationFit`); it reports one :class:`Progress` event per stage
start and per iteration. Which of the fits is the calibration's result (the joint fit, or the
simulation-error fit as its stage's :class:`Keep` rule says) is decided after the fit, by the
assessment that reads both (:mod:`mb_estimation.assess`).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from mb_estimation.estimation import (
    EstimationResult,
    IterationRecord,
    estimate,
    fit_joint_level,
    kappa_per_step,
    simulation_refit,
    with_refit,
)
from mb_estimation.estimation.shooting import ShootingResult, ShootingSettings
from mb_estimation.setup import Setup
from mb_estimation.signals import GridData


class StageKind(str, enum.Enum):
    """What a stage fits (prints as its value)."""

    PAPER = "paper"  # the paper's single fit in maximal coordinates (§3)
    JOINT = "joint"  # the rigid limit in joint coordinates, a level of the consistent path
    SIMULATION = "simulation"  # multiple shooting through the model the hinges declare

    def __str__(self) -> str:
        return self.value


class Keep(str, enum.Enum):
    """When a simulation-error fit replaces the joint fit before it."""

    ALWAYS = "always"
    #: where its simulations follow the recordings, else where it predicts them no worse
    IF_IT_FOLLOWS = "if_it_follows"
    #: where the joint fit mispredicts and it predicts better (``simulation_refinement: auto``)
    IF_IT_PREDICTS_BETTER = "if_it_predicts_better"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Stage:
    """One fit of a calibration: what it fits, at which step [s] (and how it shoots)."""

    kind: StageKind
    dt: float
    shooting: ShootingSettings | None = None
    keep: Keep = Keep.ALWAYS


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
    """One event of a running fit: a stage starts, or one of its fits iterates.

    ``index``: the stage's place in ``stages`` (the plan's); ``iteration``: None when the stage
    starts (``steps``: the grid steps it fits over ``recordings`` recordings), else the
    iteration, numbered on over the joint stages; ``cost``: the joint fits' objective per step,
    or the simulation fit's mean squared angle error [rad²]; ``record``: a joint or paper fit's
    iteration; ``values``: a simulation fit's current free values; ``shooting``: its segment
    length and simulation step [s].
    """

    index: int
    stages: tuple[Stage, ...]
    iteration: int | None = None
    steps: int = 0
    recordings: int = 0
    cost: float = float("nan")
    record: IterationRecord | None = None
    values: Mapping[str, float] = field(default_factory=dict)
    shooting: tuple[float, float] | None = None

    @property
    def stage(self) -> Stage:
        return self.stages[self.index]


def _shortest_s(grids: tuple[GridData, ...]) -> float:
    """The shortest recording's length on its grid [s]."""
    return min((grid.num_steps - 1) * grid.dt for grid in grids)


def plan_of(setup: Setup, *, estimate_parameters: bool = True) -> Plan:
    """The stages the setup's config asks for.

    ``paper``: the single fit at its step. ``consistent``: joint-coordinate fits at each of the
    setup's steps (states only: the finest alone), then, unless
    ``method.simulation_refinement`` is ``off`` or only the states are fitted, the
    simulation-error fit through the setup's model: kept ``always`` for compliant hinges and
    ``if_it_follows`` for rigid ones; with ``auto`` ``if_it_predicts_better``. Recordings
    shorter than one of its segments leave it out, with a note.
    """
    config = setup.config
    if config.advanced.estimator == "paper":
        return Plan((Stage(StageKind.PAPER, setup.steps[-1]),), estimate_parameters)
    steps = setup.steps if estimate_parameters else setup.steps[-1:]
    joint = tuple(Stage(StageKind.JOINT, dt) for dt in steps)
    mode = config.method.simulation_refinement
    if not estimate_parameters or mode == "off":
        return Plan(joint, estimate_parameters)
    dt, shooting = setup.model.shooting(config.advanced.simulation_segment_s)
    segment_s = shooting.segment_s + shooting.lead_s
    shortest = _shortest_s(setup.grids)
    if shortest < segment_s:
        return Plan(joint, note=(
            f"the recordings ({shortest:.3g} s) are shorter than one segment of the "
            f"simulation-error fit ({segment_s:g} s): the joint fit is kept"
            + setup.model.short_recordings_note))
    keep = (Keep.IF_IT_PREDICTS_BETTER if mode == "auto" else
            Keep.ALWAYS if setup.model.refit_always_kept else Keep.IF_IT_FOLLOWS)
    return Plan((*joint, Stage(StageKind.SIMULATION, dt, shooting, keep)))


@dataclass(frozen=True)
class LevelFit:
    """A joint level (or the paper's fit): its stage, κ per step and its own solve."""

    stage: Stage
    kappa: float
    result: EstimationResult


@dataclass(frozen=True)
class SimulationFit:
    """The simulation-error stage: its shooting fit and the joint fit with its values."""

    stage: Stage
    refit: ShootingResult
    result: EstimationResult


@dataclass(frozen=True)
class Fit:
    """Every stage a plan ran, and the fits they give.

    ``levels``: the joint levels coarse to fine (or the paper's one fit), on the setup's grids
    (κ per step scaled by the setup's rest inertia); ``joint``: the finest level's result with
    the iterations, history and times of every level; ``simulation``: the simulation-error
    stage, where it ran; ``note``: the plan's.
    """

    plan: Plan
    levels: tuple[LevelFit, ...]
    joint: EstimationResult
    simulation: SimulationFit | None = None

    @property
    def note(self) -> str | None:
        return self.plan.note


def _joint_summary(levels: tuple[LevelFit, ...], history: tuple[IterationRecord, ...]
                   ) -> EstimationResult:
    """The finest level's result with the history, iterations and times of every level."""
    result = levels[-1].result
    steps = [level.stage.dt for level in levels]
    iterations = sum(level.result.iterations for level in levels)
    message = (f"{result.message.split(';')[0]} at the finest step; {iterations} iterations "
               f"over steps {', '.join(f'{step:g}' for step in steps)} s, cost "
               f"{result.cost:.4g} (observation {result.observation_mse:.4g}, impulse "
               f"{result.impulse_mse:.4g})")
    return dataclasses.replace(
        result, history=history, iterations=iterations, message=message,
        compile_time_s=sum(level.result.compile_time_s for level in levels),
        solve_time_s=sum(level.result.solve_time_s for level in levels))


def fit(setup: Setup, plan: Plan | None = None,
        progress: Callable[[Progress], None] | None = None) -> Fit:
    """Fit ``plan``'s stages (default :func:`plan_of` the setup) in order.

    Each stage starts from the last one's result. ``progress`` sees a :class:`Progress` per
    stage start and per iteration.
    """
    plan = plan_of(setup) if plan is None else plan
    rest_inertia = setup.rest_inertia
    levels: list[LevelFit] = []
    history: list[IterationRecord] = []
    simulation = None
    previous: EstimationResult | None = None
    joint: EstimationResult | None = None
    grids: tuple[GridData, ...] = setup.grids
    for index, stage in enumerate(plan.stages):
        if stage.kind is not StageKind.SIMULATION:
            grids = setup.level_grids[setup.steps.index(stage.dt)]
        problem = setup.problem(grids, estimate_parameters=plan.estimate_parameters)
        if stage.kind is StageKind.JOINT:  # every level on the finest level's programs
            problem = dataclasses.replace(problem, padded_steps=max(
                grid.num_steps for grid in setup.level_grids[-1]))
        if progress is not None:
            progress(Progress(index, plan.stages, recordings=len(grids),
                              steps=sum(grid.num_steps for grid in grids)))
        if stage.kind is StageKind.SIMULATION:
            relay = None if progress is None else _shots_to(progress, index, plan.stages)
            refit = simulation_refit(joint, problem, stage.dt, stage.shooting, relay)
            simulation = SimulationFit(stage, refit, with_refit(joint, refit))
            break
        offset = len(history)
        relay = None if progress is None else _iterations_to(progress, index, plan.stages,
                                                             offset)
        if stage.kind is StageKind.PAPER:
            kappa = setup.solver.kappa
            result = estimate(problem, setup.solver, progress=relay)
        else:
            kappa = kappa_per_step(setup.solver.kappa, stage.dt, rest_inertia)
            result = fit_joint_level(problem, dataclasses.replace(setup.solver, kappa=kappa),
                                     previous, progress=relay)
        history += [dataclasses.replace(entry, iteration=entry.iteration + offset)
                    for entry in result.history]
        levels.append(LevelFit(stage, kappa, result))
        previous = result
        joint = (result if stage.kind is StageKind.PAPER
                 else _joint_summary(tuple(levels), tuple(history)))
    return Fit(plan, tuple(levels), joint, simulation)


def _iterations_to(progress, index: int, stages, offset: int):
    """A joint or paper fit's iterations as :class:`Progress` events, numbered on."""
    def relay(record: IterationRecord) -> None:
        record = dataclasses.replace(record, iteration=record.iteration + offset)
        progress(Progress(index, stages, iteration=record.iteration, cost=record.cost,
                          record=record))
    return relay


def _shots_to(progress, index: int, stages):
    """A simulation fit's iterations as :class:`Progress` events."""
    def relay(iteration: int, cost: float, values: dict, shooting: tuple) -> None:
        progress(Progress(index, stages, iteration=iteration, cost=cost, values=values,
                          shooting=shooting))
    return relay

