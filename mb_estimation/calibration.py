"""A finished calibration: what was set up, fitted, assessed and judged — one object.

The writers (:mod:`mb_estimation.results`, :mod:`mb_estimation.report`, the command line's
printing) each take a :class:`Calibration` and read what they show from it; none computes a
check again. Plain data: made by :func:`mb_estimation.api.calibrate`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from mb_estimation.assess import Assessment
from mb_estimation.estimation import KAPPA_REFERENCE_INERTIA, EstimationResult
from mb_estimation.fitting import Fit, LevelFit, SimulationFit, StageKind
from mb_estimation.setup import Setup
from mb_estimation.signals import GridData
from mb_estimation.verdict import Verdict


@dataclass(frozen=True)
class StageSummary:
    """One stage of a calibration as the outputs show it.

    ``values``/``std``: the free parameters this stage fitted (the simulation-error stage may
    fit fewer than the joint levels); ``kappa``: the joint level's weight per step (nan for the
    simulation-error stage); ``cost``: the joint fits' objective per step, or the simulation
    fit's mean squared angle error [rad²]; ``segment_s``, ``segments_tried`` [s]: the shooting
    segments accepted and fitted.
    """

    kind: StageKind
    dt: float
    kappa: float
    values: dict[str, np.ndarray]
    std: dict[str, np.ndarray]
    cost: float
    iterations: int
    segment_s: float | None = None
    segments_tried: tuple[float, ...] = ()

    @property
    def label(self) -> str:
        """The stage in a few words: its step, or the simulator's."""
        if self.kind is StageKind.SIMULATION:
            return f"simulator, step {self.dt:g} s"
        return f"h = {self.dt:g} s"

    @classmethod
    def of_level(cls, level: LevelFit) -> StageSummary:
        result = level.result
        return cls(level.stage.kind, level.stage.dt, level.kappa,
                   {name: np.asarray(result.parameters[name]) for name in result.free},
                   {name: np.asarray(result.std[name]) for name in result.free},
                   result.cost, result.iterations)

    @classmethod
    def of_simulation(cls, simulation: SimulationFit) -> StageSummary:
        refit = simulation.refit
        return cls(StageKind.SIMULATION, refit.step_s, float("nan"),
                   {name: np.asarray(refit.values[name]) for name in refit.names},
                   {name: np.atleast_1d(refit.std[name]) for name in refit.names},
                   refit.cost, refit.iterations, refit.segment_s, tuple(refit.tried))


@dataclass(frozen=True)
class Calibration:
    """A calibration: its setup, its fit, the assessment of the fit kept, and the verdict."""

    setup: Setup
    fit: Fit
    assessment: Assessment
    verdict: Verdict

    @property
    def result(self) -> EstimationResult:
        """The calibration's values, std and states: the fit the assessment kept."""
        return self.assessment.result

    @property
    def grids(self) -> tuple[GridData, ...]:
        """The recordings on the grid of the result's states."""
        return self.setup.grids

    @property
    def notes(self) -> tuple[str, ...]:
        """What reading did to the recordings."""
        return self.setup.notes

    @property
    def units(self) -> dict[str, str]:
        """The free parameters' units."""
        spec = self.setup.config.rig_spec
        return {name: spec.parameter(name).unit for name in self.result.free}

    @property
    def stages(self) -> tuple[StageSummary, ...]:
        """The consistent path's levels and, where kept, the simulation-error stage.

        Empty for the paper's single fit.
        """
        fit = self.fit
        if fit.levels[0].stage.kind is StageKind.PAPER:
            return ()
        shown = [StageSummary.of_level(level) for level in fit.levels]
        if self.assessment.refit_kept:
            shown.append(StageSummary.of_simulation(fit.simulation))
        return tuple(shown)

    @property
    def method(self) -> dict:
        """The method settings as written into parameters.yaml, with what the fit used.

        The ``method`` section's keys, the ``advanced`` section under ``advanced``, then the
        joint levels' steps and κ per step, and the rest inertia κ was scaled by.
        """
        config = self.setup.config
        summary = {**asdict(config.method), "advanced": asdict(config.advanced)}
        joint = [level for level in self.fit.levels if level.stage.kind is StageKind.JOINT]
        if joint:
            summary["steps"] = [float(level.stage.dt) for level in joint]
            summary["kappa_per_step"] = [float(level.kappa) for level in joint]
            summary["rest_inertia"] = float(self.setup.rest_inertia)
            summary["kappa_reference_inertia"] = float(KAPPA_REFERENCE_INERTIA)
        return summary
